package termview

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/flowrun/flowrun/jsonvalue"
)

// valueWidth is how many characters of a value Values shows.
const valueWidth = 200

// Values prints named values (a run's inputs or outputs) under a title,
// one a line in name order, each as JSON cut to its first 200 characters
// (the whole is in a --json view); nothing when there are none. Write it
// to a Text: the values are what a model or a person wrote.
func Values(w io.Writer, title string, values map[string]any) {
	if len(values) == 0 {
		return
	}
	fmt.Fprintf(w, "%s:\n", title)
	for _, k := range slices.Sorted(maps.Keys(values)) {
		b, err := jsonvalue.Marshal(values[k])
		if err != nil {
			b = []byte(fmt.Sprint(values[k]))
		}
		if r := []rune(string(b)); len(r) > valueWidth {
			b = []byte(string(r[:valueWidth-1]) + "…")
		}
		fmt.Fprintf(w, "  %s: %s\n", k, b)
	}
}
