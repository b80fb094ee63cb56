package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// lockedBuffer is a bytes.Buffer written by several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var serveURL = regexp.MustCompile(`flowrun serve: (http://\S+)`)

// serve runs flowrun serve in-process on a free port over dir and returns
// the URL it printed; the server stops when the test ends.
func serve(t *testing.T, dir string, args ...string) (base string, log *lockedBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	log = &lockedBuffer{}
	done := make(chan int, 1)
	storePath := filepath.Join(t.TempDir(), "runs.db")
	go func() {
		done <- cli(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--store", storePath, dir}, args...), strings.NewReader(""), pw, log)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("flowrun serve exited %d:\n%s", code, log)
		}
	})
	m := serveURL.FindStringSubmatch(line)
	if err != nil || m == nil {
		cancel()
		t.Fatalf("flowrun serve printed %q (%v):\n%s", line, err, log)
	}
	return m[1], log
}

// TestServeNeedsTokenOffLoopback: on a non-loopback address flowrun serve
// makes a token and prints it in its URL; the URL works, the bare address
// does not.
func TestServeNeedsTokenOffLoopback(t *testing.T) {
	base, _ := serve(t, t.TempDir(), "--addr", "0.0.0.0:0")
	u, _ := url.Parse(base)
	token := u.Query().Get("token")
	if len(token) < 32 {
		t.Fatalf("no token in %s", base)
	}
	bare := "http://" + strings.Replace(u.Host, "0.0.0.0", "127.0.0.1", 1) + "/"
	resp, err := http.Get(bare)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", resp.StatusCode)
	}
	jar, _ := cookiejar.New(nil)
	resp, err = (&http.Client{Jar: jar}).Get(bare + "?token=" + token)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("with the token: %d", resp.StatusCode)
	}
}

const secretPipeline = `
version: 1
name: secretive
inputs:
  topic: {type: string, default: "keys"}
env: [SERVICE_TOKEN]
models:
  default: {model: gpt-4.1-mini}
nodes:
  - id: reply
    llm:
      prompt: "Tell me about ${{ inputs.topic }}"
outputs: {text: nodes.reply.text}
`

// TestServeSecretNeverReachesBrowser: the API key and an env: secret,
// even when a model echoes them, appear in no page and no live stream.
func TestServeSecretNeverReachesBrowser(t *testing.T) {
	const key = "sk-test-9f8e7d6c5b4a39281706f5e4d3c2b1a0"
	const token = "svc-token-1234567890abcdef1234"
	fake := llmtest.New(t)
	t.Setenv("OPENAI_BASE_URL", fake.URL)
	t.Setenv("OPENAI_API_KEY", key)
	t.Setenv("SERVICE_TOKEN", token)
	fake.Push(llmtest.Text("the key is " + key + " and the token " + token))
	dir := t.TempDir()
	writeFile(t, dir, "secretive.yaml", secretPipeline)
	base, _ := serve(t, dir)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) string {
		resp, err := client.Get(base + strings.TrimPrefix(path, "/"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	form := get("/start?pipeline=secretive.yaml")
	csrf := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(form)
	if csrf == nil {
		t.Fatalf("no CSRF token in the start form:\n%s", form)
	}
	vals := url.Values{"csrf": {csrf[1]}, "pipeline": {"secretive.yaml"}, "in.topic": {"the key " + key}, "model.default": {"gpt-override"}}
	req, _ := http.NewRequest(http.MethodPost, base+"start", strings.NewReader(vals.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", strings.TrimSuffix(base, "/"))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	run, ok := strings.CutPrefix(resp.Header.Get("Location"), "/runs/")
	if !ok {
		t.Fatalf("start: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	var pages strings.Builder
	for deadline := time.Now().Add(20 * time.Second); ; {
		page := get("/runs/" + run)
		if strings.Contains(page, `data-status="completed"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not complete:\n%s", run, page)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := fake.Last().Header.Get("Authorization"); got != "Bearer "+key {
		t.Fatalf("the model was not called with the key (%q)", got)
	}
	if got := fake.Last().Model; got != "gpt-override" {
		t.Fatalf("the form's model override did not reach the call: %s", got)
	}
	for _, p := range []string{"/", "/runs/" + run, "/runs/" + run + "?path=reply", "/start?pipeline=secretive.yaml", "/batches"} {
		pages.WriteString(get(p))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, p := range []string{"runs/" + run + "/live?after=0", "live/runs"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+p, nil)
		if resp, err := client.Do(req); err == nil {
			b := make([]byte, 1<<16)
			n, _ := io.ReadAtLeast(resp.Body, b, 200)
			pages.Write(b[:n])
			resp.Body.Close()
		}
	}
	all := pages.String()
	if !strings.Contains(all, "[REDACTED]") && !strings.Contains(all, "the key is") {
		t.Fatalf("the reply is not on the pages at all:\n%s", all)
	}
	for _, secret := range []string{key, key[:16], token, token[:12]} {
		if strings.Contains(all, secret) {
			t.Fatalf("%q reached the browser", secret)
		}
	}
}

func TestServeRefusesMissingDir(t *testing.T) {
	code, _, stderr := flowrun(t, "serve", "/no/such/dir")
	if code != exitInvalid || !strings.Contains(stderr, "not a directory of pipelines") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

// TestServeFirstLineNamesTheStore: the first line says which store the UI
// shows and how to show another, so that runs recorded elsewhere are not
// taken for lost.
func TestServeFirstLineNamesTheStore(t *testing.T) {
	db := filepath.Join(t.TempDir(), "other.db")
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- cli(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--store", db, t.TempDir()}, strings.NewReader(""), pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	cancel()
	if code := <-done; code != exitOK || err != nil {
		t.Fatalf("flowrun serve exited %d (%v)", code, err)
	}
	if !serveURL.MatchString(line) || !strings.Contains(line, "shows the runs in "+db) || !strings.Contains(line, "--store PATH") {
		t.Fatalf("the first line does not say which store is shown and how to show another: %q", line)
	}
}
