package cluster

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Role is who holds a NATS credential of flowrun's account.
type Role string

const (
	// RoleAdmin runs flowrun cluster setup: it creates and sizes the streams,
	// buckets and consumer, and nothing else needs to.
	RoleAdmin Role = "admin"
	// RoleCoordinator is flowrun batch --nats: it queues jobs, uploads
	// pipeline files and writes stops.
	RoleCoordinator Role = "coordinator"
	// RoleWorker is flowrun worker: it takes jobs and publishes checkpoints,
	// events, results and rate budgets.
	RoleWorker Role = "worker"
)

type storeKind int

const (
	streamKind  storeKind = iota
	bucketKind            // a key-value bucket
	objectsKind           // an object store
)

// A jsObject is one of flowrun's streams, key-value buckets or object
// stores: how setup makes it, and what each role may do with it. Adding a
// bucket is adding a row to stores.
type jsObject struct {
	kind     storeKind
	name     string // the stream's, bucket's or object store's name
	maxBytes int64
	// write: the roles that publish on its subjects; read: those that
	// read its messages by subject; follow: those that follow it through
	// an ordered consumer of their own.
	write, read, follow []Role
	// config adds its own settings: a stream's subjects and retention, a
	// bucket's max age.
	config func(*jetstream.StreamConfig)
}

var (
	both        = []Role{RoleCoordinator, RoleWorker}
	coordinator = []Role{RoleCoordinator}
	worker      = []Role{RoleWorker}
)

// takenTTL is how long a worker remembers a job it took: longer than a
// job is valid (jobTTL), so that no job is replayed once forgotten.
const takenTTL = jobTTL + 24*time.Hour

// stores are flowrun's JetStream objects.
var stores = []jsObject{
	{kind: streamKind, name: itemsStream, maxBytes: 1 << 30, write: coordinator, read: coordinator, config: func(c *jetstream.StreamConfig) {
		c.Subjects, c.Retention, c.Duplicates = []string{itemsSubject + ">"}, jetstream.WorkQueuePolicy, 10*time.Minute
	}},
	{kind: streamKind, name: runsStream, maxBytes: 8 << 30, write: worker, read: both, follow: coordinator, config: func(c *jetstream.StreamConfig) {
		c.Subjects, c.Duplicates, c.AllowDirect = []string{cpSubject + ">", evSubject + ">"}, 10*time.Minute, true
	}},
	{kind: streamKind, name: takenStream, maxBytes: 64 << 20, write: worker, read: worker, config: func(c *jetstream.StreamConfig) {
		// One record per job, for good: a second is refused by the server.
		c.Subjects, c.MaxMsgsPerSubject, c.DiscardNewPerSubject, c.MaxAge, c.AllowDirect = []string{takenSubject + ">"}, 1, true, takenTTL, true
	}},
	{kind: bucketKind, name: resultsBucket, maxBytes: 256 << 20, write: worker, read: worker, follow: coordinator},
	{kind: bucketKind, name: limitsBucket, maxBytes: 16 << 20, write: worker, read: worker},
	{kind: bucketKind, name: stopsBucket, maxBytes: 16 << 20, write: coordinator, read: coordinator, follow: worker, config: func(c *jetstream.StreamConfig) {
		c.MaxAge = takenTTL // a stop outlives the jobs it stops, no more
	}},
	{kind: bucketKind, name: ledgerBucket, maxBytes: 16 << 20, write: both, read: both},
	{kind: objectsKind, name: filesBucket, maxBytes: 256 << 20, write: coordinator, read: both, follow: worker},
}

// stream is the JetStream stream behind s.
func (s jsObject) stream() string {
	switch s.kind {
	case bucketKind:
		return "KV_" + s.name
	case objectsKind:
		return "OBJ_" + s.name
	}
	return s.name
}

// subjects are where s's messages are published.
func (s jsObject) subjects() []string {
	switch s.kind {
	case bucketKind:
		return []string{"$KV." + s.name + ".>"}
	case objectsKind:
		return []string{"$O." + s.name + ".C.>", "$O." + s.name + ".M.>"}
	}
	var c jetstream.StreamConfig
	s.config(&c)
	return c.Subjects
}

// streamConfig is how setup makes s. Nothing in it can be deleted or
// purged through the JetStream API, and a full store refuses what comes
// next rather than dropping what it holds. A key-value bucket keeps one
// value per key and no roll-ups (so no key-value purge); an object store
// needs roll-ups to replace an object's description.
func (s jsObject) streamConfig(replicas int, runsBytes int64) jetstream.StreamConfig {
	c := jetstream.StreamConfig{Name: s.stream(), Subjects: s.subjects(), Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
		MaxBytes: s.maxBytes, Discard: jetstream.DiscardNew, DenyDelete: true, DenyPurge: true}
	if s.name == runsStream && runsBytes > 0 {
		c.MaxBytes = runsBytes
	}
	switch s.kind {
	case bucketKind:
		c.MaxMsgsPerSubject, c.AllowDirect = 1, true
	case objectsKind:
		c.AllowRollup, c.DenyPurge, c.AllowDirect = true, false, true
	}
	if s.config != nil {
		s.config(&c)
	}
	return c
}

func workerConsumerConfig(ackWait time.Duration) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{Durable: workerConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
		MaxDeliver: -1, MaxAckPending: -1, FilterSubject: itemsSubject + ">"}
}

// SetupOptions size what Setup makes.
type SetupOptions struct {
	// Replicas is the number of copies JetStream keeps of each (1 on a
	// single server; 3 on a three-node cluster).
	Replicas int
	// AckWait is how long a worker may go silent before its item is
	// redelivered; workers heartbeat at a third of it. Default 30s.
	AckWait time.Duration
	// RunsMaxBytes bounds FLOWRUN_RUNS, the checkpoints and events of
	// every run; default 8 GiB. When it is full, runs fail to store
	// their checkpoints rather than old ones being dropped.
	RunsMaxBytes int64
}

// Setup creates flowrun's streams, buckets, object store and the workers'
// consumer, or brings existing ones to their configuration: the one step
// that needs the admin credential (o.Creds). Coordinators and workers
// then only use them.
func Setup(ctx context.Context, o Options, so SetupOptions) error {
	nc, err := dial(o, &denials{})
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if so.AckWait <= 0 {
		so.AckWait = 30 * time.Second
	}
	return retry(ctx, "setting up flowrun's streams on "+DisplayURL(o.URL), func(ctx context.Context) error {
		for _, s := range stores {
			if _, err := js.CreateOrUpdateStream(ctx, s.streamConfig(so.Replicas, so.RunsMaxBytes)); err != nil {
				return fmt.Errorf("stream %s: %w", s.stream(), err)
			}
		}
		if _, err := js.CreateOrUpdateConsumer(ctx, itemsStream, workerConsumerConfig(so.AckWait)); err != nil {
			return fmt.Errorf("the workers' consumer on %s: %w", itemsStream, err)
		}
		return nil
	})
}

// ErrNotSetUp says that a stream or bucket is missing and this credential may not
// create it.
var ErrNotSetUp = errors.New("it does not exist, and this credential may not create it: set up the cluster with the admin credential first")

// bind opens a jsObject, creating it (as Setup would) when it is missing
// and the server lets this credential: an open server needs no setup.
func bind[T any](ctx context.Context, c *conn, s jsObject, replicas int, open func(context.Context) (T, error)) (T, error) {
	v, err := open(ctx)
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) {
		_, err = c.js.CreateStream(ctx, s.streamConfig(replicas, 0))
		if err == nil || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			v, err = open(ctx)
		}
	}
	if err != nil {
		if c.denials.refused("$JS.API.STREAM.CREATE." + s.stream()) {
			err = ErrNotSetUp
		}
		return v, fmt.Errorf("%s: %w", s.stream(), err)
	}
	return v, nil
}

// denials remembers the subjects the server refused this connection: a
// refused request is never answered, and would look like a slow server.
type denials struct {
	mu       sync.Mutex
	subjects map[string]bool
}

var deniedSubject = regexp.MustCompile(`Permissions Violation for Publish to "([^"]+)"`)

func (d *denials) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if m := deniedSubject.FindStringSubmatch(err.Error()); m != nil {
		d.mu.Lock()
		if d.subjects == nil {
			d.subjects = map[string]bool{}
		}
		d.subjects[m[1]] = true
		d.mu.Unlock()
	}
}

func (d *denials) refused(subject string) bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.subjects[subject]
}
