package cluster

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

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
	s := startServer(t, &server.Options{JetStream: true, StoreDir: t.TempDir(), Nkeys: users})
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
	c := &client{denied: map[string]bool{}}
	nk, err := nats.NkeyOptionFromSeed(l.creds[role])
	must(t, err)
	c.nc, err = nats.Connect(l.url, nk, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
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

// TestLockedDownProbe (temporary) lists what the coordinator is refused.
func TestLockedDownProbe(t *testing.T) {
	l := startLockedDown(t)
	l.setup(t)
	c := testConn(t, l.options(RoleCoordinator))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := followBucket(ctx, c.js, resultsBucket, "b1.>")
	t.Logf("follow results: %v", err)
	if err == nil {
		select {
		case <-f.ready:
		case <-ctx.Done():
			t.Log("results never ready")
		}
	}
	cons, err := c.js.OrderedConsumer(ctx, runsStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{evSubject + ">"}})
	t.Logf("events consumer: %v", err)
	w := testConn(t, l.options(RoleWorker))
	ev := &events{c: w, run: "r1"}
	ev.Event(runtime.Event{Type: "x"})
	ev.wait(ctx)
	m, err := cons.Next()
	t.Logf("event: %v %v", m, err)
	_, _, err = c.loadEvents(ctx, "r1")
	t.Logf("load events: %v", err)
	_, err = c.stops.Get(ctx, "x.y")
	t.Logf("stops get: %v", err)
	_, err = c.items.GetLastMsgForSubject(ctx, itemsSubject+"b.1")
	t.Logf("items get: %v", err)
	c.denials.mu.Lock()
	t.Logf("denied: %v", strings.Join(keys(c.denials.subjects), "\n"))
	c.denials.mu.Unlock()
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
