package store

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/redact"
)

// A reply that echoes a registered secret is stored without it, and a
// request answered from the cache counts as a hit.
func TestResponseCacheRedactsAndCountsHits(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Letters no other test's text holds 8 of in a row: any run of 8
	// characters of a registered secret is redacted process-wide.
	const secret = "sk-cachetest-QZXJVKWQZPXJKVQW"
	redact.Add(secret)
	if err := s.PutCachedReply(ctx, "http://h/v1", "abc", []byte(`{"text":"the key is `+secret+`"}`)); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.CachedReply(ctx, "http://h/v1", "abc", time.Nanosecond); ok || err != nil {
		t.Fatalf("an entry older than its max age answered (err %v)", err)
	}
	b, ok, err := s.CachedReply(ctx, "http://h/v1", "abc", time.Hour)
	if err != nil || !ok {
		t.Fatalf("CachedReply: %v ok=%v", err, ok)
	}
	if strings.Contains(string(b), "QZXJVKWQZPXJKVQW") {
		t.Fatalf("the cache stored the secret: %s", b)
	}
	if _, ok, _ := s.CachedReply(ctx, "http://other/v1", "abc", 0); ok {
		t.Fatal("another endpoint's request was answered")
	}
	st, err := s.ResponseCacheStats(ctx)
	if err != nil || st.Entries != 1 || st.Hits != 1 || st.Bytes == 0 {
		t.Fatalf("stats %+v, %v", st, err)
	}
}
