package batch

import "strings"

// DiffOp is one piece of a text diff: text both sides share ('='), only
// the first has ('-') or only the second has ('+').
type DiffOp struct {
	Kind byte
	Text string
}

// maxDiffCells bounds the work of one diff (tokens of a times tokens of
// b): past it, the texts are shown as one removal and one addition.
const maxDiffCells = 4_000_000

// DiffText diffs two texts by lines when either has several, else by
// words, as the longest common subsequence of those pieces.
func DiffText(a, b string) []DiffOp {
	split := splitWords
	if strings.Contains(a, "\n") || strings.Contains(b, "\n") {
		split = func(s string) []string { return strings.SplitAfter(s, "\n") }
	}
	x, y := split(a), split(b)
	if len(x)*len(y) > maxDiffCells {
		return merge(nil, []DiffOp{{'-', a}, {'+', b}})
	}
	// lcs[i][j] is the length of the longest common subsequence of x[i:]
	// and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []DiffOp
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			ops = merge(ops, []DiffOp{{'=', x[i]}})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = merge(ops, []DiffOp{{'-', x[i]}})
			i++
		default:
			ops = merge(ops, []DiffOp{{'+', y[j]}})
			j++
		}
	}
	return ops
}

// splitWords cuts text after each run of spaces, so that joining the
// pieces gives it back.
func splitWords(s string) []string {
	var out []string
	start := 0
	for i := 1; i <= len(s); i++ {
		if i == len(s) || s[i-1] == ' ' && s[i] != ' ' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i
		}
	}
	return out
}

// merge appends ops, joining neighbours of one kind and dropping empty
// text.
func merge(ops, more []DiffOp) []DiffOp {
	for _, op := range more {
		if op.Text == "" {
			continue
		}
		if n := len(ops); n > 0 && ops[n-1].Kind == op.Kind {
			ops[n-1].Text += op.Text
			continue
		}
		ops = append(ops, op)
	}
	return ops
}
