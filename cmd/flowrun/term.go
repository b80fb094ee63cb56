package main

import (
	"os"

	"golang.org/x/term"
)

// isTerminal reports whether f is a terminal (a console on Windows).
func isTerminal(f *os.File) bool {
	return term.IsTerminal(int(f.Fd()))
}
