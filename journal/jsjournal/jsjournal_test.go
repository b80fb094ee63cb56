package jsjournal_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/flowrun/flowrun/internal/natstest"
	"github.com/flowrun/flowrun/journal"
	"github.com/flowrun/flowrun/journal/journaltest"
	"github.com/flowrun/flowrun/journal/jsjournal"
)

// TestConformance runs the suite against a real embedded nats-server with
// JetStream on disk, one server per test so that no run is shared.
func TestConformance(t *testing.T) {
	journaltest.Run(t, func(t *testing.T) journal.Journal {
		s := natstest.Start(t, &server.Options{JetStream: true, StoreDir: t.TempDir()})
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		j, err := jsjournal.Open(ctx, nc)
		if err != nil {
			t.Fatal(err)
		}
		return j
	})
}
