package scoringbench

import "testing"

// TestCandidatesAreAllDifferent guards the benchmarks' honesty: a cache
// keyed by source must find nothing to reuse among them.
func TestCandidatesAreAllDifferent(t *testing.T) {
	seen := map[any]int{}
	for i, c := range Candidates(1000) {
		if j, ok := seen[c]; ok {
			t.Fatalf("candidates %d and %d are the same source", j, i)
		}
		seen[c] = i
	}
}
