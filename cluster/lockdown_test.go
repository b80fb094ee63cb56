package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/flowrun/flowrun/internal/natstest"
	"github.com/flowrun/flowrun/runtime"
)

// lockedDown is a server whose only users are an admin, a coordinator and
// a worker, each with the permissions Permissions gives its role.
type lockedDown struct {
	url   string
	creds map[Role]string // nkey seed files
}

func startLockedDown(t *testing.T) *lockedDown {
	t.Helper()
	l := &lockedDown{creds: map[Role]string{}}
	var users []*server.NkeyUser
	dir := t.TempDir()
	for _, role := range Roles {
		kp, err := nkeys.CreateUser()
		must(t, err)
		pub, _ := kp.PublicKey()
		seed, _ := kp.Seed()
		l.creds[role] = filepath.Join(dir, string(role)+".nk")
		must(t, os.WriteFile(l.creds[role], seed, 0o600))
		p, err := Permissions(role)
		must(t, err)
		users = append(users, &server.NkeyUser{Nkey: pub, Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: p.Pub.Allow, Deny: p.Pub.Deny}, Subscribe: &server.SubjectPermission{Allow: p.Sub.Allow}}})
	}
	s := natstest.Start(t, &server.Options{JetStream: true, StoreDir: t.TempDir(), Nkeys: users})
	l.url = "nats://" + s.Addr().(*net.TCPAddr).String()
	return l
}

func (l *lockedDown) options(role Role) Options {
	return Options{URL: l.url, Creds: l.creds[role], Insecure: true}
}

func (l *lockedDown) setup(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	must(t, Setup(ctx, l.options(RoleAdmin), SetupOptions{AckWait: 3 * time.Second}))
}

// client is a raw connection as role, and the permission violations the
// server reports to it.
type client struct {
	nc *nats.Conn
	js jetstream.JetStream
	mu sync.Mutex
	// denied are the subjects the server refused to let it publish on.
	denied map[string]bool
}

func (l *lockedDown) client(t *testing.T, role Role) *client {
	t.Helper()
	nk, err := nats.NkeyOptionFromSeed(l.creds[role])
	must(t, err)
	return dialClient(t, l.url, nk)
}

func dialClient(t *testing.T, url string, creds nats.Option) *client {
	t.Helper()
	c := &client{denied: map[string]bool{}}
	var err error
	c.nc, err = nats.Connect(url, creds, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if m := deniedSubject.FindStringSubmatch(err.Error()); m != nil {
			c.mu.Lock()
			c.denied[m[1]] = true
			c.mu.Unlock()
		}
	}))
	must(t, err)
	t.Cleanup(c.nc.Close)
	c.js, err = jetstream.New(c.nc)
	must(t, err)
	return c
}

func (c *client) wasDenied(subject string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.denied[subject]
}

// refuses publishes raw requests or messages as the client and waits for
// the server to report each refused; a request is refused by its subject
// before its body is read.
func (c *client) refuses(t *testing.T, role Role, attempts map[string]string) {
	t.Helper()
	for subject, body := range attempts {
		must(t, c.nc.Publish(subject, []byte(body)))
	}
	must(t, c.nc.Flush())
	deadline := time.Now().Add(10 * time.Second)
	for subject, what := range attempts {
		for !c.wasDenied(subject) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if !c.wasDenied(subject) {
			t.Errorf("the %s credential was let publish on %s (%s)", role, subject, what)
		}
	}
}

// TestLockedDownRolesRefused: on a server set up by the admin, with each
// role's user given Permissions(role), each attack of issue 32 is tried
// with the role's credential and the server refuses it; what was stored
// before is still there, as it was.
func TestLockedDownRolesRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := startLockedDown(t)
	l.setup(t)
	l.setup(t) // again: setup brings what exists to its configuration
	// Another batch's state: a queued job, a checkpoint, a result, a taken job.
	coord := testConn(t, l.options(RoleCoordinator))
	_, err := coord.js.Publish(ctx, itemsSubject+"victim.0", []byte(`{}`))
	must(t, err)
	w := testConn(t, l.options(RoleWorker))
	must(t, w.log.Save(ctx, "victim-run", &runtime.Checkpoint{Seq: 1, Path: "a"}))
	_, err = w.results.Create(ctx, "victim.0.k", []byte(`{}`))
	must(t, err)
	must(t, (&Worker{c: w}).take(ctx, "0123456789abcdef0123456789abcdef", 1))
	_, err = createKVLedger(ctx, coord.buckets[ledgerBucket], "victim", "--max-cost-usd 1", 1, 0.5)
	must(t, err)

	config := func(cfg jetstream.StreamConfig) string { b, _ := json.Marshal(cfg); return string(b) }
	fill := config(jetstream.StreamConfig{Name: "FILL", Subjects: []string{"fill.>"}})
	l.client(t, RoleCoordinator).refuses(t, RoleCoordinator, map[string]string{
		"$JS.API.STREAM.PURGE.KV_flowrun-results": "purge another batch's results",
		"$JS.API.STREAM.PURGE.FLOWRUN_RUNS":       "purge its checkpoints",
		"$JS.API.STREAM.PURGE.FLOWRUN_TAKEN":      "forget the jobs taken",
		"$JS.API.STREAM.UPDATE.FLOWRUN_ITEMS": config(jetstream.StreamConfig{Name: itemsStream, Subjects: []string{itemsSubject + ">"},
			Retention: jetstream.WorkQueuePolicy, Duplicates: time.Second}),
		"$JS.API.STREAM.UPDATE.KV_flowrun-results":                    "max_msgs 1 on the results",
		"$JS.API.STREAM.DELETE.FLOWRUN_RUNS":                          "delete the runs",
		"$JS.API.STREAM.MSG.DELETE.FLOWRUN_RUNS":                      `{"seq":1}`,
		"$JS.API.STREAM.CREATE.FILL":                                  fill,
		"$JS.API.CONSUMER.CREATE.FLOWRUN_ITEMS.thief.flowrun.items.>": "take jobs off the work queue",
		"$JS.API.CONSUMER.DELETE.FLOWRUN_ITEMS.flowrun-workers":       "delete the workers' consumer",
		"$KV.flowrun-results.victim.0.k":                              "forge a result",
		"$KV.flowrun-limits.model-x":                                  "set a rate budget",
		"flowrun.ev.victim-run":                                       "forge an event",
		"flowrun.cp.victim-run":                                       "forge a checkpoint",
		"flowrun.taken.0123456789abcdef0123456789abcdef":              "take a job",
		"$JS.API.CONSUMER.MSG.NEXT.FLOWRUN_ITEMS.flowrun-workers":     "pull a job",
		"$JS.API.STREAM.PURGE.KV_flowrun-ledger":                      "forget what the batches spent",
		"$JS.API.STREAM.UPDATE.KV_flowrun-ledger":                     config(jetstream.StreamConfig{Name: "KV_" + ledgerBucket, AllowRollup: true}),
		"$JS.API.STREAM.MSG.DELETE.KV_flowrun-ledger":                 `{"seq":1}`,
	})
	l.client(t, RoleWorker).refuses(t, RoleWorker, map[string]string{
		"flowrun.items.victim.1": "queue a job",
		"$JS.API.STREAM.UPDATE.FLOWRUN_RUNS": config(jetstream.StreamConfig{Name: runsStream, Subjects: []string{cpSubject + ">", evSubject + ">"},
			SubjectTransform: &jetstream.SubjectTransformConfig{Source: evSubject + ">", Destination: itemsSubject + "{{wildcard(1)}}"}}),
		"$JS.API.STREAM.PURGE.FLOWRUN_TAKEN":                                    "forget the jobs taken",
		"$JS.API.STREAM.MSG.DELETE.FLOWRUN_TAKEN":                               `{"seq":1}`,
		"$JS.API.STREAM.PURGE.KV_flowrun-results":                               "purge the results",
		"$JS.API.STREAM.DELETE.FLOWRUN_ITEMS":                                   "delete the queue",
		"$JS.API.STREAM.CREATE.FILL":                                            fill,
		"$JS.API.CONSUMER.CREATE.FLOWRUN_ITEMS.flowrun-workers.flowrun.items.>": "change the workers' consumer",
		"$JS.API.CONSUMER.DURABLE.CREATE.FLOWRUN_ITEMS.flowrun-workers":         "change the workers' consumer",
		"$JS.API.CONSUMER.DELETE.FLOWRUN_ITEMS.flowrun-workers":                 "delete the workers' consumer",
		"$KV.flowrun-stops.victim.s1":                                           "stop a batch",
		"$O.flowrun-files.M.c2hhMjU2LTAw":                                       "poison a pipeline file",
		"$JS.API.STREAM.MSG.GET.FLOWRUN_ITEMS":                                  "read queued jobs' nonces",
		"$JS.API.STREAM.PURGE.KV_flowrun-ledger":                                "forget what the batches spent",
		"$JS.API.STREAM.MSG.DELETE.KV_flowrun-ledger":                           `{"seq":1}`,
		"$JS.API.STREAM.UPDATE.KV_flowrun-ledger":                               config(jetstream.StreamConfig{Name: "KV_" + ledgerBucket, AllowRollup: true}),
	})

	// Refused by the streams themselves: a key-value purge (a roll-up),
	// and a second record of a job taken.
	for _, c := range []struct {
		role    Role
		subject string
	}{{RoleCoordinator, "$KV.flowrun-stops.victim.s1"}, {RoleWorker, "$KV.flowrun-limits.model-x"}, {RoleWorker, "$KV.flowrun-results.victim.0.k"},
		{RoleWorker, "$KV.flowrun-ledger.victim"}, {RoleCoordinator, "$KV.flowrun-ledger.victim"}} {
		m := nats.NewMsg(c.subject)
		m.Header.Set("KV-Operation", "PURGE")
		m.Header.Set("Nats-Rollup", "sub")
		if _, err := l.client(t, c.role).js.PublishMsg(ctx, m); err == nil {
			t.Errorf("the %s credential purged %s", c.role, c.subject)
		}
	}
	if _, err := l.client(t, RoleWorker).js.Publish(ctx, takenSubject+"0123456789abcdef0123456789abcdef", []byte("7")); err == nil {
		t.Error("a second record of a taken job was stored")
	}

	// Everything is as it was.
	admin := l.client(t, RoleAdmin)
	for name, want := range map[string]uint64{itemsStream: 1, runsStream: 1, "KV_" + resultsBucket: 1, takenStream: 1, "KV_" + ledgerBucket: 1} {
		st, err := admin.js.Stream(ctx, name)
		must(t, err)
		info := st.CachedInfo()
		if info.State.Msgs != want {
			t.Errorf("%s holds %d messages, want %d", name, info.State.Msgs, want)
		}
		if name == itemsStream && info.Config.Duplicates != 10*time.Minute || name == "KV_"+resultsBucket && info.Config.MaxMsgsPerSubject != 1 ||
			name == runsStream && info.Config.SubjectTransform != nil || name == "KV_"+ledgerBucket && info.Config.AllowRollup {
			t.Errorf("%s's configuration changed: %+v", name, info.Config)
		}
	}
	if _, err := admin.js.Stream(ctx, "FILL"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("a stream was created: %v", err)
	}
	if cons, err := admin.js.Consumer(ctx, itemsStream, workerConsumer); err != nil || cons.CachedInfo().Config.AckWait != 3*time.Second {
		t.Errorf("the workers' consumer: %v", err)
	}
}

// TestNotSetUp: a coordinator or worker credential on a server no admin
// has set up is told so, at once.
func TestNotSetUp(t *testing.T) {
	l := startLockedDown(t)
	for _, role := range []Role{RoleCoordinator, RoleWorker} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c, err := connect(ctx, l.options(role))
		late := ctx.Err()
		cancel()
		if err == nil {
			c.nc.Close()
			t.Fatalf("the %s connected to a server with no streams", role)
		}
		if !errors.Is(err, ErrNotSetUp) || late != nil || strings.Contains(err.Error(), "-js") {
			t.Errorf("the %s on a server not set up: %v", role, err)
		}
	}
}

// TestReplayedJobRefused: a signed job copied and queued again once the
// dedup window has passed is refused by the worker that takes it (the
// job was taken before, from another message) and dropped, never run;
// so is a signed job that has expired. A redelivery of the job's own
// message is not a replay.
func TestReplayedJobRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := startLockedDown(t)
	l.setup(t)
	signer, keys := testSigner(t, "coordinator")
	co := l.options(RoleCoordinator)
	co.Signer, co.Insecure = signer, false
	coord := testConn(t, co)
	var mu sync.Mutex
	var lines []string
	w := &Worker{Options: Options{Coordinators: keys}, CacheDir: t.TempDir(), pipeline: map[string]*loaded{},
		stopped: map[string]string{}, running: map[*runningItem]struct{}{}}
	w.c = testConn(t, l.options(RoleWorker))
	w.c.refused = &refusals{log: func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() }}
	cons, err := w.c.js.Consumer(ctx, itemsStream, workerConsumer)
	must(t, err)
	next := func() jetstream.Msg {
		t.Helper()
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		must(t, err)
		for msg := range batch.Messages() {
			return msg
		}
		t.Fatal("no job came")
		return nil
	}
	publish := func(ticket Ticket, msgID string) *nats.Msg {
		data, _ := json.Marshal(Job{Ticket: ticket, Batch: "b1", Index: 0})
		m := signMsg(signer, itemsSubject+"b1.0", msgID, data)
		_, err := coord.js.PublishMsg(ctx, m)
		must(t, err)
		return m
	}
	job := publish(newTicket("s1", time.Now()), "b1.0.s1")
	first := next()
	md, _ := first.Metadata()
	must(t, w.take(ctx, mustJob(t, first).Nonce, md.Sequence.Stream))
	must(t, w.take(ctx, mustJob(t, first).Nonce, md.Sequence.Stream)) // its redelivery
	must(t, first.DoubleAck(ctx))

	// The dedup window passes (shortened here by the admin), and the
	// captured job is queued again as it was.
	admin := l.client(t, RoleAdmin)
	info, err := admin.js.Stream(ctx, itemsStream)
	must(t, err)
	cfg := info.CachedInfo().Config
	cfg.Duplicates = 100 * time.Millisecond
	_, err = admin.js.UpdateStream(ctx, cfg)
	must(t, err)
	// nats-server wakes its dedup purge before it takes the new window, so
	// under load the purge can run once with the old ten minutes and sleep
	// for them (CI saw this wait out the test's minute). Changing the
	// window again wakes it once more, now that the short one has taken.
	for tries := 1; ; tries++ {
		ack, err := coord.js.PublishMsg(ctx, job)
		must(t, err)
		if !ack.Duplicate {
			break
		}
		time.Sleep(20 * time.Millisecond)
		if tries%25 == 0 {
			cfg.Duplicates = time.Duration(100+tries%2) * time.Millisecond
			_, err = admin.js.UpdateStream(ctx, cfg)
			must(t, err)
		}
	}
	w.item(ctx, next())
	publish(newTicket("s1", time.Now().Add(-jobTTL-time.Minute)), "b1.0.old")
	w.item(ctx, next())

	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 2 || !strings.Contains(lines[0], "replayed") || !strings.Contains(lines[1], "expired") {
		t.Errorf("reported %q, want the replay and the expired job refused", lines)
	}
	// A termination is not acknowledged: it shows in the stream soon after.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err := admin.js.Stream(ctx, itemsStream)
		must(t, err)
		n := st.CachedInfo().State.Msgs
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs still queued: the refused ones were not dropped", n)
		}
	}
}

func mustJob(t *testing.T, msg jetstream.Msg) Job {
	t.Helper()
	var job Job
	must(t, json.Unmarshal(msg.Data(), &job))
	return job
}

// TestLockedDownStoresBounded: a worker publishing into FLOWRUN_RUNS past
// the bytes setup gave it is refused, and what the stream held is kept:
// no credential fills the disk, and none pushes out other runs' data.
func TestLockedDownStoresBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := startLockedDown(t)
	must(t, Setup(ctx, l.options(RoleAdmin), SetupOptions{RunsMaxBytes: 64 << 10}))
	w := l.client(t, RoleWorker)
	chunk := []byte(strings.Repeat("x", 4<<10))
	refused := false
	for i := 0; i < 100 && !refused; i++ {
		_, err := w.js.Publish(ctx, cpSubject+"flood", chunk)
		refused = err != nil
	}
	if !refused {
		t.Fatal("400 KiB went into a FLOWRUN_RUNS of 64 KiB")
	}
	st, err := l.client(t, RoleAdmin).js.Stream(ctx, runsStream)
	must(t, err)
	if info := st.CachedInfo(); info.State.FirstSeq != 1 || info.State.Bytes > 64<<10 {
		t.Errorf("FLOWRUN_RUNS starts at %d with %d bytes: it dropped what it held, or grew past its limit", info.State.FirstSeq, info.State.Bytes)
	}
}

// TestUserCredsEnforced: on a server in operator mode, the credentials
// files WriteUserCreds signs with flowrun's account carry each role's
// permissions: the admin's sets flowrun up, a worker's binds to what it
// made, and the server refuses a purge from the coordinator's and a job
// from the worker's. A file is written owner-only and never overwritten.
func TestUserCredsEnforced(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	operator, err := nkeys.CreateOperator()
	must(t, err)
	resolver := &server.MemAccResolver{}
	account := func(name string) (nkeys.KeyPair, string) {
		kp, err := nkeys.CreateAccount()
		must(t, err)
		pub, _ := kp.PublicKey()
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		if name != "SYS" {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		token, err := ac.Encode(operator)
		must(t, err)
		must(t, resolver.Store(pub, token))
		return kp, pub
	}
	_, system := account("SYS")
	flowrun, _ := account("FLOWRUN")
	opPub, _ := operator.PublicKey()
	oc := jwt.NewOperatorClaims(opPub)
	oc.SystemAccount = system
	s := natstest.Start(t, &server.Options{JetStream: true, StoreDir: t.TempDir(), TrustedOperators: []*jwt.OperatorClaims{oc},
		AccountResolver: resolver, SystemAccount: system})
	seed, _ := flowrun.Seed()
	dir := t.TempDir()
	creds := map[Role]string{}
	for _, role := range Roles {
		creds[role] = filepath.Join(dir, string(role)+".creds")
		must(t, WriteUserCreds(role, seed, creds[role]))
		if fi, err := os.Stat(creds[role]); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v", creds[role], fi.Mode().Perm(), err)
		}
	}
	if err := WriteUserCreds(RoleWorker, seed, creds[RoleWorker]); err == nil {
		t.Error("an existing credentials file was overwritten")
	}
	url := s.ClientURL()
	must(t, Setup(ctx, Options{URL: url, Creds: creds[RoleAdmin]}, SetupOptions{}))
	testConn(t, Options{URL: url, Creds: creds[RoleWorker]})
	dialClient(t, url, nats.UserCredentials(creds[RoleCoordinator])).refuses(t, RoleCoordinator, map[string]string{
		"$JS.API.STREAM.PURGE.FLOWRUN_RUNS": "purge the runs"})
	dialClient(t, url, nats.UserCredentials(creds[RoleWorker])).refuses(t, RoleWorker, map[string]string{
		"flowrun.items.b.0": "queue a job"})
}
