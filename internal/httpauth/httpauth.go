// Package httpauth decides who may use flowrun's HTTP servers (the web UI
// and MCP over HTTP).
//
// Guarantees: tokens are compared in constant time, and an empty token
// never matches, so a server that holds none cannot be opened by sending
// none; a new token carries 192 random bits; an address is loopback only
// when it is localhost or a loopback IP (127.0.0.0/8, ::1), so 0.0.0.0,
// :PORT and every other host are not.
package httpauth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
)

// NewToken returns a new random token, in hex.
func NewToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Equal reports whether the token a request presented is want, taking
// the same time wherever they differ. An empty want matches nothing.
func Equal(presented, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(presented), []byte(want)) == 1
}

// Bearer is the token r presents in an Authorization: Bearer header, ""
// when it presents none.
func Bearer(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return token
}

// RequireBearer serves next only the requests that present token as an
// Authorization: Bearer header; the others get 401 Unauthorized with
// refusal as the body.
func RequireBearer(token, refusal string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Equal(Bearer(r), token) {
			http.Error(w, refusal, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// LoopbackHost reports whether a host, with or without a port (a Host
// header), names this machine's loopback interface.
func LoopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopback reports whether a listen address (host:port) binds to
// loopback only.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return LoopbackHost(host)
}
