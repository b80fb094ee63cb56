package main

import (
	"io"

	"github.com/flowrun/flowrun/internal/termview"
)

// writeJSON prints v as indented JSON (see termview.JSON) and returns the
// exit code.
func writeJSON(w io.Writer, v any) int {
	if termview.WriteJSON(w, v) != nil {
		return exitFailed
	}
	return exitOK
}
