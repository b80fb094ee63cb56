package llm

import (
	"context"
	"sync"
	"time"

	"github.com/flowrun/flowrun/clock"
)

// RateLimits bound the requests sent for one endpoint and model, from the
// model config's rpm, tpm and max_concurrency. Zero means unlimited.
type RateLimits struct {
	RPM            int // requests started per minute
	TPM            int // estimated tokens per minute
	MaxConcurrency int // requests in flight
}

// SharedLimits is a rate budget kept outside the process (flowrun
// workers keep it in NATS JetStream), so that every process using it
// shares each model's rpm, tpm and max_concurrency instead of each
// sending at the full rate. A request waits for its own process's limiter
// first, then for the shared budget.
type SharedLimits interface {
	// Acquire waits until the budget of key (an endpoint and model) allows
	// one more request of about tokens tokens under lim. release is called
	// once the request is done, with the tokens it used (0 if unknown).
	Acquire(ctx context.Context, key string, lim RateLimits, tokens int) (release func(used int), err error)
}

// limiters is the registry of rate limiters, one per endpoint and model,
// shared by every caller of a Client.
type limiters struct {
	clock  clock.Clock
	shared SharedLimits
	mu     sync.Mutex
	byKey  map[string]*limiter
}

// get returns the limiter for key, tightened to lim: when two model
// configs share an endpoint and model, the stricter non-zero limit wins.
func (r *limiters) get(key string, lim RateLimits) *limiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.byKey[key]
	if l == nil {
		l = &limiter{clock: r.clock, key: key, shared: r.shared}
		r.byKey[key] = l
	}
	l.tighten(lim)
	return l
}

// limiter paces requests: rpm and tpm are spread evenly (a request may
// start once the previous ones' share of the minute has passed, so no
// 60-second window ever holds more than its limit), and at most
// MaxConcurrency requests are in flight.
type limiter struct {
	clock  clock.Clock
	key    string
	shared SharedLimits
	mu     sync.Mutex
	lim    RateLimits
	// nextReq and nextTok are the earliest times the rpm and tpm budgets
	// allow the next request to start.
	nextReq, nextTok time.Time
	inFlight         int
	waiters          []chan struct{} // FIFO, for a concurrency slot
}

func (l *limiter) tighten(lim RateLimits) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lim.RPM = stricter(l.lim.RPM, lim.RPM)
	l.lim.TPM = stricter(l.lim.TPM, lim.TPM)
	l.lim.MaxConcurrency = stricter(l.lim.MaxConcurrency, lim.MaxConcurrency)
}

func stricter(a, b int) int {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}

// acquire waits for a concurrency slot and for the pace to allow a request
// of about tokens tokens. The returned release must be called when the
// request is done, with the tokens it actually used (0 if unknown).
func (l *limiter) acquire(ctx context.Context, tokens int) (release func(used int), err error) {
	if err := l.slot(ctx); err != nil {
		return nil, err
	}
	start, charged := l.reserve(tokens)
	if wait := start.Sub(l.clock.Now()); wait > 0 {
		if err := l.clock.Sleep(ctx, wait); err != nil {
			l.release()
			return nil, err
		}
	}
	shared := func(int) {}
	if lim := l.limits(); l.shared != nil && lim != (RateLimits{}) {
		if shared, err = l.shared.Acquire(ctx, l.key, lim, tokens); err != nil {
			l.release()
			return nil, err
		}
	}
	var once sync.Once
	return func(used int) {
		once.Do(func() {
			shared(used)
			l.settle(charged, used)
			l.release()
		})
	}, nil
}

func (l *limiter) limits() RateLimits {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lim
}

func (l *limiter) slot(ctx context.Context) error {
	l.mu.Lock()
	if l.lim.MaxConcurrency <= 0 || l.inFlight < l.lim.MaxConcurrency {
		l.inFlight++
		l.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	l.waiters = append(l.waiters, ch)
	l.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		for i, w := range l.waiters {
			if w == ch {
				l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
				l.mu.Unlock()
				return ctx.Err()
			}
		}
		l.mu.Unlock()
		// The slot was handed over as ctx ended: give it back.
		l.release()
		return ctx.Err()
	}
}

// release frees a slot, handing it to the longest waiter if the limit
// still allows one more in flight.
func (l *limiter) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waiters) > 0 && (l.lim.MaxConcurrency <= 0 || l.inFlight <= l.lim.MaxConcurrency) {
		w := l.waiters[0]
		l.waiters = l.waiters[1:]
		close(w) // the slot passes on; inFlight is unchanged
		return
	}
	l.inFlight--
}

// reserve books the next start time allowed by rpm and tpm and returns it
// with the tokens charged.
func (l *limiter) reserve(tokens int) (time.Time, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	start := now
	if l.lim.RPM > 0 && l.nextReq.After(start) {
		start = l.nextReq
	}
	if l.lim.TPM > 0 {
		tokens = min(max(tokens, 1), l.lim.TPM)
		if l.nextTok.After(start) {
			start = l.nextTok
		}
	}
	if l.lim.RPM > 0 {
		l.nextReq = start.Add(time.Minute / time.Duration(l.lim.RPM))
	}
	if l.lim.TPM > 0 {
		l.nextTok = start.Add(perToken(l.lim.TPM, tokens))
	}
	return start, tokens
}

// settle corrects the tpm booking once the real usage is known.
func (l *limiter) settle(charged, used int) {
	if used <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lim.TPM <= 0 {
		return
	}
	l.nextTok = l.nextTok.Add(perToken(l.lim.TPM, used) - perToken(l.lim.TPM, charged))
}

func perToken(tpm, tokens int) time.Duration {
	return time.Duration(float64(time.Minute) * float64(tokens) / float64(tpm))
}
