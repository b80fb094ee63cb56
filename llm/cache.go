package llm

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/flowrun/flowrun/errclass"
)

// ReplyCache keeps model replies (JSON) by endpoint and request hash: the
// run store implements it. An entry older than maxAge (when above 0) is a
// miss.
type ReplyCache interface {
	CachedReply(ctx context.Context, endpoint, hash string, maxAge time.Duration) (reply []byte, ok bool, err error)
	PutCachedReply(ctx context.Context, endpoint, hash string, reply []byte) error
}

// Cache modes, from a node's or model's cache: setting.
const (
	CacheOff    = "false"
	CacheOn     = "true"   // cached unless the temperature may be above 0
	CacheAlways = "always" // cached whatever the temperature
)

// cacheMode is the request's effective cache setting: the node's, else
// the model's, else the client's default (--cache).
func (c *Client) cacheMode(req *Request) string {
	return cmp.Or(req.Cache, req.Model.Cache, c.opts.CacheDefault, CacheOff)
}

// UseCache sets Options.Cache: the run store, opened after the client
// was built. Call it before the first Complete.
func (c *Client) UseCache(rc ReplyCache) { c.opts.Cache = rc }

// cacheable reports whether cl's reply may come from, and go to, the
// cache. An unset temperature is the server's default (1 for OpenAI), so
// it counts as above 0. While recording a cassette every exchange goes
// over the network, so that the cassette holds the whole run.
func (c *Client) cacheable(req *Request, cl *call) bool {
	if c.opts.Cache == nil || c.opts.Record != nil {
		return false
	}
	switch c.cacheMode(req) {
	case CacheAlways:
		return true
	case CacheOn:
		return cl.Temperature != nil && *cl.Temperature <= 0
	}
	return false
}

// cached answers cl from the cache: nil on a miss, on an entry older than
// CacheTTL, and on an entry that no longer decodes.
func (c *Client) cached(ctx context.Context, ep *endpoint, hash string) (*reply, *Error) {
	b, ok, err := c.opts.Cache.CachedReply(ctx, ep.URL, hash, c.opts.CacheTTL)
	if err != nil {
		return nil, &Error{class: errclass.Critical, Endpoint: "cache", msg: fmt.Sprintf("reading request %s from the response cache: %v", hash, err), err: err}
	}
	if !ok {
		return nil, nil
	}
	var rep reply
	if json.Unmarshal(b, &rep) != nil {
		return nil, nil
	}
	return &rep, nil
}

// putCached stores a paid-for reply. A store that cannot take it costs the
// next run a request, which is better than failing this call after the
// reply arrived, so the error is dropped.
func (c *Client) putCached(ctx context.Context, ep *endpoint, hash string, rep *reply) {
	if b, err := json.Marshal(rep); err == nil {
		_ = c.opts.Cache.PutCachedReply(ctx, ep.URL, hash, b)
	}
}

// requestLocks serialise identical cacheable requests, so that of two made
// at once (two batch items) the second is answered by the first's reply.
type requestLocks struct {
	mu    sync.Mutex
	byKey map[string]*requestLock
}

type requestLock struct {
	held    chan struct{} // one slot: taken while a request holds the lock
	waiters int
}

// lock waits until no identical request is in flight; the returned func
// releases the lock.
func (r *requestLocks) lock(ctx context.Context, key string) (func(), error) {
	r.mu.Lock()
	if r.byKey == nil {
		r.byKey = map[string]*requestLock{}
	}
	l := r.byKey[key]
	if l == nil {
		l = &requestLock{held: make(chan struct{}, 1)}
		r.byKey[key] = l
	}
	l.waiters++
	r.mu.Unlock()
	done := func() {
		r.mu.Lock()
		if l.waiters--; l.waiters == 0 {
			delete(r.byKey, key)
		}
		r.mu.Unlock()
	}
	select {
	case l.held <- struct{}{}:
		return func() { <-l.held; done() }, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}
