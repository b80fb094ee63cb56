package nodes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/redact"
)

// TestHardening13HTTPGetBlocksPrivate: with an empty allow_hosts, http_get
// refuses addresses on this machine and on local networks, checking the
// address it would dial, not the name; a host listed in allow_hosts is
// reached. Only a loopback server is ever dialled: the other addresses
// come from a fake resolver and reach a fake dial that records them.
func TestHardening13HTTPGetBlocksPrivate(t *testing.T) {
	var hits atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "local secret")
	}))
	defer site.Close()
	host, _ := url.Parse(site.URL)

	cfg := &dsl.HTTPGet{AllowHosts: []string{}, Timeout: 5 * time.Second, MaxBytes: 1 << 20}
	_, err := httpGet(context.Background(), cfg, site.URL+"/x")
	want := fmt.Sprintf("http_get %s/x: 127.0.0.1 (loopback), which http_get reaches only for a host listed in allow_hosts", site.URL)
	if err == nil || err.Error() != want || hits.Load() != 0 {
		t.Fatalf("any host, a loopback server: err %v, %d hits\nwant %s", err, hits.Load(), want)
	}
	cfg.AllowHosts = []string{host.Hostname()}
	if out, err := httpGet(context.Background(), cfg, site.URL+"/x"); err != nil || out.(map[string]any)["body"] != "local secret" {
		t.Fatalf("the loopback host listed in allow_hosts: %v, %v", out, err)
	}

	addrs := map[string][]string{
		"metadata.test": {"169.254.169.254"},
		"intranet.test": {"10.0.0.1"},
		"home.test":     {"192.168.1.1", "172.16.0.1", "fd00::1"},
		"cgnat.test":    {"100.64.0.7"},
		"mapped.test":   {"::ffff:127.0.0.1"},
		"zero.test":     {"0.1.2.3"},
		"group.test":    {"239.255.255.250"},
		"mixed.test":    {"10.0.0.1", "93.184.216.34"},
		"public.test":   {"93.184.216.34"},
	}
	var dialled []string
	g := &guardedDialer{
		allow: []string{"intranet.test"},
		lookup: func(_ context.Context, _, host string) ([]netip.Addr, error) {
			var out []netip.Addr
			for _, a := range addrs[host] {
				out = append(out, netip.MustParseAddr(a))
			}
			return out, nil
		},
		dial: func(_ context.Context, _, addr string) (net.Conn, error) {
			dialled = append(dialled, addr)
			return nil, errors.New("fake dial")
		},
	}
	cases := []struct{ addr, refused, dials string }{
		{"metadata.test:80", `host "metadata.test" resolves to 169.254.169.254 (link-local)`, ""},
		{"169.254.169.254:80", "169.254.169.254 (link-local)", ""},
		{"home.test:80", "(private)", ""},
		{"cgnat.test:80", "(shared, CGNAT)", ""},
		{"mapped.test:80", "resolves to 127.0.0.1 (loopback)", ""},
		{"zero.test:80", "(unspecified)", ""},
		{"[::]:80", "(unspecified)", ""},
		{"[::1]:443", "(loopback)", ""},
		{"group.test:80", "(multicast or broadcast)", ""},
		{"255.255.255.255:80", "(multicast or broadcast)", ""},
		{"intranet.test:80", "", "intranet.test:80"}, // listed: dialled by name
		{"mixed.test:443", "", "93.184.216.34:443"},  // only the public address
		{"public.test:80", "", "93.184.216.34:80"},
	}
	for _, c := range cases {
		dialled = nil
		_, err := g.DialContext(context.Background(), "tcp", c.addr)
		var re *restrictedError
		switch {
		case c.refused != "" && (!errors.As(err, &re) || !strings.Contains(err.Error(), c.refused) || len(dialled) > 0):
			t.Errorf("%s: err %v, dialled %v; want refused with %q before dialling", c.addr, err, dialled, c.refused)
		case c.refused == "" && (strings.Join(dialled, " ") != c.dials || errors.As(err, &re)):
			t.Errorf("%s: dialled %v (err %v), want %s", c.addr, dialled, err, c.dials)
		}
	}
}

// TestHTTPGetRedactsAcrossTheCap: a secret the server echoes across
// max_bytes is redacted whole before the body is cut, so no prefix of it
// is left in the tool's result.
func TestHTTPGetRedactsAcrossTheCap(t *testing.T) {
	const secret = "sk-cap-0123456789abcdefghij"
	redact.Add(secret)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, strings.Repeat("x", 90)+secret+strings.Repeat("y", 50))
	}))
	defer site.Close()
	host, _ := url.Parse(site.URL)
	cfg := &dsl.HTTPGet{AllowHosts: []string{host.Hostname()}, Timeout: 5 * time.Second, MaxBytes: 100}
	out, err := httpGet(context.Background(), cfg, site.URL+"/x")
	if err != nil {
		t.Fatal(err)
	}
	body := out.(map[string]any)["body"].(string)
	if strings.Contains(body, "sk-cap") || len(body) > 100 || out.(map[string]any)["truncated"] != true {
		t.Fatalf("body %q", body)
	}
}
