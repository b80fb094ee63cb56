package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// TestConnectWithoutJetStream: a server started without -js is told at
// once, not retried as if it were electing a leader.
func TestConnectWithoutJetStream(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("the NATS server did not start")
	}
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
