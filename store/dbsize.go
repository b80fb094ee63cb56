package store

import (
	"encoding/binary"
	"os"
)

// autoCheckpointPages is SQLite's default WAL auto-checkpoint size.
const autoCheckpointPages = 1000

// checkpointSlack is how far below its largest size the database file at
// path may be while it is intact, from its page size; ok is false when
// the file no longer starts with an SQLite header (emptied, cut inside
// it, or overwritten). A WAL checkpoint run by one connection truncates
// the file to the database size of its own snapshot, which may be older
// than pages another connection's checkpoint already wrote out: the pages
// cut off are still in the WAL and come back at the next checkpoint.
// Commits between two such snapshots stay within an auto-checkpoint.
func checkpointSlack(path string) (slack int64, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var h [100]byte
	if _, err := f.ReadAt(h[:], 0); err != nil || string(h[:16]) != "SQLite format 3\x00" {
		return 0, false
	}
	page := int64(binary.BigEndian.Uint16(h[16:]))
	if page == 1 {
		page = 65536
	}
	return autoCheckpointPages * page, true
}

// withinSlack says whether a file shrunk by shrink bytes may still be intact.
func withinSlack(path string, shrink int64) bool {
	slack, ok := checkpointSlack(path)
	return ok && shrink <= slack
}
