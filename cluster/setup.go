package cluster

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The JetStream names flowrun uses; every worker and coordinator on one
// NATS account shares them.
const (
	itemsStream    = "FLOWRUN_ITEMS" // work queue: one message per item
	itemsSubject   = "flowrun.items."
	runsStream     = "FLOWRUN_RUNS" // checkpoints and events of item runs
	cpSubject      = "flowrun.cp."
	evSubject      = "flowrun.ev."
	resultsBucket  = "flowrun-results" // KV: <batch>.<index> -> Result
	filesBucket    = "flowrun-files"   // object store: pipeline files by hash
	limitsBucket   = "flowrun-limits"  // KV: shared rate budgets
	stopsBucket    = "flowrun-stops"   // KV: <batch> -> why it stopped; workers stop its items
	costsBucket    = "flowrun-costs"   // KV: <batch> -> its cost ledger (costEntry)
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
	data, err := os.ReadFile(o.Creds)
	if err != nil {
		return nil, fmt.Errorf("reading the NATS credentials: %w", err)
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
	nc      *nats.Conn
	js      jetstream.JetStream
	results jetstream.KeyValue
	files   jetstream.ObjectStore
	limits  jetstream.KeyValue
	stops   jetstream.KeyValue
	costs   jetstream.KeyValue
	items   jetstream.Stream
	runs    jetstream.Stream
}

// connect dials NATS, reconnecting for ever after the first success (a
// server restart is waited out), and creates what is missing.
func connect(ctx context.Context, o Options) (*conn, error) {
	creds, err := o.connectOptions()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(o.URL, append(creds, nats.Name(o.Name), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
		nats.RetryOnFailedConnect(false))...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", DisplayURL(o.URL), err)
	}
	c, err := setup(ctx, nc, o)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("setting up JetStream on %s (is the server started with -js?): %w", DisplayURL(o.URL), err)
	}
	return c, nil
}

func setup(ctx context.Context, nc *nats.Conn, o Options) (*conn, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(eventAckTimeout))
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
	c := &conn{nc: nc, js: js, signer: o.Signer, workers: o.workers()}
	// A cluster creating a replicated stream (or electing its leader,
	// with other workers creating the same ones) may take longer than a
	// request's time-out.
	err = retry(ctx, "creating flowrun's streams and buckets", func(ctx context.Context) error {
		return c.ensure(ctx, max(o.Replicas, 1))
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// ensure opens the streams and buckets, creating those that are missing.
func (c *conn) ensure(ctx context.Context, replicas int) error {
	var err error
	c.items, err = ensureStream(ctx, c.js, jetstream.StreamConfig{Name: itemsStream, Subjects: []string{itemsSubject + ">"},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: replicas, Duplicates: 10 * time.Minute})
	if err != nil {
		return err
	}
	c.runs, err = ensureStream(ctx, c.js, jetstream.StreamConfig{Name: runsStream, Subjects: []string{cpSubject + ">", evSubject + ">"},
		Storage: jetstream.FileStorage, Replicas: replicas, Duplicates: 10 * time.Minute, AllowDirect: true})
	if err != nil {
		return err
	}
	if c.results, err = ensureKV(ctx, c.js, jetstream.KeyValueConfig{Bucket: resultsBucket, Storage: jetstream.FileStorage, Replicas: replicas}); err != nil {
		return err
	}
	if c.limits, err = ensureKV(ctx, c.js, jetstream.KeyValueConfig{Bucket: limitsBucket, Storage: jetstream.FileStorage, Replicas: replicas}); err != nil {
		return err
	}
	if c.stops, err = ensureKV(ctx, c.js, jetstream.KeyValueConfig{Bucket: stopsBucket, Storage: jetstream.FileStorage, Replicas: replicas}); err != nil {
		return err
	}
	if c.costs, err = ensureKV(ctx, c.js, jetstream.KeyValueConfig{Bucket: costsBucket, Storage: jetstream.FileStorage, Replicas: replicas}); err != nil {
		return err
	}
	c.files, err = c.js.ObjectStore(ctx, filesBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		c.files, err = c.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: filesBucket, Storage: jetstream.FileStorage, Replicas: replicas})
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			c.files, err = c.js.ObjectStore(ctx, filesBucket)
		}
	}
	if err != nil {
		return fmt.Errorf("object store %s: %w", filesBucket, err)
	}
	return nil
}

// ensureStream opens a stream, creating it if it does not exist; an
// existing stream keeps its configuration (its replicas, say).
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = js.Stream(ctx, cfg.Name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", cfg.Name, err)
	}
	return s, nil
}

func ensureKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, cfg.Bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("key-value bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
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
