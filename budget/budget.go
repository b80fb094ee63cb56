// Package budget keeps a cost cap that holds by construction. Before a
// model call is sent it reserves the most the call may cost; when the
// call ends the reservation settles at what it did cost. A reservation
// that does not fit beside those in flight waits for them to settle, and
// one that can never fit (the settled spend alone leaves too little) is
// refused with an *ExceededError. Spend can therefore pass the cap only
// when a call costs more than its reservation said it could.
package budget

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/flowrun/flowrun/figures"
)

// Ledger grants reservations against a cap.
type Ledger interface {
	// Reserve holds between least and most USD (as much of most as is
	// free), waiting while only reservations in flight keep least from
	// fitting. It returns an *ExceededError when least can never fit, or
	// ctx's error.
	Reserve(ctx context.Context, least, most float64) (Reservation, error)
}

// Reservation is money held for one call until it settles.
type Reservation interface {
	// USD is what the reservation holds.
	USD() float64
	// Settle replaces the reservation by what the call cost; it is
	// called once.
	Settle(actualUSD float64)
}

// ExceededError is a reservation refused because the cap cannot afford
// it even once every call in flight has settled.
type ExceededError struct {
	Cap   string  // the cap's name, with its limit: "limits.max_cost_usd ($3.00)"
	Limit float64 // USD
	Spent float64 // USD settled when it was refused
	Need  float64 // USD the call may cost at the least
	// Unknown, if set, says why what the cap spent cannot be known: then
	// it refuses every call.
	Unknown string
}

func (e *ExceededError) Error() string {
	if e.Unknown != "" {
		return fmt.Sprintf("%s refuses every model call: %s", e.Cap, e.Unknown)
	}
	if e.Need <= 0 {
		return fmt.Sprintf("%s reached: %s spent", e.Cap, figures.USD(e.Spent))
	}
	return fmt.Sprintf("%s reached: %s spent, and the next model call may cost up to %s", e.Cap, figures.USD(e.Spent), figures.USD(e.Need))
}

// Slack (a billionth of a dollar) absorbs float rounding in sums of
// costs: five calls of $0.14 add up to $0.7000000000000001, which must
// fit a $0.70 cap.
const Slack = 1e-9

// Cap is a ledger in memory: a run's, or a batch's. It may have a
// parent, from which each of its reservations also takes: a run's cap
// inside a batch's.
type Cap struct {
	name   string
	limit  float64 // 0: no limit of its own
	parent Ledger

	mu      sync.Mutex
	spent   float64 // settled
	held    float64 // reserved and not settled
	refused *ExceededError
	changed chan struct{}
}

// New returns a cap named name of limit USD (0: none of its own, only
// its parent's) that has already spent spent; parent may be nil.
func New(name string, limit, spent float64, parent Ledger) *Cap {
	return &Cap{name: name, limit: limit, parent: parent, spent: spent, changed: make(chan struct{})}
}

// Limited says whether a reservation from c can be refused: c or its
// parent has a limit.
func (c *Cap) Limited() bool { return c.limit > 0 || c.parent != nil }

// Limit is c's own limit, 0 for none.
func (c *Cap) Limit() float64 { return c.limit }

// Name is what c is called in its errors.
func (c *Cap) Name() string { return c.name }

// Spent is what c has settled: the figure a run or batch reports.
func (c *Cap) Spent() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spent
}

// Free is what l could grant at once, when it can tell: a hint for a
// caller choosing how closely to bound a call, never a promise.
func Free(l Ledger) (usd float64, ok bool) {
	f, ok := l.(interface{ Free() float64 })
	if !ok {
		return 0, false
	}
	return f.Free(), true
}

// Free is what c (and its parent, when it can tell) could grant at once;
// +Inf without a limit.
func (c *Cap) Free() float64 {
	c.mu.Lock()
	free := math.Inf(1)
	if c.limit > 0 {
		free = c.limit - c.spent - c.held
	}
	c.mu.Unlock()
	if c.parent != nil {
		if up, ok := Free(c.parent); ok {
			free = min(free, up)
		}
	}
	return free
}

// State is what c has settled and the first reservation it refused (nil
// while none was).
func (c *Cap) State(context.Context) (spent float64, refused *ExceededError, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spent, c.refused, nil
}

// Add counts usd spent outside any reservation into c (not its parent):
// a call made while no cap applied.
func (c *Cap) Add(usd float64) {
	c.mu.Lock()
	c.spent = figures.RoundUSD(c.spent + usd)
	c.mu.Unlock()
}

// Reserve implements Ledger.
func (c *Cap) Reserve(ctx context.Context, least, most float64) (Reservation, error) {
	least, most = max(least, 0), max(most, least, 0)
	grant, err := c.hold(ctx, least, most)
	if err != nil {
		return nil, err
	}
	r := &reservation{c: c, usd: grant}
	if c.limit > 0 {
		r.held = grant
	}
	if c.parent != nil {
		up, err := c.parent.Reserve(ctx, least, grant)
		if err != nil {
			c.change(-r.held, 0)
			return nil, err
		}
		r.up, r.usd = up, up.USD()
		if c.limit > 0 {
			c.change(r.usd-r.held, 0)
			r.held = r.usd
		}
	}
	return r, nil
}

// hold takes what c itself can grant, waiting while calls in flight
// hold what least needs.
func (c *Cap) hold(ctx context.Context, least, most float64) (float64, error) {
	for {
		c.mu.Lock()
		if c.limit <= 0 {
			c.mu.Unlock()
			return most, nil
		}
		if c.spent+least > c.limit+Slack {
			err := &ExceededError{Cap: c.name, Limit: c.limit, Spent: c.spent, Need: least}
			if c.refused == nil {
				c.refused = err
			}
			c.mu.Unlock()
			return 0, err
		}
		free := c.limit - c.spent - c.held
		if least <= free+Slack {
			grant := max(least, math.Min(most, free))
			c.held += grant
			c.mu.Unlock()
			return grant, nil
		}
		wait := c.changed
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// change moves usd of held money (negative: released) and settles
// spent, waking the reservations that wait.
func (c *Cap) change(held, spent float64) {
	c.mu.Lock()
	c.held += held
	if c.held < Slack {
		c.held = 0
	}
	c.spent = figures.RoundUSD(c.spent + spent)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

type reservation struct {
	c    *Cap
	usd  float64
	held float64     // what it holds of c's limit (0 when c has none)
	up   Reservation // the parent's part, nil without a parent
	once sync.Once
}

func (r *reservation) USD() float64 { return r.usd }

func (r *reservation) Settle(actual float64) {
	r.once.Do(func() {
		actual = max(actual, 0)
		if r.up != nil {
			r.up.Settle(actual)
		}
		r.c.change(-r.held, actual)
	})
}
