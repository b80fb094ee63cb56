package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	costcap "github.com/flowrun/flowrun/budget"
)

// TestKVLedgerHoldsAcrossWorkers: eight reservers on two connections (two
// workers) draw on one $1 ledger in JetStream, each call reserving $0.30
// and settling at it: reservations wait while others are in flight, the
// fourth can never fit and is refused, and what was settled never passes
// the cap.
func TestKVLedgerHoldsAcrossWorkers(t *testing.T) {
	ctx := context.Background()
	url := embeddedNATS(t)
	var ledgers []*kvLedger
	for i := range 2 {
		c := testConn(t, Options{URL: url})
		if i == 0 {
			if _, err := createKVLedger(ctx, c.buckets[ledgerBucket], "b1", "--max-cost-usd 1", 1, 0); err != nil {
				t.Fatal(err)
			}
		}
		ledgers = append(ledgers, &kvLedger{kv: c.buckets[ledgerBucket], key: "b1"})
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted, refused := 0, 0
	for i := range 8 {
		wg.Go(func() {
			for {
				r, err := ledgers[i%2].Reserve(ctx, 0.3, 0.3)
				var exceeded *costcap.ExceededError
				if errors.As(err, &exceeded) {
					mu.Lock()
					refused++
					mu.Unlock()
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				granted++
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
				r.Settle(r.USD())
			}
		})
	}
	wg.Wait()
	spent, first, err := ledgers[1].State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if granted != 3 || refused != 8 || spent > 1+1e-9 || spent < 0.9-1e-9 {
		t.Fatalf("%d reservations granted, %d refused, $%v settled: want 3 of $0.30 within $1", granted, refused, spent)
	}
	if first == nil || first.Need != 0.3 || first.Cap != "--max-cost-usd 1" {
		t.Fatalf("the ledger's first refusal: %+v", first)
	}
}

// TestKVLedgerDeletedRefusesEveryCall: a delete marker on a ledger's
// entry, which anyone who may write the bucket can leave, loses what was
// spent; the ledger then refuses every call, on every worker, rather
// than start again from $0.
func TestKVLedgerDeletedRefusesEveryCall(t *testing.T) {
	ctx := context.Background()
	url := embeddedNATS(t)
	coordinator, worker := testConn(t, Options{URL: url}), testConn(t, Options{URL: url})
	if _, err := createKVLedger(ctx, coordinator.buckets[ledgerBucket], "b1", "--max-cost-usd 1", 1, 0); err != nil {
		t.Fatal(err)
	}
	l := &kvLedger{kv: worker.buckets[ledgerBucket], key: "b1"}
	r, err := l.Reserve(ctx, 0.3, 0.3)
	if err != nil {
		t.Fatal(err)
	}
	r.Settle(0.3)
	kv := worker.buckets[ledgerBucket]
	if err := kv.Delete(ctx, "b1"); err != nil {
		t.Fatal(err)
	}
	_, err = l.Reserve(ctx, 0.01, 0.01)
	var exceeded *costcap.ExceededError
	if !errors.As(err, &exceeded) || exceeded.Unknown == "" {
		t.Fatalf("a reservation under the deleted ledger: %v, want a refusal", err)
	}
	_, refused, err := (&kvLedger{kv: coordinator.buckets[ledgerBucket], key: "b1"}).State(ctx)
	if err != nil || refused == nil {
		t.Fatalf("the deleted ledger's state: refused %v, %v; want a refusal", refused, err)
	}
	if _, err := kv.Get(ctx, "b1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the refusal wrote the entry again: %v", err)
	}
}
