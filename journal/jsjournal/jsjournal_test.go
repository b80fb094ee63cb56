package jsjournal_test

import (
	"context"
	"testing"
	"time"

	"github.com/flowrun/flowrun/journal"
	"github.com/flowrun/flowrun/journal/journaltest"
	"github.com/flowrun/flowrun/journal/jsjournal"
)

// TestConformance runs the suite against a real embedded nats-server with
// JetStream on disk, one server per test so that no run is shared.
func TestConformance(t *testing.T) {
	journaltest.Run(t, func(t *testing.T) journal.Journal {
		nc := connect(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		j, err := jsjournal.Open(ctx, nc)
		if err != nil {
			t.Fatal(err)
		}
		return j
	})
}
