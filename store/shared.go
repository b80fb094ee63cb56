package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// A long string is stored once. A code node's stdout is in its
// sandbox_run event, its node_finished event and its checkpoint, and the
// checkpoint of a loop around it repeats it twice more (in the loop's
// output and in the outputs it makes visible): every string of sharedMin
// bytes or more in an event or a checkpoint goes to the shared_values
// table once, keyed by its sha256, and the row keeps "" in its place and,
// in a top-level "$shared" field, where each one goes. value_refs says
// which runs use which values, so that Prune can delete those no run uses
// any more. Rows that share nothing (small ones, and those moved in from a
// journal, which is never shared) are stored and read as they are.
const sharedMin = 16 << 10

// sharedString says where in a row a shared string goes: the keys and
// indexes from the top of the row's JSON down to it.
type sharedString struct {
	Path []any  `json:"path"`
	Hash string `json:"hash"`
}

// value is a string stored once.
type value struct {
	hash string
	data string
}

// shareStrings moves the long strings out of a row's JSON (redacted
// already) and returns the row to store and the values it refers to.
func shareStrings(data []byte) (string, []value, error) {
	if len(data) < sharedMin {
		return string(data), nil, nil
	}
	tree, err := decodeTree(data)
	if err != nil {
		return "", nil, err
	}
	var refs []sharedString
	var values []value
	var walk func(v any, path []any) any
	walk = func(v any, path []any) any {
		switch x := v.(type) {
		case string:
			if len(x) >= sharedMin {
				sum := sha256.Sum256([]byte(x))
				h := hex.EncodeToString(sum[:])
				refs = append(refs, sharedString{Path: slices.Clone(path), Hash: h})
				values = append(values, value{hash: h, data: x})
				return ""
			}
		case map[string]any:
			for k, c := range x {
				x[k] = walk(c, append(path, k))
			}
		case []any:
			for i, c := range x {
				x[i] = walk(c, append(path, i))
			}
		}
		return v
	}
	row, ok := walk(tree, nil).(map[string]any)
	if !ok || len(refs) == 0 {
		return string(data), nil, nil
	}
	row["$shared"] = refs
	b, err := json.Marshal(row)
	if err != nil {
		return "", nil, err
	}
	return string(b), values, nil
}

// decodeTree decodes JSON keeping numbers as they were written.
func decodeTree(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	return tree, nil
}

// valueReader reads stored values by hash, each once.
type valueReader struct {
	db   *sql.DB
	seen map[string]string
}

func (vs *valueReader) get(ctx context.Context, hash string) (string, error) {
	if data, ok := vs.seen[hash]; ok {
		return data, nil
	}
	var data string
	err := vs.db.QueryRowContext(ctx, `SELECT data FROM shared_values WHERE hash = ?`, hash).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("stored value %s is missing", hash)
	}
	if err != nil {
		return "", err
	}
	if vs.seen == nil {
		vs.seen = map[string]string{}
	}
	vs.seen[hash] = data
	return data, nil
}

// restore puts a row's shared strings back: the row as it was before
// shareStrings.
func (vs *valueReader) restore(ctx context.Context, data string) (string, error) {
	if !strings.Contains(data, `"$shared"`) {
		return data, nil
	}
	tree, err := decodeTree([]byte(data))
	if err != nil {
		return "", err
	}
	row, _ := tree.(map[string]any)
	list, ok := row["$shared"].([]any)
	if !ok {
		return data, nil // a string that happens to say "$shared"
	}
	delete(row, "$shared")
	for _, item := range list {
		m, _ := item.(map[string]any)
		path, _ := m["path"].([]any)
		hash, _ := m["hash"].(string)
		s, err := vs.get(ctx, hash)
		if err != nil {
			return "", err
		}
		if !setAt(row, path, s) {
			return "", fmt.Errorf("stored value %s: no place %v in the row", hash, path)
		}
	}
	b, err := json.Marshal(row)
	return string(b), err
}

// setAt sets the value at path under v (keys of objects, indexes of
// arrays), reporting whether the path leads somewhere.
func setAt(v any, path []any, s string) bool {
	if len(path) == 0 {
		return false
	}
	for i, step := range path {
		last := i == len(path)-1
		switch x := v.(type) {
		case map[string]any:
			k, ok := step.(string)
			if !ok {
				return false
			}
			if last {
				x[k] = s
				return true
			}
			v = x[k]
		case []any:
			n, ok := step.(json.Number)
			j, err := n.Int64()
			if !ok || err != nil || j < 0 || j >= int64(len(x)) {
				return false
			}
			if last {
				x[j] = s
				return true
			}
			v = x[j]
		default:
			return false
		}
	}
	return false
}
