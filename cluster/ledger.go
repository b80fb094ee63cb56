package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	costcap "github.com/flowrun/flowrun/budget"
	"github.com/flowrun/flowrun/figures"
)

// costEntry is a batch's cost ledger as its key-value entry holds it.
type costEntry struct {
	Name  string             `json:"name"` // what the cap is called in its errors
	Limit float64            `json:"limit"`
	Spent float64            `json:"spent"`
	Held  map[string]float64 `json:"held,omitempty"` // reservation id -> USD
	// Refused is what the first call refused would have needed, 0 while
	// none was.
	Refused float64 `json:"refused,omitempty"`
}

// kvLedger is a cost cap shared by every process on the NATS account:
// one JetStream key-value entry, changed only by compare-and-set on its
// revision, so that reservations made at once on several workers never
// together pass the limit. It implements costcap.Ledger.
type kvLedger struct {
	kv  jetstream.KeyValue
	key string
}

// createKVLedger writes the ledger under key, named name, of limit USD
// of which spent is spent, replacing what an earlier attempt left there.
func createKVLedger(ctx context.Context, kv jetstream.KeyValue, key, name string, limit, spent float64) (*kvLedger, error) {
	data, _ := json.Marshal(costEntry{Name: name, Limit: limit, Spent: spent})
	if _, err := kv.Put(ctx, key, data); err != nil {
		return nil, fmt.Errorf("writing the cost ledger %s: %w", key, err)
	}
	return &kvLedger{kv: kv, key: key}, nil
}

// errLedgerDeleted is a ledger entry found deleted (or purged): anyone
// who may write the bucket can do that, and what was spent is lost.
var errLedgerDeleted = errors.New("its entry was deleted")

// deleted is the refusal of every call under a deleted ledger: it fails
// closed rather than start again from $0.
func (l *kvLedger) deleted() *costcap.ExceededError {
	return &costcap.ExceededError{Cap: "the cost ledger " + l.key,
		Unknown: "its entry was deleted, so what was spent under it is unknown; running the batch again writes it anew from the spend its store recorded"}
}

// State is what the ledger has settled and the first call it refused.
func (l *kvLedger) State(ctx context.Context) (spent float64, refused *costcap.ExceededError, err error) {
	e, _, err := l.get(ctx)
	if errors.Is(err, errLedgerDeleted) {
		return 0, l.deleted(), nil
	}
	if err != nil {
		return 0, nil, err
	}
	if e.Refused > 0 {
		refused = &costcap.ExceededError{Cap: e.Name, Limit: e.Limit, Spent: e.Spent, Need: e.Refused}
	}
	return e.Spent, refused, nil
}

// Reserve implements costcap.Ledger.
func (l *kvLedger) Reserve(ctx context.Context, least, most float64) (costcap.Reservation, error) {
	least, most = max(least, 0), max(most, least, 0)
	id := nuid.Next()
	var grant float64
	for {
		var refused error
		waits := false
		err := l.update(ctx, func(e *costEntry) bool {
			held := 0.0
			for _, usd := range e.Held {
				held += usd
			}
			free := e.Limit - e.Spent - held
			switch {
			case e.Spent+least > e.Limit+costcap.Slack:
				refused = &costcap.ExceededError{Cap: e.Name, Limit: e.Limit, Spent: e.Spent, Need: least}
				if e.Refused > 0 {
					return false
				}
				e.Refused = max(least, costcap.Slack)
				return true
			case least > free+costcap.Slack:
				waits = true
				return false
			}
			grant = max(least, min(most, free))
			e.Held[id] = grant
			return true
		})
		switch {
		case errors.Is(err, errLedgerDeleted):
			return nil, l.deleted()
		case err != nil:
			return nil, err
		case refused != nil:
			return nil, refused
		case !waits:
			return &kvReservation{l: l, id: id, usd: grant}, nil
		}
		// Calls in flight elsewhere hold what this one needs: they settle.
		select {
		case <-time.After(time.Duration(5+rand.IntN(20)) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (l *kvLedger) get(ctx context.Context) (costEntry, uint64, error) {
	entry, err := l.kv.Get(ctx, l.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		// The coordinator writes the entry before it queues a job that
		// reserves from it: missing, it was deleted.
		err = errLedgerDeleted
	}
	if err != nil {
		return costEntry{}, 0, fmt.Errorf("reading the cost ledger %s: %w", l.key, err)
	}
	var e costEntry
	if err := json.Unmarshal(entry.Value(), &e); err != nil {
		return costEntry{}, 0, fmt.Errorf("the cost ledger %s is not JSON: %w", l.key, err)
	}
	if e.Held == nil {
		e.Held = map[string]float64{}
	}
	return e, entry.Revision(), nil
}

// update applies f to the entry by compare-and-set, reading it again
// when another process changed it in between; nothing is written when f
// returns false.
func (l *kvLedger) update(ctx context.Context, f func(*costEntry) bool) error {
	for ctx.Err() == nil {
		e, rev, err := l.get(ctx)
		if err != nil {
			return err
		}
		if !f(&e) {
			return nil
		}
		data, _ := json.Marshal(e)
		_, err = l.kv.Update(ctx, l.key, data, rev)
		if err == nil || !isWrongRevision(err) {
			return err
		}
	}
	return ctx.Err()
}

type kvReservation struct {
	l   *kvLedger
	id  string
	usd float64
}

func (r *kvReservation) USD() float64 { return r.usd }

// Settle implements costcap.Reservation; it outlives the call's context,
// which may have ended (a cancelled call settles at its reservation).
func (r *kvReservation) Settle(actual float64) {
	_ = r.l.update(context.Background(), func(e *costEntry) bool {
		if _, ok := e.Held[r.id]; !ok {
			return false
		}
		delete(e.Held, r.id)
		e.Spent = figures.RoundUSD(e.Spent + max(actual, 0))
		return true
	})
}
