package llm

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/flowrun/flowrun/clock"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/llmconf"
)

// fakeClock moves only when someone sleeps.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	return ctx.Err()
}

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestPacingUnderConcurrency(t *testing.T) {
	cases := []struct {
		name     string
		lim      RateLimits
		tokens   int
		interval time.Duration
	}{
		{"rpm", RateLimits{RPM: 120}, 10, 500 * time.Millisecond},
		{"tpm", RateLimits{TPM: 6000}, 100, time.Second},
		{"both, tpm binds", RateLimits{RPM: 600, TPM: 6000}, 100, time.Second},
		{"both, rpm binds", RateLimits{RPM: 6, TPM: 1_000_000}, 100, 10 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := &limiter{clock: &fakeClock{now: epoch}}
			l.tighten(tc.lim)
			var mu sync.Mutex
			var starts []time.Time
			var wg sync.WaitGroup
			for range 50 {
				wg.Go(func() {
					s, _ := l.reserve(tc.tokens)
					mu.Lock()
					starts = append(starts, s)
					mu.Unlock()
				})
			}
			wg.Wait()
			sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
			if !starts[0].Equal(epoch) {
				t.Errorf("first start %v, want now", starts[0])
			}
			for i := 1; i < len(starts); i++ {
				if gap := starts[i].Sub(starts[i-1]); gap != tc.interval {
					t.Fatalf("start %d is %v after the previous, want %v", i, gap, tc.interval)
				}
			}
		})
	}
}

func TestTPMSettlesActualUsage(t *testing.T) {
	clk := &fakeClock{now: epoch}
	l := &limiter{clock: clk}
	l.tighten(RateLimits{TPM: 600}) // 10 tokens a second
	release, err := l.acquire(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	release(300) // the call used 200 more tokens than estimated
	if s, _ := l.reserve(1); !s.Equal(epoch.Add(30 * time.Second)) {
		t.Errorf("next start %v, want 30s in", s.Sub(epoch))
	}
}

func TestMaxConcurrency(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "ok", Delay: 10 * time.Millisecond} })
	c, _ := testClient(t, srv)
	// Two configs for the same endpoint and model share one limiter; the
	// stricter max_concurrency wins.
	loose := &llmconf.Model{Name: "a", Model: "gpt-4.1-nano", MaxConcurrency: 8}
	tight := &llmconf.Model{Name: "b", Model: "gpt-4.1-nano", MaxConcurrency: 3}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		m := loose
		if i%2 == 1 {
			m = tight
		}
		wg.Go(func() {
			_, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("hi")})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if srv.Calls() != 40 || srv.MaxInFlight() > 3 {
		t.Errorf("%d calls, %d at once; want 40 calls, at most 3 at once", srv.Calls(), srv.MaxInFlight())
	}
}

func TestRPMEndToEnd(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Text("ok") })
	clk := &fakeClock{now: epoch}
	c, _ := testClient(t, srv, func(o *Options) { o.Now, o.Sleep = clk.Now, clk.Sleep })
	m := &llmconf.Model{Name: "m", Model: "gpt-4o-mini", RPM: 60}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("hi")}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// 20 requests at 60 a minute: the last may start 19s after the first.
	if got := clk.Now().Sub(epoch); got < 19*time.Second {
		t.Errorf("20 requests at rpm 60 took %v of clock time, want at least 19s", got)
	}
}

func TestSlotWaitCancelled(t *testing.T) {
	l := &limiter{clock: clock.Real{}}
	l.tighten(RateLimits{MaxConcurrency: 1})
	release, err := l.acquire(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.acquire(ctx, 1); err == nil {
		t.Fatal("acquired a slot that was taken")
	}
	release(0)
	release2, err := l.acquire(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	release2(0)
	if l.inFlight != 0 || len(l.waiters) != 0 {
		t.Errorf("inFlight %d, %d waiters after all released", l.inFlight, len(l.waiters))
	}
}
