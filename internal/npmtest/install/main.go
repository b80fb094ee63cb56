// Command install installs every npm package the tests pin, so that CI
// runs the suites against them instead of skipping.
package main

import (
	"fmt"
	"os"
	"sort"

	"github.com/flowrun/flowrun/internal/npmtest"
)

func main() {
	pkgs := make([]string, 0, len(npmtest.Pinned))
	for p := range npmtest.Pinned {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		if err := npmtest.Install(p); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("%s@%s in %s\n", p, npmtest.Pinned[p], npmtest.Dir())
	}
}
