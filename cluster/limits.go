package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/flowrun/flowrun/llm"
)

// leaseTTL is how long a request's concurrency lease outlives a worker
// killed before releasing it.
const leaseTTL = time.Minute

// budget is one model's shared rate state: the earliest start times that
// rpm and tpm allow next, and the leases of requests in flight. Times are
// Unix nanoseconds of the workers' clocks, which must agree (NTP).
type budget struct {
	NextReq int64            `json:"next_req,omitempty"`
	NextTok int64            `json:"next_tok,omitempty"`
	Leases  map[string]int64 `json:"leases,omitempty"` // id -> expiry
}

// sharedLimits keeps each model's rate budget in a JetStream key-value
// entry, changed only by compare-and-set on its revision: every worker's
// requests draw on one budget, paced as llm's own limiter paces one
// process's (rpm and tpm spread evenly, at most max_concurrency in flight).
type sharedLimits struct{ c *conn }

func budgetKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "model-" + hex.EncodeToString(sum[:12])
}

func (s *sharedLimits) Acquire(ctx context.Context, key string, lim llm.RateLimits, tokens int) (func(int), error) {
	k := budgetKey(key)
	lease := nuid.Next()
	charged := 0
	var start time.Time
	for {
		var full bool
		err := s.update(ctx, k, func(b *budget, now time.Time) bool {
			if lim.MaxConcurrency > 0 && len(b.Leases) >= lim.MaxConcurrency {
				full = true
				return false
			}
			full = false
			start = now
			if lim.RPM > 0 {
				start = later(start, b.NextReq)
				b.NextReq = start.Add(time.Minute / time.Duration(lim.RPM)).UnixNano()
			}
			if lim.TPM > 0 {
				charged = min(max(tokens, 1), lim.TPM)
				start = later(start, b.NextTok)
				b.NextTok = start.Add(perToken(lim.TPM, charged)).UnixNano()
			}
			if lim.MaxConcurrency > 0 {
				b.Leases[lease] = now.Add(leaseTTL).UnixNano()
			}
			return true
		})
		if err != nil {
			return nil, fmt.Errorf("the shared rate budget of %s: %w", key, err)
		}
		if !full {
			break
		}
		sleep(ctx, time.Duration(5+rand.IntN(20))*time.Millisecond)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	release := func(used int) {
		if lim.MaxConcurrency <= 0 && (lim.TPM <= 0 || used <= 0) {
			return
		}
		_ = s.update(context.Background(), k, func(b *budget, _ time.Time) bool {
			delete(b.Leases, lease)
			if lim.TPM > 0 && used > 0 {
				b.NextTok += int64(perToken(lim.TPM, used) - perToken(lim.TPM, charged))
			}
			return true
		})
	}
	if wait := time.Until(start); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			release(0)
			return nil, ctx.Err()
		}
	}
	return release, nil
}

// maxAhead is the furthest ahead a budget's next start may be: as far as
// an hour of queued requests. A value beyond it (the year 2100, written by
// someone on the account) is ignored, not waited for.
const maxAhead = time.Hour

// clamp drops what no worker could have written: a next start beyond
// maxAhead, a lease outliving leaseTTL. It says whether it dropped any.
func (b *budget) clamp(now time.Time) bool {
	limit := now.Add(maxAhead).UnixNano()
	changed := false
	for _, next := range []*int64{&b.NextReq, &b.NextTok} {
		if *next > limit {
			*next, changed = 0, true
		}
	}
	for id, exp := range b.Leases {
		if exp > now.Add(leaseTTL+clockSkew).UnixNano() {
			delete(b.Leases, id)
			changed = true
		}
	}
	return changed
}

func later(t time.Time, ns int64) time.Time {
	if u := time.Unix(0, ns); u.After(t) {
		return u
	}
	return t
}

func perToken(tpm, tokens int) time.Duration {
	return time.Duration(float64(time.Minute) * float64(tokens) / float64(tpm))
}

// update applies f to the budget under key by compare-and-set, retrying
// when another worker changed it in between; nothing is written when f
// changed nothing. Expired leases are dropped.
func (s *sharedLimits) update(ctx context.Context, key string, f func(b *budget, now time.Time) (changed bool)) error {
	return retry(ctx, "updating "+key, func(ctx context.Context) error {
		for ctx.Err() == nil {
			b := budget{}
			var rev uint64
			e, err := s.c.limits.Get(ctx, key)
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
			case err != nil:
				return err
			default:
				rev = e.Revision()
				if err := json.Unmarshal(e.Value(), &b); err != nil {
					b = budget{}
				}
			}
			if b.Leases == nil {
				b.Leases = map[string]int64{}
			}
			now := time.Now()
			expired := b.clamp(now)
			for id, exp := range b.Leases {
				if exp < now.UnixNano() {
					delete(b.Leases, id)
					expired = true
				}
			}
			if !f(&b, now) && !expired && rev != 0 {
				return nil
			}
			data, _ := json.Marshal(b)
			if rev == 0 {
				_, err = s.c.limits.Create(ctx, key, data)
			} else {
				_, err = s.c.limits.Update(ctx, key, data, rev)
			}
			if err == nil || !(errors.Is(err, jetstream.ErrKeyExists) || isWrongRevision(err)) {
				return err
			}
		}
		return ctx.Err()
	})
}

func isWrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}
