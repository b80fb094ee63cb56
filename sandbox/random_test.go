package sandbox

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// draws runs req twice on one worker (the second call warm) and once on a
// new worker, and returns the three results.
func draws(t *testing.T, req Request) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, calls := range []int{2, 1} {
		s := New(Options{CacheDir: sharedCache(t), Workers: 1})
		defer s.Close()
		if req.Language == Python {
			needPython(t, s)
		}
		for range calls {
			res, err := s.Run(ctx, req)
			if err != nil || !res.OK {
				t.Fatalf("%v %+v", err, res)
			}
			out = append(out, fmt.Sprint(res.Result))
		}
	}
	return out
}

func allDiffer(t *testing.T, what string, got []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, g := range got {
		if seen[g] {
			t.Errorf("%s: two calls drew the same value %s (all: %v)", what, g, got)
		}
		seen[g] = true
	}
}

// TestCallsDrawTheirOwnSecrets: every call's random source is its own, so
// that no two calls hand out the same secret: os.urandom, secrets and
// uuid4 in Python, crypto/rand in Go. Python's random module is seeded the
// same in every call, as documented (replays of code that shuffles stay
// the same).
func TestCallsDrawTheirOwnSecrets(t *testing.T) {
	t.Run("python", func(t *testing.T) {
		got := draws(t, Request{Language: Python, Source: "import os, secrets, uuid, random\n[secrets.token_hex(16), os.urandom(16).hex(), str(uuid.uuid4()), random.random()]"})
		for i, what := range []string{"secrets.token_hex", "os.urandom", "uuid.uuid4"} {
			var column []string
			for _, g := range got {
				column = append(column, fieldOf(g, i))
			}
			allDiffer(t, what, column)
		}
		for _, g := range got[1:] {
			if fieldOf(g, 3) != fieldOf(got[0], 3) {
				t.Errorf("random.random(): %s, then %s", fieldOf(got[0], 3), fieldOf(g, 3))
			}
		}
	})
	t.Run("go", func(t *testing.T) {
		allDiffer(t, "crypto/rand", draws(t, Request{Language: Go, Call: "f",
			Source: goFn(`"crypto/rand"; "encoding/hex"`, "b := make([]byte, 16)\nrand.Read(b)\nreturn hex.EncodeToString(b)")}))
	})
}

// fieldOf is the i-th item of a list printed by fmt.Sprint.
func fieldOf(list string, i int) string {
	fields := strings.Fields(strings.Trim(list, "[]"))
	if i >= len(fields) {
		return ""
	}
	return fields[i]
}
