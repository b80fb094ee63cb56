// Package jsjournaltest opens JetStream journals for tests, each on a
// real nats-server of its own, embedded, with JetStream on disk: no run
// is shared between tests, and what a test checks is what JetStream does.
package jsjournaltest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/flowrun/flowrun/internal/natstest"
	"github.com/flowrun/flowrun/journal/jsjournal"
)

// Connect starts a server and connects to it; both end with the test.
func Connect(t *testing.T) *nats.Conn {
	t.Helper()
	s := natstest.Start(t, &server.Options{JetStream: true, StoreDir: t.TempDir()})
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Open is the journal on a server of its own.
func Open(t *testing.T) *jsjournal.Journal {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	j, err := jsjournal.Open(ctx, Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	return j
}
