package jsjournal_test

import (
	"testing"

	"github.com/flowrun/flowrun/journal"
	"github.com/flowrun/flowrun/journal/journaltest"
	"github.com/flowrun/flowrun/journal/jsjournal/jsjournaltest"
)

// TestConformance runs the suite against a real embedded nats-server with
// JetStream on disk, one server per test so that no run is shared.
func TestConformance(t *testing.T) {
	journaltest.Run(t, func(t *testing.T) journal.Journal { return jsjournaltest.Open(t) })
}
