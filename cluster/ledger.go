package cluster

import (
	"context"
	"encoding/json"

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
	Limit float64            `json:"limit"`
	Spent float64            `json:"spent"`
	Held  map[string]float64 `json:"held,omitempty"` // reservation id -> USD
}

// kvLedger is a cost cap shared by every process on the NATS account:
// one JetStream key-value entry, changed only by compare-and-set on its
// revision, so that reservations made at once on several workers never
// together pass the limit. It implements costcap.Ledger.
type kvLedger struct {
	kv   jetstream.KeyValue
	key  string
	name string // what the cap is called in its errors
}

// createKVLedger writes the ledger under key with limit USD of which
// spent is spent, replacing what an earlier attempt left there.
func createKVLedger(ctx context.Context, kv jetstream.KeyValue, key, name string, limit, spent float64) (*kvLedger, error) {
	data, _ := json.Marshal(costEntry{Limit: limit, Spent: spent})
	if _, err := kv.Put(ctx, key, data); err != nil {
		return nil, fmt.Errorf("writing the cost ledger %s: %w", key, err)
	}
	return &kvLedger{kv: kv, key: key, name: name}, nil
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
				refused = &costcap.ExceededError{Cap: l.name, Limit: e.Limit, Spent: e.Spent, Need: least}
				return false
			case least > free+costcap.Slack:
				waits = true
				return false
			}
			grant = max(least, min(most, free))
			e.Held[id] = grant
			return true
		})
		switch {
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

// Spent is what the ledger has settled.
func (l *kvLedger) Spent(ctx context.Context) (float64, error) {
	e, _, err := l.get(ctx)
	return e.Spent, err
}

func (l *kvLedger) get(ctx context.Context) (costEntry, uint64, error) {
	entry, err := l.kv.Get(ctx, l.key)
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
