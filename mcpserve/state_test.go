package mcpserve

import (
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/runtime"
)

// A state is refused when it was issued to another session, has
// expired, was altered, or was used before.
func TestMCPServeRequestStateChecks(t *testing.T) {
	rs := newRequestStates()
	q := runtime.Question{Kind: runtime.QuestionConfirm, Path: "careful"}
	now := time.Now()
	fresh := rs.seal("run-1", q, "session-a")
	cases := []struct {
		name, state, session string
		at                   time.Time
		want                 string
	}{
		{"another session", fresh, "session-b", now, "issued to another session; run run-1 waits: flowrun resume run-1 --answer yes"},
		{"expired", fresh, "session-a", now.Add(requestStateLifetime + time.Second), "the request state expired at"},
		{"altered", fresh[:len(fresh)-2] + "AA", "session-a", now, "not issued by this server"},
		{"another server's", newRequestStates().seal("run-1", q, "session-a"), "session-a", now, "not issued by this server"},
		{"first use", fresh, "session-a", now, ""},
		{"second use", fresh, "session-a", now, "the request state was already used"},
	}
	for _, c := range cases {
		w, err := rs.open(c.state, c.session, c.at)
		switch {
		case c.want == "" && (err != nil || w.Run != "run-1" || w.Question.Path != "careful"):
			t.Errorf("%s: got %+v, %v", c.name, w, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
}
