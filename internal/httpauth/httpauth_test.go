package httpauth

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
)

func TestRequireBearer(t *testing.T) {
	const token = "0123456789abcdef"
	h := RequireBearer(token, "send the token", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	for _, c := range []struct {
		name, header string
		want         int
	}{
		{"the token", "Bearer " + token, http.StatusNoContent},
		{"the scheme in lower case", "bearer " + token, http.StatusNoContent},
		{"no header", "", http.StatusUnauthorized},
		{"an empty token", "Bearer ", http.StatusUnauthorized},
		{"a wrong token", "Bearer fedcba9876543210", http.StatusUnauthorized},
		{"the last byte differs", "Bearer 0123456789abcdee", http.StatusUnauthorized},
		{"a prefix of it", "Bearer 0123456789abcde", http.StatusUnauthorized},
		{"it with more after", "Bearer " + token + "0", http.StatusUnauthorized},
		{"another scheme", "Basic " + token, http.StatusUnauthorized},
		{"the bare token", token, http.StatusUnauthorized},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("%s (%q): %d, want %d", c.name, c.header, w.Code, c.want)
		}
		if w.Code == http.StatusUnauthorized && w.Body.String() != "send the token\n" {
			t.Errorf("%s: the refusal reads %q", c.name, w.Body.String())
		}
	}
}

func TestEqual(t *testing.T) {
	for _, c := range []struct {
		presented, want string
		equal           bool
	}{
		{"abc", "abc", true},
		{"abd", "abc", false},
		{"", "abc", false},
		{"", "", false}, // a server with no token is not opened by sending none
		{"abc", "", false},
	} {
		if got := Equal(c.presented, c.want); got != c.equal {
			t.Errorf("Equal(%q, %q) = %v", c.presented, c.want, got)
		}
	}
}

func TestLoopback(t *testing.T) {
	for _, c := range []struct {
		addr             string
		listen, hostname bool // IsLoopback, LoopbackHost
	}{
		{"127.0.0.1:8377", true, true},
		{"127.8.9.10:1", true, true},
		{"[::1]:1", true, true},
		{"localhost:80", true, true},
		{"localhost", false, true},
		{"127.0.0.1", false, true},
		{"[::1]", false, true},
		{"::1", false, true},
		{"0.0.0.0:8377", false, false},
		{"[::]:8377", false, false},
		{":8377", false, false},
		{"192.168.1.2:80", false, false},
		{"example.com:80", false, false},
		{"localhost.example.com:80", false, false},
		{"", false, false},
	} {
		if got := IsLoopback(c.addr); got != c.listen {
			t.Errorf("IsLoopback(%q) = %v", c.addr, got)
		}
		if got := LoopbackHost(c.addr); got != c.hostname {
			t.Errorf("LoopbackHost(%q) = %v", c.addr, got)
		}
	}
}

func TestNewToken(t *testing.T) {
	a, b := NewToken(), NewToken()
	if !regexp.MustCompile(`^[0-9a-f]{48}$`).MatchString(a) || a == b {
		t.Fatalf("tokens %q and %q", a, b)
	}
}
