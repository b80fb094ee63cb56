package main

import (
	"io"
	"os"
	"strconv"

	"golang.org/x/term"
)

// isTerminal reports whether f is a terminal (a console on Windows).
func isTerminal(f *os.File) bool {
	return term.IsTerminal(int(f.Fd()))
}

// width is how many columns a text view written to w may use: the
// terminal's, else $COLUMNS, else 100.
func width(w io.Writer) int {
	if f, ok := fileOf(w); ok && isTerminal(f) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 100
}
