package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/flowrun/flowrun/dsl"
)

// ListingCache lists servers' tools for flowrun validate and keeps each
// listing in Dir, keyed by the server's command or URL (Key), so that
// validating again starts no server. Refresh lists every server anew, once
// per ListingCache however many files declare it: one validate command
// uses one ListingCache. It is not safe for concurrent use.
type ListingCache struct {
	Dir     string
	Refresh bool

	listed map[string]listing // by Key, what this cache has read or listed
}

// listing is one server's tools, or why they could not be listed: a
// server that fails is not tried again for the next file.
type listing struct {
	tools []dsl.MCPTool
	err   error
}

// DefaultListingDir is where listings are kept: the user's cache directory.
func DefaultListingDir() string {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return filepath.Join(cache, "flowrun", "mcp")
}

// List is a dsl.MCPLister.
func (c *ListingCache) List(s *dsl.MCPServer) ([]dsl.MCPTool, error) {
	key := Key(s)
	l, ok := c.listed[key]
	if !ok {
		l.tools, l.err = c.list(s, filepath.Join(c.Dir, key+".json"))
		if c.listed == nil {
			c.listed = map[string]listing{}
		}
		c.listed[key] = l
	}
	return l.tools, l.err
}

// list reads the listing kept at path, or, when there is none or Refresh
// is set, lists the server and keeps its listing there.
func (c *ListingCache) list(s *dsl.MCPServer, path string) ([]dsl.MCPTool, error) {
	if !c.Refresh {
		if b, err := os.ReadFile(path); err == nil {
			var tools []dsl.MCPTool
			if json.Unmarshal(b, &tools) == nil {
				return tools, nil
			}
		}
	}
	tools, err := List(context.Background(), s)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(tools, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("caching the tool listing: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return nil, fmt.Errorf("caching the tool listing: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("caching the tool listing: %w", err)
	}
	return tools, nil
}

// List starts s, lists its tools and stops it.
func List(ctx context.Context, s *dsl.MCPServer) ([]dsl.MCPTool, error) {
	ss := &Sessions{}
	defer ss.Close()
	return ss.Tools(ctx, s)
}
