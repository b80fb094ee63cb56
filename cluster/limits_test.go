package cluster

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/flowrun/flowrun/llm"
)

// TestSharedBudgetAcrossConnections: two workers' connections draw on one
// budget: tpm paces the second request after the first one's tokens, and
// with max_concurrency 1 the second waits for the first's release.
func TestSharedBudgetAcrossConnections(t *testing.T) {
	ctx := context.Background()
	url := embeddedNATS(t)
	var workers []*sharedLimits
	for range 2 {
		c, err := connect(ctx, Options{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.nc.Close)
		workers = append(workers, &sharedLimits{c: c})
	}

	tpm := llm.RateLimits{TPM: 6000} // 10 ms a token
	start := time.Now()
	release, err := workers[0].Acquire(ctx, "http://x gpt", tpm, 30)
	if err != nil {
		t.Fatal(err)
	}
	release(30)
	if _, err := workers[1].Acquire(ctx, "http://x gpt", tpm, 30); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 280*time.Millisecond {
		t.Errorf("tpm 6000: the second request of 30 tokens started %s after the first, want 300ms", took)
	}

	one := llm.RateLimits{MaxConcurrency: 1}
	release, err = workers[0].Acquire(ctx, "http://y gpt", one, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, done := make(chan time.Time, 1), make(chan struct{})
	go func() {
		defer close(done)
		r, err := workers[1].Acquire(ctx, "http://y gpt", one, 0)
		if err != nil {
			t.Error(err)
			got <- time.Time{}
			return
		}
		got <- time.Now()
		r(0)
	}()
	time.Sleep(200 * time.Millisecond)
	released := time.Now()
	release(0)
	if at := <-got; at.Before(released) {
		t.Errorf("max_concurrency 1: the second request started %s before the first was released", released.Sub(at))
	}
	<-done
}

// TestSharedBudgetIgnoresOutOfRange: a budget someone on the account set
// to start the next request in the year 2100, and a lease held until
// then, are ignored: a request with rpm, tpm and max_concurrency limits
// goes ahead instead of waiting for them.
func TestSharedBudgetIgnoresOutOfRange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := testConn(t, Options{URL: embeddedNATS(t)})
	y2100 := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	data, _ := json.Marshal(budget{NextReq: y2100, NextTok: y2100, Leases: map[string]int64{"stuck": y2100}})
	_, err := c.limits.Put(ctx, budgetKey("http://x gpt"), data)
	must(t, err)
	release, err := (&sharedLimits{c: c}).Acquire(ctx, "http://x gpt", llm.RateLimits{RPM: 60, TPM: 6000, MaxConcurrency: 1}, 10)
	if err != nil {
		t.Fatalf("a request under a budget set to the year 2100: %v", err)
	}
	release(10)
}
