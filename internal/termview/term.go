package termview

import (
	"io"
	"os"
	"strconv"

	"golang.org/x/term"
)

// IsTerminal reports whether f is a terminal (a console on Windows).
func IsTerminal(f *os.File) bool {
	return term.IsTerminal(int(f.Fd()))
}

// Width is how many columns a text view written to w may use: the
// terminal's, else $COLUMNS, else 100.
func Width(w io.Writer) int {
	if f, ok := FileOf(w); ok && IsTerminal(f) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 100
}
