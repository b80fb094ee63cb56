package cluster

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flowrun/flowrun/journal/jsjournal"
	"github.com/flowrun/flowrun/redact"
)

// The JetStream names flowrun uses; every worker and coordinator on one
// NATS account shares them.
const (
	itemsStream    = "FLOWRUN_ITEMS" // work queue: one message per item
	itemsSubject   = "flowrun.items."
	runsStream     = "FLOWRUN_RUNS" // checkpoints and events of item runs
	cpSubject      = "flowrun.cp."
	evSubject      = "flowrun.ev."
	takenStream    = "FLOWRUN_TAKEN" // the jobs workers took, by nonce: a replayed job is refused
	takenSubject   = "flowrun.taken."
	resultsBucket  = "flowrun-results" // KV: <batch>.<index>.<worker key> -> Result
	filesBucket    = "flowrun-files"   // object store: pipeline files by hash
	limitsBucket   = "flowrun-limits"  // KV: shared rate budgets
	stopsBucket    = "flowrun-stops"   // KV: <batch>.<session> -> why it stopped; workers stop its items
	ledgerBucket   = "flowrun-ledger"  // KV: spend, updated by compare-and-set
	workerConsumer = "flowrun-workers"
)

// Options say how to reach NATS and how the streams are made.
type Options struct {
	URL string
	// Replicas is the number of copies JetStream keeps of each stream,
	// bucket and object store it creates (1 on a single server; 3 on a
	// three-node cluster). Existing ones keep theirs.
	Replicas int
	// AckWait is how long a worker may go silent before its item is
	// redelivered; workers heartbeat at a third of it.
	AckWait time.Duration
	// Name names this connection in the server's monitoring.
	Name string
	// Creds is a NATS credentials file (a user JWT and its nkey seed) or
	// a file holding an nkey seed alone; a tls:// URL asks for TLS.
	Creds string
	// CA is a PEM file of the certificate authorities that sign the
	// server's TLS certificate, when not the system's.
	CA string

	// Signer signs what this process publishes: a coordinator's jobs and
	// stops; a worker's checkpoints, events and results.
	Signer *Signer
	// Coordinators are the keys whose jobs and stops a worker accepts.
	Coordinators Keys
	// Workers are the keys whose checkpoints, events and results are
	// accepted; a worker adds its own.
	Workers Keys
	// Insecure accepts what is unsigned or signed by any key: anyone who
	// can publish on the server can then run jobs on the workers and
	// forge results. Only for a server no one else can reach.
	Insecure bool
}

func (o Options) coordinators() trust { return trust{keys: o.Coordinators, insecure: o.Insecure} }

func (o Options) workers() trust {
	keys := Keys{}
	for id, k := range o.Workers {
		keys[id] = k
	}
	if o.Signer != nil {
		keys[o.Signer.id] = o.Signer.key.Public().(ed25519.PublicKey)
	}
	return trust{keys: keys, insecure: o.Insecure}
}

// connectOptions are the credentials Creds names and the authorities CA
// names.
func (o Options) connectOptions() ([]nats.Option, error) {
	var opts []nats.Option
	if o.CA != "" {
		opts = append(opts, nats.RootCAs(o.CA))
	}
	if o.Creds == "" {
		return opts, nil
	}
	data, err := ReadPrivate(o.Creds, "NATS credentials")
	if err != nil {
		return nil, err
	}
	if strings.Contains(string(data), "BEGIN NATS USER JWT") {
		return append(opts, nats.UserCredentials(o.Creds)), nil
	}
	opt, err := nats.NkeyOptionFromSeed(o.Creds)
	if err != nil {
		return nil, fmt.Errorf("NATS credentials %s: neither a credentials file nor an nkey seed: %w", o.Creds, err)
	}
	return append(opts, opt), nil
}

func (o Options) ackWait() time.Duration {
	if o.AckWait <= 0 {
		return 30 * time.Second
	}
	return o.AckWait
}

// conn is a connection with the streams and buckets flowrun needs.
type conn struct {
	signer  *Signer
	workers trust // whose checkpoints and events are read back
	refused *refusals
	denials *denials
	hide    *endpoints // a worker's model endpoints, kept out of what it publishes
	nc      *nats.Conn
	js      jetstream.JetStream
	buckets map[string]jetstream.KeyValue
	results jetstream.KeyValue
	files   jetstream.ObjectStore
	limits  jetstream.KeyValue
	stops   jetstream.KeyValue
	items   jetstream.Stream
	runs    jetstream.Stream
	taken   jetstream.Stream
	// log keeps the item runs' checkpoints and events on the runs
	// stream, signed by their worker and scrubbed of its endpoints;
	// what no trusted worker signed is refused as it is read back.
	log *jsjournal.Log
}

// dial connects to NATS, reconnecting for ever after the first success (a
// server restart is waited out); d learns what the server refuses.
func dial(o Options, d *denials) (*nats.Conn, error) {
	creds, err := o.connectOptions()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(o.URL, append(creds, nats.Name(o.Name), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
		nats.RetryOnFailedConnect(false), nats.ErrorHandler(d.handler))...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", DisplayURL(o.URL), err)
	}
	return nc, nil
}

// connect dials NATS and opens flowrun's streams and buckets, creating
// those that are missing if the server lets this credential.
func connect(ctx context.Context, o Options) (*conn, error) {
	d := &denials{}
	nc, err := dial(o, d)
	if err != nil {
		return nil, err
	}
	c, err := setup(ctx, nc, o, d)
	if errors.Is(err, ErrNotSetUp) {
		nc.Close()
		return nil, fmt.Errorf("opening flowrun's streams on %s: %w", DisplayURL(o.URL), err)
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("setting up JetStream on %s (is the server started with -js?): %w", DisplayURL(o.URL), err)
	}
	return c, nil
}

func setup(ctx context.Context, nc *nats.Conn, o Options, d *denials) (*conn, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(jsjournal.EventAckTimeout))
	if err != nil {
		return nil, err
	}
	// Asked first, so that a server without JetStream is reported at once:
	// its "not enabled" is not retried.
	err = retry(ctx, "asking for the JetStream account", func(ctx context.Context) error {
		_, err := js.AccountInfo(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	c := &conn{nc: nc, js: js, signer: o.Signer, workers: o.workers(), denials: d}
	// A cluster creating a replicated stream (or electing its leader,
	// with other workers creating the same ones) may take longer than a
	// request's time-out.
	err = retry(ctx, "opening flowrun's streams and buckets", func(ctx context.Context) error {
		return c.open(ctx, max(o.Replicas, 1))
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// open binds the streams and buckets, creating those that are missing
// when this credential may.
func (c *conn) open(ctx context.Context, replicas int) error {
	streams := map[string]jetstream.Stream{}
	c.buckets = map[string]jetstream.KeyValue{}
	for _, s := range stores {
		var err error
		switch s.kind {
		case streamKind:
			streams[s.name], err = bind(ctx, c, s, replicas, func(ctx context.Context) (jetstream.Stream, error) { return c.js.Stream(ctx, s.name) })
		case bucketKind:
			c.buckets[s.name], err = bind(ctx, c, s, replicas, func(ctx context.Context) (jetstream.KeyValue, error) { return c.js.KeyValue(ctx, s.name) })
		case objectsKind:
			c.files, err = bind(ctx, c, s, replicas, func(ctx context.Context) (jetstream.ObjectStore, error) { return c.js.ObjectStore(ctx, s.name) })
		}
		if err != nil {
			return err
		}
	}
	c.items, c.runs, c.taken = streams[itemsStream], streams[runsStream], streams[takenStream]
	c.log = jsjournal.NewLog(c.js, c.runs, jsjournal.Config{Stream: runsStream, Checkpoints: cpSubject, Events: evSubject,
		Seal: func(subject, msgID string, data []byte) *nats.Msg { return signMsg(c.signer, subject, msgID, data) },
		Check: func(subject string, h nats.Header, data []byte) error {
			_, err := c.workers.msg(subject, h, data)
			return err
		},
		Refused: func(what, line string) { c.refused.report(what, line) },
		Scrub:   func(data []byte) []byte { return c.hide.scrub(redact.JSON(data)) },
		Retry:   retry,
	})
	c.results, c.limits, c.stops = c.buckets[resultsBucket], c.buckets[limitsBucket], c.buckets[stopsBucket]
	return nil
}

// DisplayURL is a NATS URL (or comma-separated list) fit to show or
// record: users and passwords dropped.
func DisplayURL(raw string) string {
	urls := strings.Split(raw, ",")
	for i, s := range urls {
		if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.User != nil {
			u.User = nil
			urls[i] = u.String()
		}
	}
	return strings.Join(urls, ",")
}

// retry calls f until it succeeds, fails for good, or ctx ends: a NATS
// server restarting or a leader election answers with time-outs and "no
// responders" for a few seconds. Everything retried here is idempotent
// (a message id, a create that refuses a second value).
func retry(ctx context.Context, what string, f func(context.Context) error) error {
	wait := 50 * time.Millisecond
	deadline := time.Now().Add(2 * time.Minute)
	for {
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := f(attempt)
		cancel()
		if err == nil || !transient(err) || ctx.Err() != nil || time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		}
		wait = min(2*wait, time.Second)
	}
}

func transient(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, jetstream.ErrNoHeartbeat) || isUnavailable(err)
}

// isUnavailable is JetStream's own "try again" answer (503: no leader yet,
// the stream is being restored), which a server without JetStream also
// gives, for good.
func isUnavailable(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.Code == 503 &&
		apiErr.ErrorCode != jetstream.JSErrCodeJetStreamNotEnabled && apiErr.ErrorCode != jetstream.JSErrCodeJetStreamNotEnabledForAccount
}
