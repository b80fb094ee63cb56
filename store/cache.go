package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/flowrun/flowrun/redact"
)

// CachedReply returns the reply cached for a request, counting the hit; an
// entry older than maxAge (when above 0) is a miss. It implements
// llm.ReplyCache.
func (s *Store) CachedReply(ctx context.Context, endpoint, hash string, maxAge time.Duration) ([]byte, bool, error) {
	var reply string
	var created sql.NullString
	err := s.db.QueryRowContext(ctx, `SELECT reply, created_at FROM response_cache WHERE endpoint = ? AND hash = ?`, endpoint, hash).Scan(&reply, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("response cache: %w", err)
	}
	if maxAge > 0 && time.Since(parseTime(created)) > maxAge {
		return nil, false, nil
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE response_cache SET hits = hits + 1 WHERE endpoint = ? AND hash = ?`, endpoint, hash); err != nil {
		return nil, false, fmt.Errorf("response cache: %w", err)
	}
	return []byte(reply), true, nil
}

// PutCachedReply stores a reply (redacted), replacing an older one for
// the same request.
func (s *Store) PutCachedReply(ctx context.Context, endpoint, hash string, reply []byte) error {
	_, err := s.db.ExecContext(ctx, `INSERT OR REPLACE INTO response_cache (endpoint, hash, reply, created_at) VALUES (?, ?, ?, ?)`,
		endpoint, hash, string(redact.JSON(reply)), now())
	if err != nil {
		return fmt.Errorf("response cache: %w", err)
	}
	return nil
}

// CacheStats describes the response cache.
type CacheStats struct {
	Entries int   `json:"entries"`
	Hits    int   `json:"hits"`  // answers given from it, over all entries it holds
	Bytes   int64 `json:"bytes"` // the stored replies' size
}

// ResponseCacheStats counts the response cache's entries, hits and size.
func (s *Store) ResponseCacheStats(ctx context.Context) (CacheStats, error) {
	var st CacheStats
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(hits), 0), COALESCE(SUM(LENGTH(reply) + LENGTH(hash) + LENGTH(endpoint)), 0) FROM response_cache`).
		Scan(&st.Entries, &st.Hits, &st.Bytes)
	if err != nil {
		return st, fmt.Errorf("response cache: %w", err)
	}
	return st, nil
}

// ClearResponseCache deletes every cached reply and says how many.
func (s *Store) ClearResponseCache(ctx context.Context) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM response_cache`)
	if err != nil {
		return 0, fmt.Errorf("response cache: %w", err)
	}
	return res.RowsAffected()
}
