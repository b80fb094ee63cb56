package main

import (
	"io"

	"github.com/flowrun/flowrun/internal/termview"
)

// textOut is termview.Text as the commands write it: textOut{w}.
type textOut struct{ w io.Writer }

func (t textOut) Write(p []byte) (int, error) { return termview.Text{W: t.w}.Write(p) }
func (t textOut) Unwrap() io.Writer           { return t.w }

// jsonOut is termview.JSONLines as the commands write it: jsonOut{w}.
type jsonOut struct{ w io.Writer }

func (j jsonOut) Write(p []byte) (int, error) { return termview.JSONLines{W: j.w}.Write(p) }

// The CLI's names for termview's helpers.
var (
	printable  = termview.Printable
	outJSON    = termview.JSON
	fileOf     = termview.FileOf
	isTerminal = termview.IsTerminal
	width      = termview.Width
)

// writeJSON prints v as indented JSON (see termview.JSON) and returns the
// exit code.
func writeJSON(w io.Writer, v any) int {
	if termview.WriteJSON(w, v) != nil {
		return exitFailed
	}
	return exitOK
}
