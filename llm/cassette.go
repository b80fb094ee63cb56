package llm

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/redact"
)

// Cassette is a set of recorded model exchanges: what a run with --record
// wrote, and what --replay answers from. Each entry is keyed by node path,
// loop iteration, node attempt and the hash of the request, plus a repeat
// count for the same request made again under the same key (an agent
// retrying a malformed tool call sends the same request twice and expects
// two different answers). A Cassette is safe for concurrent use.
type Cassette struct {
	mu      sync.Mutex
	path    string
	entries []*entry
	// served counts, per key and hash, how many entries were handed out
	// (replay) or written (record).
	served map[string]int
	// mcp and mcpTools are the MCP tool calls and listings (cassette_mcp.go).
	mcp      []*MCPCall
	mcpTools []*MCPListing
}

type cassetteFile struct {
	Version  int           `yaml:"version"`
	Entries  []*entry      `yaml:"entries"`
	MCPTools []*MCPListing `yaml:"mcp_tools,omitempty"`
	MCP      []*MCPCall    `yaml:"mcp,omitempty"`
}

// entry is one recorded exchange. The request shows what was sent (images
// abbreviated to their hash) and never headers, endpoints or keys.
type entry struct {
	Node      string `yaml:"node"`
	Iteration int    `yaml:"iteration"`
	Attempt   int    `yaml:"attempt"`
	Hash      string `yaml:"hash,omitempty"` // optional: without it the entry answers any request for its key
	Repeat    int    `yaml:"repeat,omitempty"`
	Request   *call  `yaml:"request"`
	// Exactly one of Response and Error is set.
	Response *reply         `yaml:"response,omitempty"`
	CostUSD  float64        `yaml:"cost_usd,omitempty"`
	Error    *recordedError `yaml:"error,omitempty"`
	seq      int
}

type recordedError struct {
	Class   errclass.Class `yaml:"class"`
	Status  int            `yaml:"status,omitempty"`
	Message string         `yaml:"message"`
}

const cassetteVersion = 1

// NewCassette returns an empty cassette to record into.
func NewCassette() *Cassette {
	return &Cassette{served: map[string]int{}}
}

// LoadCassette reads a cassette file for replay.
func LoadCassette(path string) (*Cassette, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cassette: %w", err)
	}
	var f cassetteFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("cassette %s: %w", path, err)
	}
	if f.Version != cassetteVersion {
		return nil, fmt.Errorf("cassette %s: version %d, want %d", path, f.Version, cassetteVersion)
	}
	c := NewCassette()
	c.path = path
	for i, e := range f.Entries {
		switch {
		case e == nil || (e.Response == nil) == (e.Error == nil):
			return nil, fmt.Errorf("cassette %s: entry %d: needs one of response: or error:", path, i+1)
		case e.Node == "":
			return nil, fmt.Errorf("cassette %s: entry %d: needs node: (the node's run path)", path, i+1)
		case e.Hash != "" && e.Request == nil:
			return nil, fmt.Errorf("cassette %s: entry %d (node %q): an entry with a hash needs the request: it was recorded from", path, i+1, e.Node)
		}
		e.seq = i
		c.entries = append(c.entries, e)
	}
	for i, m := range f.MCP {
		if m == nil || m.Node == "" || m.Tool == "" {
			return nil, fmt.Errorf("cassette %s: mcp call %d: needs node: and tool:", path, i+1)
		}
	}
	c.mcp, c.mcpTools = f.MCP, f.MCPTools
	return c, nil
}

// Len is the number of entries, MCP calls included.
func (c *Cassette) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries) + len(c.mcp)
}

// WriteFile writes the cassette as YAML, entries sorted by node path,
// iteration, attempt and then recording order, so that re-recording the
// same run gives a small diff.
func (c *Cassette) WriteFile(path string) error {
	c.mu.Lock()
	entries := append([]*entry(nil), c.entries...)
	c.mu.Unlock()
	slices.SortStableFunc(entries, func(a, b *entry) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Iteration, b.Iteration), cmp.Compare(a.Attempt, b.Attempt), cmp.Compare(a.seq, b.seq))
	})
	var buf bytes.Buffer
	buf.WriteString("# flowrun cassette: model exchanges recorded with --record, answered by --replay.\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	calls, listings := c.sortedMCP()
	if err := enc.Encode(cassetteFile{Version: cassetteVersion, Entries: entries, MCPTools: listings, MCP: calls}); err != nil {
		return fmt.Errorf("cassette: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("cassette: %w", err)
	}
	out := []byte(redact.String(buf.String()))
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cassette-*")
	if err != nil {
		return fmt.Errorf("cassette: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return fmt.Errorf("cassette: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cassette: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("cassette: %w", err)
	}
	c.mu.Lock()
	c.path = path
	c.mu.Unlock()
	return nil
}

// AppendFile writes c to path after the exchanges path already holds, if
// it exists: a run resumed later adds to what it recorded before. A request
// recorded again under the same key counts on as a repeat.
func (c *Cassette) AppendFile(path string) error {
	base, err := LoadCassette(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c.WriteFile(path)
	}
	if err != nil {
		return err
	}
	recorded := map[string]int{}
	for _, e := range base.entries {
		recorded[servedKey(Key{e.Node, e.Iteration, e.Attempt}, e.Hash)]++
	}
	for _, m := range base.mcp {
		recorded[mcpKey(m.Node, m.Tool)]++
	}
	c.mu.Lock()
	for _, e := range c.entries {
		added := *e
		added.Repeat += recorded[servedKey(Key{e.Node, e.Iteration, e.Attempt}, e.Hash)]
		added.seq = len(base.entries)
		base.entries = append(base.entries, &added)
	}
	for _, m := range c.mcp {
		added := *m
		added.Repeat += recorded[mcpKey(m.Node, m.Tool)]
		base.mcp = append(base.mcp, &added)
	}
	listings := c.mcpTools
	c.mu.Unlock()
	for _, l := range listings {
		base.RecordMCPTools(l.Server, l.Tools)
	}
	return base.WriteFile(path)
}

func servedKey(k Key, hash string) string {
	return k.Node + "\x00" + strconv.Itoa(k.Iteration) + "\x00" + strconv.Itoa(k.Attempt) + "\x00" + hash
}

// record adds an exchange: a reply or the error that ended the turn.
func (c *Cassette) record(k Key, hash string, cl *call, rep *reply, costUSD float64, err *Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sk := servedKey(k, hash)
	e := &entry{
		Node: k.Node, Iteration: k.Iteration, Attempt: k.Attempt,
		Hash: hash, Repeat: c.served[sk], Request: cl.abbreviated(),
		Response: rep, CostUSD: costUSD, seq: len(c.entries),
	}
	if err != nil {
		e.Error = &recordedError{Class: err.class, Status: err.Status, Message: err.msg}
	}
	c.served[sk]++
	c.entries = append(c.entries, e)
}

// replay answers a request from the cassette, or explains the miss. An
// entry with a hash answers that request; entries without one (written by
// hand) answer the calls under their key in file order, whatever was sent.
func (c *Cassette) replay(k Key, hash string, cl *call) (*reply, *Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sk, anyKey := servedKey(k, hash), servedKey(k, "")
	n, handWritten := c.served[sk], 0
	for _, e := range c.entries {
		if e.Node != k.Node || e.Iteration != k.Iteration || e.Attempt != k.Attempt {
			continue
		}
		switch {
		case e.Hash == hash && e.Repeat == n:
			c.served[sk]++
		case e.Hash == "" && handWritten == c.served[anyKey]:
			c.served[anyKey]++
		case e.Hash == "":
			handWritten++
			continue
		default:
			continue
		}
		if e.Error != nil {
			return nil, &Error{class: e.Error.Class, Status: e.Error.Status, Endpoint: "cassette", msg: e.Error.Message + " (replayed)"}
		}
		r := *e.Response
		return &r, nil
	}
	return nil, &Error{class: errclass.Critical, Endpoint: "cassette", msg: c.missMessage(k, hash, n, cl)}
}

// missMessage names the node and what differs from the closest entry.
func (c *Cassette) missMessage(k Key, hash string, n int, cl *call) string {
	where := fmt.Sprintf("replay: %s has no recorded answer for node %q (iteration %d, attempt %d)", c.name(), k.Node, k.Iteration, k.Attempt)
	var same []*entry
	nodes := map[string]bool{}
	for _, e := range c.entries {
		nodes[e.Node] = true
		if e.Node == k.Node {
			same = append(same, e)
		}
	}
	if len(same) == 0 {
		names := make([]string, 0, len(nodes))
		for name := range nodes {
			names = append(names, strconv.Quote(name))
		}
		sort.Strings(names)
		if len(names) > 8 {
			names = append(names[:8], "…")
		}
		if len(names) == 0 {
			return where + ": the cassette is empty"
		}
		return where + ": it has no entries for this node, only for " + strings.Join(names, ", ")
	}
	repeats, handWritten := 0, 0
	for _, e := range same {
		if e.Iteration == k.Iteration && e.Attempt == k.Attempt {
			switch e.Hash {
			case hash:
				repeats++
			case "":
				handWritten++
			}
		}
	}
	if repeats > 0 {
		return fmt.Sprintf("%s: this request was recorded %d time(s) here and this is call %d", where, repeats, n+1)
	}
	if handWritten > 0 {
		return fmt.Sprintf("%s: it has %d entries without a hash here, each answering one call, and this is call %d; add an entry", where, handWritten, c.served[servedKey(k, "")]+1)
	}
	for _, e := range same {
		if e.Hash == hash {
			return fmt.Sprintf("%s: the same request was recorded at iteration %d, attempt %d", where, e.Iteration, e.Attempt)
		}
	}
	now := toJSONValue(cl.abbreviated())
	var best *entry
	bestScore, bestDiff := -1, ""
	for _, e := range same {
		diff, differs := "", 0
		if e.Hash != "" {
			diff, differs = firstDiff("", toJSONValue(e.Request), now)
		}
		score := differs
		if e.Iteration == k.Iteration {
			score -= 1000
		}
		if e.Attempt == k.Attempt {
			score -= 100
		}
		if best == nil || score < bestScore {
			best, bestScore, bestDiff = e, score, diff
		}
	}
	var parts []string
	if best.Iteration != k.Iteration {
		parts = append(parts, fmt.Sprintf("iteration: recorded %d, now %d", best.Iteration, k.Iteration))
	}
	if best.Attempt != k.Attempt {
		parts = append(parts, fmt.Sprintf("attempt: recorded %d, now %d", best.Attempt, k.Attempt))
	}
	switch {
	case best.Hash == "":
	case bestDiff != "":
		parts = append(parts, bestDiff)
	default:
		parts = append(parts, "the request hash, though nothing the cassette shows differs (an image or other abbreviated content differs, or its hash was edited); remove hash: to match on node, iteration and attempt alone")
	}
	return fmt.Sprintf("%s: the closest entry (iteration %d, attempt %d) differs in %s", where, best.Iteration, best.Attempt, strings.Join(parts, "; "))
}

func (c *Cassette) name() string {
	if c.path == "" {
		return "the cassette"
	}
	return "cassette " + c.path
}

// hash is the request hash: sha256 of the call's canonical JSON (maps
// with sorted keys, images in full), first 16 hex digits.
func (cl *call) hash() string {
	b, err := json.Marshal(cl)
	if err != nil {
		panic(fmt.Sprintf("llm: request hash: %v", err)) // a call is plain data
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// abbreviated is the call as a cassette shows it: data-URL images become
// their MIME type, size and hash.
func (cl *call) abbreviated() *call {
	out := *cl
	out.Messages = make([]Message, len(cl.Messages))
	for i, m := range cl.Messages {
		out.Messages[i] = m
		if len(m.Images) == 0 {
			continue
		}
		out.Messages[i].Images = make([]string, len(m.Images))
		for j, img := range m.Images {
			out.Messages[i].Images[j] = abbreviateImage(img)
		}
	}
	return &out
}

func abbreviateImage(u string) string {
	if !strings.HasPrefix(u, "data:") {
		return u
	}
	head, _, _ := strings.Cut(u, ",")
	sum := sha256.Sum256([]byte(u))
	return fmt.Sprintf("%s,… (%d bytes, sha256 %s)", head, len(u), hex.EncodeToString(sum[:8]))
}

func toJSONValue(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// firstDiff returns the path of the first difference between two JSON
// values with both sides shown, and how many leaves differ.
func firstDiff(path string, a, b any) (string, int) {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		// Messages before tools and schema: the likeliest cause first.
		sort.Slice(names, func(i, j int) bool {
			return fieldRank(names[i]) < fieldRank(names[j]) || fieldRank(names[i]) == fieldRank(names[j]) && names[i] < names[j]
		})
		first, total := "", 0
		for _, k := range names {
			p := k
			if path != "" {
				p = path + "." + k
			}
			d, n := firstDiff(p, x[k], y[k])
			if n > 0 && first == "" {
				first = d
			}
			total += n
		}
		return first, total
	case []any:
		y, ok := b.([]any)
		if !ok {
			break
		}
		first, total := "", 0
		for i := 0; i < max(len(x), len(y)); i++ {
			p := fmt.Sprintf("%s[%d]", path, i)
			var ai, bi any
			if i < len(x) {
				ai = x[i]
			}
			if i < len(y) {
				bi = y[i]
			}
			d, n := firstDiff(p, ai, bi)
			if n > 0 && first == "" {
				first = d
			}
			total += n
		}
		if len(x) != len(y) && first != "" {
			first = fmt.Sprintf("%s (recorded %d items, now %d)", first, len(x), len(y))
		}
		return first, total
	}
	if jsonEqual(a, b) {
		return "", 0
	}
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			x, y = aroundDiff(x, y)
			return fmt.Sprintf("%s: recorded %s, now %s", path, x, y), 1
		}
	}
	return fmt.Sprintf("%s: recorded %s, now %s", path, show(a), show(b)), 1
}

// aroundDiff quotes two strings from a little before where they part,
// each followed by the character where it parts: \r\n against \n, a
// trailing space or a look-alike letter (Cyrillic а for Latin a) reads
// the same in any quoting, so the code point says what differs.
func aroundDiff(x, y string) (string, string) {
	// Redacted before the cut below, which may fall inside a secret.
	rx, ry := []rune(redact.String(x)), []rune(redact.String(y))
	i := 0
	for i < len(rx) && i < len(ry) && rx[i] == ry[i] {
		i++
	}
	from := max(0, i-20)
	cut := func(r []rune) string {
		s := r[from:]
		tail := ""
		if len(s) > 60 {
			s, tail = s[:60], "…"
		}
		head := ""
		if from > 0 {
			head = "…"
		}
		// strconv.Quote escapes line breaks, tabs and characters nothing
		// shows (a zero-width space, a no-break space).
		q := head + strconv.Quote(string(s)) + tail
		if unseen(rx, i) || unseen(ry, i) {
			q += " (" + partsAt(r, i) + ")"
		}
		return q
	}
	return cut(rx), cut(ry)
}

// unseen says whether the character of r at i may look like another, or
// like nothing: a space, a line break, anything beyond ASCII.
func unseen(r []rune, i int) bool {
	return i < len(r) && (r[i] > unicode.MaxASCII || unicode.IsSpace(r[i]) || !unicode.IsPrint(r[i]))
}

// partsAt names the character of r at i, where it parts from the other.
func partsAt(r []rune, i int) string {
	if i >= len(r) {
		return fmt.Sprintf("ends after %d characters", len(r))
	}
	return fmt.Sprintf("character %d is U+%04X %s", i+1, r[i], strconv.QuoteRune(r[i]))
}

func fieldRank(k string) int {
	switch k {
	case "model", "api":
		return 0
	case "messages":
		return 1
	}
	return 2
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func show(v any) string {
	if v == nil {
		return "nothing"
	}
	b, _ := json.Marshal(v)
	return redact.Line(string(b), 120)
}
