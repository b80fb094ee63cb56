package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/flowrun/flowrun/redact"
)

// Rating is a person's verdict on one item of a batch: the human metric.
type Rating struct {
	Batch string
	Key   string // the item's key
	Pass  bool
	Note  string
	Rated time.Time
}

// Rate records a rating of a batch's item, replacing any earlier one of
// it: an item has one human verdict, the last given. An item the batch
// does not have is refused, naming the batch.
func (s *Store) Rate(ctx context.Context, r *Rating) error {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM batch_items WHERE batch_id = ? AND item_key = ?`, r.Batch, r.Key).Scan(&n); err != nil {
		return fmt.Errorf("run store %s: %w", s.path, err)
	}
	if n == 0 {
		return &NotFoundError{What: "item", Ref: r.Key, Path: s.path, In: r.Batch, Similar: s.similarItems(ctx, r.Batch, r.Key)}
	}
	if err := s.intact(); err != nil {
		return err
	}
	r.Rated = time.Now().UTC()
	_, err := s.db.ExecContext(ctx, `INSERT INTO batch_ratings (batch_id, item_key, pass, note, rated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (batch_id, item_key) DO UPDATE SET pass = excluded.pass, note = excluded.note, rated_at = excluded.rated_at`,
		r.Batch, r.Key, r.Pass, redact.String(r.Note), r.Rated.Format(time.RFC3339Nano))
	if err != nil {
		return fmt.Errorf("batch %s: rating item %s: %w", r.Batch, r.Key, err)
	}
	return s.intact()
}

// Ratings are a batch's ratings by item key.
func (s *Store) Ratings(ctx context.Context, batchID string) (map[string]*Rating, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT item_key, pass, note, rated_at FROM batch_ratings WHERE batch_id = ?`, batchID)
	if err != nil {
		return nil, fmt.Errorf("batch %s: reading its ratings: %w", batchID, err)
	}
	defer rows.Close()
	out := map[string]*Rating{}
	for rows.Next() {
		r := &Rating{Batch: batchID}
		var rated sql.NullString
		if err := rows.Scan(&r.Key, &r.Pass, &r.Note, &rated); err != nil {
			return nil, fmt.Errorf("batch %s: reading its ratings: %w", batchID, err)
		}
		r.Rated = parseTime(rated)
		out[r.Key] = r
	}
	return out, rows.Err()
}

// similarItems are up to five keys of batchID's items that share all but
// the last few characters of key (keys are mostly a name and a number),
// for a did-you-mean.
func (s *Store) similarItems(ctx context.Context, batchID, key string) []string {
	keys, err := queryAll(ctx, s, func(row interface{ Scan(...any) error }) (string, error) {
		var k string
		return k, row.Scan(&k)
	}, `SELECT item_key FROM batch_items WHERE batch_id = ? ORDER BY idx`, batchID)
	if err != nil {
		return nil
	}
	var out []string
	for _, k := range keys {
		stem := key[:len(key)-min(len(key)/2, 3)]
		if strings.HasPrefix(k, stem) && len(out) < 5 {
			out = append(out, k)
		}
	}
	return out
}
