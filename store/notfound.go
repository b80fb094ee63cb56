package store

import (
	"fmt"
	"strings"

	"github.com/flowrun/flowrun/journal"
)

// NotFoundError says the store holds no record by the reference given.
// It is ErrNotFound for a run or a batch, ErrNoSnapshot for a checkpoint
// or a snapshot.
type NotFoundError struct {
	What    string // "run", "batch", "checkpoint" or "snapshot"
	Ref     string // the id, prefix, label or checkpoint number given
	Path    string // the store's file
	Run     string // the run a checkpoint or snapshot was looked for in
	In      string // the batch an item was looked for in
	None    bool   // the store holds no record of its kind at all ("last" names none)
	Similar []string
}

func (e *NotFoundError) Error() string {
	switch {
	case e.What == "checkpoint":
		return fmt.Sprintf("%v: run %s has no checkpoint %s", ErrNoSnapshot, e.Run, e.Ref)
	case e.What == "snapshot":
		return fmt.Sprintf("%v %q for run %s", ErrNoSnapshot, e.Ref, e.Run)
	case e.None:
		return fmt.Sprintf("%v: no %s in %s yet", ErrNotFound, e.What, e.Path)
	}
	msg := fmt.Sprintf("%v %q in %s", ErrNotFound, e.Ref, e.Path)
	switch e.What {
	case "batch":
		msg = fmt.Sprintf("%v: no batch %q in %s", ErrNotFound, e.Ref, e.Path)
	case "item":
		msg = fmt.Sprintf("batch %s has no item %q", e.In, e.Ref)
	}
	if len(e.Similar) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(e.Similar, ", "))
	}
	return msg
}

// Is makes the error ErrNotFound or ErrNoSnapshot, as its kind says, and
// an unknown run journal.ErrNotFound too (the store is a journal's).
func (e *NotFoundError) Is(target error) bool {
	if e.What == "checkpoint" || e.What == "snapshot" {
		return target == ErrNoSnapshot
	}
	return target == ErrNotFound || e.What == "run" && target == journal.ErrNotFound
}
