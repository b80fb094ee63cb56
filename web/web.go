// Package web is flowrun's browser UI (flowrun serve): the runs in a
// store, live; a run's graph, timeline and node inspector; starting,
// steering and forking runs of the pipelines under one directory; batches.
//
// Guarantees:
//   - Every page and live update is rendered with html/template: model
//     replies, tool results and pipeline text are escaped, never markup.
//     Images are shown only from data URLs of raster types.
//   - What a page shows comes from the store, which holds runs redacted:
//     no API key or env: secret reaches the browser.
//   - Every state-changing request is a POST carrying the server's CSRF
//     token, from a page of the same origin (Origin or Referer checked).
//   - With a Token, every request must carry it (once in the URL, then in
//     a cookie). Without one, only loopback host names are answered, so
//     that a DNS-rebinding page cannot reach the server.
//   - Only pipelines inside Dir are started, resumed or forked.
//   - Runs started here run in this process through the engine, with
//     their inputs taken as a remote caller's, and are
//     stopped, and waited for, by Close. At most MaxRuns of them run at
//     once; the others wait in a queue, in order, listed on the runs page.
//   - A live view of a run costs the rows it sends: the run's events are
//     read and rendered once for all the views of that run.
package web

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/internal/httpauth"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Options configure a Server.
type Options struct {
	Store *store.Store
	Dir   string // pipelines under it can be started
	// Engine starts, resumes, forks and stops the runs started here.
	Engine *engine.Engine
	// Token, when set, must come with every request.
	Token string
	// Poll is how often the store is checked for changes made by other
	// processes (default 100ms).
	Poll time.Duration
	// MaxRuns caps the runs started here (started, resumed or forked)
	// that run at once; more wait in a queue, in order. Default
	// DefaultMaxRuns.
	MaxRuns int
}

// DefaultMaxRuns is how many runs started from the UI run at once when
// Options.MaxRuns is not set.
const DefaultMaxRuns = 8

// Server is the web UI.
type Server struct {
	st     *store.Store
	dir    string
	engine *engine.Engine
	token  string
	csrf   string
	pages  map[string]*template.Template
	flash  flashes
	mux    *http.ServeMux
	poll   time.Duration
	change signal

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	active   map[string]*activeRun
	feeds    map[string]*runFeed // by run id: the runs with live streams
	slots    chan struct{}       // one per run started here that runs
	queue    []*queuedRun        // launches waiting for a slot, oldest first
	failures []queuedRun         // the last queued launches that failed to start
}

// New makes a server and starts watching the store.
func New(o Options) (*Server, error) {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	s := &Server{st: o.Store, dir: dir, engine: o.Engine, token: o.Token, csrf: hex.EncodeToString(secret),
		poll: o.Poll, active: map[string]*activeRun{}, feeds: map[string]*runFeed{}}
	if s.poll <= 0 {
		s.poll = 100 * time.Millisecond
	}
	if o.MaxRuns <= 0 {
		o.MaxRuns = DefaultMaxRuns
	}
	s.slots = make(chan struct{}, o.MaxRuns)
	s.change.ch = make(chan struct{})
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.routes()
	s.wg.Add(1)
	go s.watch()
	return s, nil
}

// NewToken returns a random token for a server on a non-loopback address.
func NewToken() string { return httpauth.NewToken() }

// IsLoopback reports whether a listen address binds to loopback only.
func IsLoopback(addr string) bool { return httpauth.IsLoopback(addr) }

// Close stops the runs started here (they end stopped, resumable), ends
// live views and waits for all of it.
func (s *Server) Close() {
	s.mu.Lock()
	for _, a := range s.active {
		a.cancel(&runtime.StopError{Reason: "flowrun serve is shutting down"})
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// signal wakes everyone waiting on it at once.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (g *signal) wait() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ch
}

func (g *signal) fire() {
	g.mu.Lock()
	close(g.ch)
	g.ch = make(chan struct{})
	g.mu.Unlock()
}

// watch fires change whenever the store's mark moves: a run or event
// recorded by this process or any other.
func (s *Server) watch() {
	defer s.wg.Done()
	t := time.NewTicker(s.poll)
	defer t.Stop()
	last := ""
	for {
		select {
		case <-s.ctx.Done():
			s.change.fire()
			return
		case <-t.C:
		}
		m, err := s.st.Mark(s.ctx)
		if err == nil && m != last {
			last = m
			s.change.fire()
		}
	}
}

func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := filepath.Base(n)
		if base == "layout.html" || base == "parts.html" {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/parts.html", n)
		if err != nil {
			return nil, fmt.Errorf("web templates: %w", err)
		}
		pages[strings.TrimSuffix(base, ".html")] = t
	}
	return pages, nil
}

func (s *Server) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /{$}", s.runsPage)
	m.HandleFunc("GET /live/runs", s.runsLive)
	m.HandleFunc("GET /runs/{id}", s.runPage)
	m.HandleFunc("GET /runs/{id}/live", s.runLive)
	m.HandleFunc("GET /runs/{id}/inspector", s.inspectorPart)
	m.HandleFunc("GET /runs/{id}/test.yaml", s.testCase)
	m.HandleFunc("GET /start", s.startPage)
	m.HandleFunc("POST /start", s.startRun)
	m.HandleFunc("POST /runs/{id}/answer", s.onRun(s.answer))
	m.HandleFunc("POST /runs/{id}/stop", s.onRun(s.stop))
	m.HandleFunc("POST /runs/{id}/resume", s.onRun(s.resume))
	m.HandleFunc("POST /runs/{id}/auto", s.onRun(s.auto))
	m.HandleFunc("POST /runs/{id}/snapshot", s.onRun(s.snapshot))
	m.HandleFunc("POST /runs/{id}/rollback", s.onRun(s.rollback))
	m.HandleFunc("POST /runs/{id}/fork", s.fork)
	m.HandleFunc("GET /batches", s.batchesPage)
	m.HandleFunc("GET /batches/{id}", s.batchPage)
	m.HandleFunc("GET /live/batches", s.batchesLive)
	m.HandleFunc("GET /batches/{id}/live", s.batchLive)
	m.HandleFunc("POST /batches/{id}/rate", s.rate)
	m.HandleFunc("GET /batches/{id}/report", s.report)
	m.HandleFunc("GET /compare", s.comparePage)
	s.mux = m
}

// ServeHTTP checks the request's host, token and CSRF token, then serves it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
	if s.token == "" && !httpauth.LoopbackHost(r.Host) {
		http.Error(w, "this server was started without a token, so it answers only to localhost, 127.0.0.1 and [::1]", http.StatusMisdirectedRequest)
		return
	}
	if s.token != "" && !s.authorized(w, r) {
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if err := s.checkCSRF(r); err != nil {
			http.Error(w, "refused: "+err.Error(), http.StatusForbidden)
			return
		}
		normaliseLineBreaks(r)
	}
	s.mux.ServeHTTP(w, r)
}

const tokenCookie = "flowrun_token"

// authorized accepts the token from the cookie, or from ?token= once:
// then it sets the cookie and redirects to the URL without it, so that
// the token does not stay in the address bar or the history.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if c, err := r.Cookie(tokenCookie); err == nil && httpauth.Equal(c.Value, s.token) {
		return true
	}
	if t := r.URL.Query().Get("token"); httpauth.Equal(t, s.token) && r.Method == http.MethodGet {
		http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		q := r.URL.Query()
		q.Del("token")
		u := *r.URL
		u.RawQuery = q.Encode()
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return false
	}
	http.Error(w, "unauthorized: open the URL this server printed when it started (it carries the token)", http.StatusUnauthorized)
	return false
}

func (s *Server) checkCSRF(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		origin = r.Header.Get("Referer")
	}
	if origin == "" {
		return errors.New("no Origin or Referer header: state changes come from this server's own pages")
	}
	if !sameOrigin(origin, r) {
		return fmt.Errorf("request from another origin (%s)", origin)
	}
	got := r.Header.Get("X-Flowrun-CSRF")
	if got == "" {
		got = r.FormValue("csrf")
	}
	if !httpauth.Equal(got, s.csrf) {
		return errors.New("missing or wrong CSRF token: reload the page and try again")
	}
	return nil
}

// sameOrigin says whether origin (an Origin or Referer header) names the
// origin r was sent to: the same scheme, host and port, a missing port
// being the scheme's default. The host alone is not enough: a page served
// on https://127.0.0.1:PORT is another origin than this server's http one.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	self := &url.URL{Scheme: scheme, Host: r.Host}
	return strings.EqualFold(u.Scheme, scheme) && strings.EqualFold(u.Hostname(), self.Hostname()) && portOf(u) == portOf(self)
}

// portOf is u's port, or its scheme's default.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// render writes a page; data must be a struct embedding page.
func (s *Server) render(w http.ResponseWriter, status int, name string, data any) {
	t := s.pages[name]
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", data); err != nil {
		http.Error(w, "rendering "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// shownDigest is the digest of part of page rendered with data, for the
// page's live URL (?shown=): its live stream sends the part only once it
// differs from what the page showed.
func (s *Server) shownDigest(page, part string, data any) string {
	var b bytes.Buffer
	if err := s.pages[page].ExecuteTemplate(&b, part, data); err != nil {
		return "" // the stream then sends the part as it renders it
	}
	return digest(b.Bytes())
}

// digest names a rendering by its content.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// renderPart writes one template part of a page alone, for a page's
// script to put in place.
func (s *Server) renderPart(w http.ResponseWriter, name, part string, data any) {
	var b strings.Builder
	if err := s.pages[name].ExecuteTemplate(&b, part, data); err != nil {
		http.Error(w, "rendering "+part+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

// page is what every page's layout reads.
type page struct {
	Title string
	CSRF  string
	Nav   string
	Error string
}

func (s *Server) page(r *http.Request, title, nav string) page {
	return page{Title: title, CSRF: s.csrf, Nav: nav, Error: s.flash.take(r.URL.Query().Get("flash"))}
}

// fail shows an error on a page of its own.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	p := s.page(r, "Error", "")
	p.Error = s.say(err)
	s.render(w, status, "error", struct{ page }{p})
}

// back redirects to to, with an error to show there when err is set.
// The error travels as the id of a message the server keeps, so that a
// link cannot make a page say what its author wants.
func (s *Server) back(w http.ResponseWriter, r *http.Request, to string, err error) {
	if err != nil {
		sep := "?"
		if strings.Contains(to, "?") {
			sep = "&"
		}
		to += sep + "flash=" + s.flash.put(s.say(err))
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// flashes are error messages waiting to be shown once.
type flashes struct {
	mu   sync.Mutex
	msgs map[string]string
}

// maxFlashes bounds the messages kept for pages never opened.
const maxFlashes = 256

func (f *flashes) put(msg string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.msgs == nil {
		f.msgs = map[string]string{}
	}
	if len(f.msgs) >= maxFlashes {
		for k := range f.msgs {
			delete(f.msgs, k)
			break
		}
	}
	f.msgs[id] = msg
	return id
}

func (f *flashes) take(id string) string {
	if id == "" {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	msg := f.msgs[id]
	delete(f.msgs, id)
	return msg
}

// sse starts an event stream.
func sse(w http.ResponseWriter) (http.Flusher, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return nil, false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return f, true
}

// send writes one server-sent event; data is one line of JSON.
func send(w http.ResponseWriter, f http.Flusher, event string, data []byte) error {
	if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
		return err
	}
	f.Flush()
	return nil
}
