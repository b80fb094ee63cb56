package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// TestConnectWithoutJetStream: a server started without -js is told at
// once, not retried as if it were electing a leader.
func TestConnectWithoutJetStream(t *testing.T) {
	s := startServer(t, &server.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := connect(ctx, Options{URL: s.ClientURL()})
	if err == nil {
		c.nc.Close()
		t.Fatal("connected to a server without JetStream")
	}
	if ctx.Err() != nil {
		t.Errorf("connect retried until its context ended: %v", err)
	}
	if !errors.Is(err, jetstream.ErrJetStreamNotEnabled) || !strings.Contains(err.Error(), "is the server started with -js?") {
		t.Errorf("connecting to a server without JetStream: %v", err)
	}
}

// TestCredsFile: an nkey seed file given as Creds authenticates to a
// server that knows only that nkey; without it the server refuses, and a
// file that is neither a credentials file nor a seed is said to be so.
func TestCredsFile(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	s := startServer(t, &server.Options{JetStream: true, StoreDir: t.TempDir(), Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	dir := t.TempDir()
	seedFile := filepath.Join(dir, "worker.nk")
	must(t, os.WriteFile(seedFile, seed, 0o600))
	c := testConn(t, Options{URL: s.ClientURL(), Creds: seedFile})
	if !c.nc.IsConnected() {
		t.Fatal("not connected with the seed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := connect(ctx, Options{URL: s.ClientURL()}); err == nil {
		c.nc.Close()
		t.Error("connected without credentials")
	}
	garbage := filepath.Join(dir, "garbage")
	must(t, os.WriteFile(garbage, []byte("not a key"), 0o600))
	if _, err := connect(ctx, Options{URL: s.ClientURL(), Creds: garbage}); err == nil || !strings.Contains(err.Error(), "neither a credentials file nor an nkey seed") {
		t.Errorf("a garbage credentials file: %v", err)
	}
}
