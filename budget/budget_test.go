package budget

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"
)

// TestReservationsNeverPassTheCap: sixteen callers reserving $0.30 at once
// from a $1 cap, each settling at what it reserved: three are granted at a
// time at most, the others wait, and once $0.90 is settled every further
// reservation is refused.
func TestReservationsNeverPassTheCap(t *testing.T) {
	c := New("cap ($1.00)", 1, 0, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted, inFlight, most := 0, 0, 0
	for range 16 {
		wg.Go(func() {
			r, err := c.Reserve(context.Background(), 0.3, 0.3)
			if err != nil {
				var refused *ExceededError
				if !errors.As(err, &refused) {
					t.Error(err)
				}
				return
			}
			mu.Lock()
			granted++
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			inFlight--
			mu.Unlock()
			r.Settle(r.USD())
		})
	}
	wg.Wait()
	if granted != 3 || most > 3 || math.Abs(c.Spent()-0.9) > 1e-9 {
		t.Fatalf("%d granted (%d at once), $%v spent: want 3 of $0.30", granted, most, c.Spent())
	}
}

// TestAReservationTakesFromItsParent: a run's cap inside a batch's takes
// what both can grant; a range reservation gets all that is free; a
// refused one names the cap that refused it; settling counts in both.
func TestAReservationTakesFromItsParent(t *testing.T) {
	ctx := context.Background()
	batch := New("batch ($2.00)", 2, 1.5, nil)
	run := New("run", 0, 0, batch)
	r, err := run.Reserve(ctx, 0.1, math.Inf(1))
	if err != nil || r.USD() != 0.5 {
		t.Fatalf("granted %v, %v: want the batch's $0.50 left", r, err)
	}
	r.Settle(0.2)
	if run.Spent() != 0.2 || batch.Spent() != 1.7 || batch.Free() < 0.3-1e-9 {
		t.Fatalf("run $%v, batch $%v (free $%v) after settling $0.20", run.Spent(), batch.Spent(), batch.Free())
	}
	_, err = run.Reserve(ctx, 0.5, 0.5)
	var refused *ExceededError
	if !errors.As(err, &refused) || refused.Cap != "batch ($2.00)" || refused.Error() != "batch ($2.00) reached: $1.70 spent, and the next model call may cost up to $0.50" {
		t.Fatalf("a reservation past the batch's cap: %v", err)
	}
	if run.Free() < 0.3-1e-9 || run.Free() > 0.3+1e-9 {
		t.Fatalf("free after a refusal: $%v, want $0.30 (nothing held)", run.Free())
	}
}

// TestWaitingReservationEndsWithItsContext: a reservation that waits for
// calls in flight returns the context's error when it ends first.
func TestWaitingReservationEndsWithItsContext(t *testing.T) {
	c := New("cap", 1, 0, nil)
	if _, err := c.Reserve(context.Background(), 0.8, 0.8); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(5 * time.Millisecond); cancel() }()
	if _, err := c.Reserve(ctx, 0.5, 0.5); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting reservation: %v, want cancelled", err)
	}
}
