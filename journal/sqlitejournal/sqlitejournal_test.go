package sqlitejournal_test

import (
	"path/filepath"
	"testing"

	"github.com/flowrun/flowrun/journal"
	"github.com/flowrun/flowrun/journal/journaltest"
	"github.com/flowrun/flowrun/journal/sqlitejournal"
	"github.com/flowrun/flowrun/store"
)

func TestConformance(t *testing.T) {
	journaltest.Run(t, func(t *testing.T) journal.Journal {
		s, err := store.Open(filepath.Join(t.TempDir(), "runs.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return sqlitejournal.New(s)
	})
}
