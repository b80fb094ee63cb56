package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/runtime"
)

func testSigner(t *testing.T, name string) (*Signer, Keys) {
	t.Helper()
	key, pub, err := GenerateKey(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := LoadKeys([]string{pub})
	if err != nil {
		t.Fatal(err)
	}
	return s, keys
}

// TestKeys: a private key readable by others is refused; a signed bucket
// value verifies under its own key only, and not once changed.
func TestKeys(t *testing.T) {
	dir := t.TempDir()
	key, _, err := GenerateKey(dir, "coordinator")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := GenerateKey(dir, "coordinator"); err == nil {
		t.Error("GenerateKey overwrote an existing key")
	}
	must(t, os.Chmod(key, 0o644))
	if _, err := LoadSigner(key); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Errorf("a private key of mode 0644: %v", err)
	}

	s, keys := testSigner(t, "w")
	_, otherKeys := testSigner(t, "other")
	tr := trust{keys: keys}
	value, err := seal(s, resultsBucket, "b.1.x", []byte(`{"status":"completed"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, id, err := tr.open(resultsBucket, "b.1.x", value); err != nil || id != s.id {
		t.Errorf("a signed value: %v (signer %s)", err, id)
	}
	if _, _, err := tr.open(resultsBucket, "b.2.x", value); !errors.Is(err, errForged) {
		t.Errorf("a signed value moved to another key: %v", err)
	}
	if _, _, err := (trust{keys: otherKeys}).open(resultsBucket, "b.1.x", value); !errors.Is(err, errUntrusted) {
		t.Errorf("a value signed by an untrusted key: %v", err)
	}
	changed := strings.Replace(string(value), "completed", "failed\"", 1)
	if _, _, err := tr.open(resultsBucket, "b.1.x", []byte(changed)); err == nil {
		t.Error("a changed value verified")
	}
	unsigned, _ := seal(nil, resultsBucket, "b.1.x", []byte(`{}`))
	if _, _, err := tr.open(resultsBucket, "b.1.x", unsigned); !errors.Is(err, errUnsigned) {
		t.Errorf("an unsigned value: %v", err)
	}
	if _, _, err := (trust{insecure: true}).open(resultsBucket, "b.1.x", unsigned); err != nil {
		t.Errorf("an unsigned value, insecure: %v", err)
	}
}

// TestForgedRunStateIgnored: checkpoints and events that a stranger
// publishes on a run's subjects (unsigned, or a signed one copied) are
// left out when a worker restores the run and when the coordinator reads
// its events; the worker's own are read back.
func TestForgedRunStateIgnored(t *testing.T) {
	ctx := context.Background()
	url := embeddedNATS(t)
	s, _ := testSigner(t, "worker")
	var lines []string
	c := testConn(t, Options{URL: url, Signer: s})
	c.refused = &refusals{log: func(l string) { lines = append(lines, l) }}
	const run = "r1"
	must(t, c.log.Save(ctx, run, &runtime.Checkpoint{Seq: 1, Path: "a"}))
	must(t, c.log.Event(ctx, run, runtime.Event{Type: runtime.EventNodeFinished, Run: run, Path: "a"}))
	must(t, c.log.Flush(ctx, run))

	stranger, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	forgedCP, _ := json.Marshal(runtime.Checkpoint{Seq: 2, Path: "b"})
	forgedEv, _ := json.Marshal(runtime.Event{Type: runtime.EventModelTurn, Run: run, CostUSD: 999})
	must(t, stranger.Publish(cpSubject+run, forgedCP))
	must(t, stranger.Publish(evSubject+run, forgedEv))
	// A worker's signed event, copied with its headers under a new id.
	copied := signMsg(s, evSubject+run, "copy", forgedEv)
	copied.Header.Set(sigHeader, signMsg(s, evSubject+run, "orig", forgedEv).Header.Get(sigHeader))
	must(t, stranger.PublishMsg(copied))
	must(t, stranger.Flush())

	got, err := c.log.Checkpoints(ctx, run, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Path != "a" {
		t.Errorf("restored %d checkpoints (%+v), want the worker's one", len(got), got)
	}
	evs, err := c.log.Events(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].CostUSD != 0 {
		t.Errorf("read back %d events (%+v), want the worker's one", len(evs), evs)
	}
	if len(lines) != 3 {
		t.Errorf("reported %d refusals, want 3: %q", len(lines), lines)
	}
}

// TestInputFilesOnTheHost: a job's path input naming a file on the
// worker's host is refused by the runtime's rule for remote inputs, in
// the same words whether that file exists or not (a caller learns nothing
// about the host's files); a data: URL, or a file the pipeline's directory
// holds, is not refused.
func TestInputFilesOnTheHost(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "p.yaml"), []byte("version: 1\nname: p\ninputs:\n  image: {type: string, format: path}\nnodes:\n  - id: s\n    set: {}\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "sent.png"), []byte("x"), 0o644))
	p, ds := dsl.Load(filepath.Join(dir, "p.yaml"))
	if p == nil {
		t.Fatal(ds)
	}
	hostDir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(hostDir, "photo.png"), []byte("x"), 0o600))
	refusal := func(name string) string {
		path := filepath.Join(hostDir, name)
		_, err := runtime.PrepareInputsFrom(p, map[string]any{"image": path}, true)
		if err == nil || !strings.Contains(err.Error(), `"image"`) {
			t.Fatalf("an input naming the host file %s: %v", path, err)
		}
		return strings.ReplaceAll(err.Error(), name, "NAME")
	}
	if there, missing := refusal("photo.png"), refusal("absent.png"); there != missing {
		t.Errorf("the refusals tell an existing host file from a missing one:\n%s\n%s", there, missing)
	}
	for _, ok := range []string{"data:image/png;base64,AAAA", "https://example.com/a.png", "sent.png"} {
		if _, err := runtime.PrepareInputsFrom(p, map[string]any{"image": ok}, true); err != nil {
			t.Errorf("input %q: %v", ok, err)
		}
	}
}

// TestForgedStopIgnored: a worker stops a batch session whose stop its
// trusted coordinator signed, and ignores (and reports) a stop a stranger
// wrote, an expired one, and one moved to another session's key. A stop
// deleted from the bucket still holds, and a stop holds for its session
// only: a later session of the batch (its resume) runs.
func TestForgedStopIgnored(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := embeddedNATS(t)
	coord, keys := testSigner(t, "coordinator")
	var mu sync.Mutex
	var lines []string
	w := &Worker{Options: Options{URL: url, Coordinators: keys}}
	w.c = testConn(t, w.Options)
	w.c.refused = &refusals{log: func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() }}
	w.stopped, w.running = map[string]string{}, map[*runningItem]struct{}{}
	stops, err := followBucket(ctx, w.c.js, stopsBucket, ">")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); w.watchStops(stops) }()

	put := func(s *Signer, key string, st stop) {
		t.Helper()
		body, _ := json.Marshal(st)
		sealed, err := seal(s, stopsBucket, key, body)
		must(t, err)
		_, err = w.c.stops.Put(ctx, key, sealed)
		must(t, err)
	}
	old := newTicket("s0", time.Now().Add(-jobTTL-time.Hour))
	put(nil, "b1.s1", stop{Ticket: newTicket("s1", time.Now()), Reason: "forged"})
	put(coord, "b1.s0", stop{Ticket: old, Reason: "expired"})
	put(coord, "b1.s3", stop{Ticket: newTicket("s2", time.Now()), Reason: "moved"})
	put(coord, "b2.s2", stop{Ticket: newTicket("s2", time.Now()), Reason: "--max-cost-usd 1"})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		w.stopMu.Lock()
		why, ok := w.stopped["b2.s2"]
		n := len(w.stopped)
		w.stopMu.Unlock()
		if ok {
			if why != "--max-cost-usd 1" || n != 1 {
				t.Errorf("stopped b2.s2 for %q; %d sessions stopped (want only b2.s2)", why, n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the signed stop never reached the worker")
		}
	}
	// The stop deleted from the bucket still holds; it holds for its
	// own session, not for a later one of the batch.
	must(t, w.c.stops.Delete(ctx, "b2.s2"))
	put(coord, "b3.s1", stop{Ticket: newTicket("s1", time.Now()), Reason: "sync"})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		w.stopMu.Lock()
		_, synced := w.stopped["b3.s1"]
		w.stopMu.Unlock()
		if synced {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the third stop never reached the worker")
		}
	}
	if _, _, why := w.track(ctx, Job{Ticket: Ticket{Session: "s2"}, Batch: "b2"}); why != "--max-cost-usd 1" {
		t.Errorf("an item of the stopped session after its stop was deleted: halted %q", why)
	}
	if _, untrack, why := w.track(ctx, Job{Ticket: Ticket{Session: "s3"}, Batch: "b2"}); why != "" {
		t.Errorf("an item of a later session of the batch is halted: %q", why)
	} else {
		untrack()
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 3 || !strings.Contains(lines[0], "refused the stop b1.s1") || !strings.Contains(lines[1], "expired") || !strings.Contains(lines[2], "stops session s2") {
		t.Errorf("reported %q", lines)
	}
}

// BenchmarkSignedEvent is what signing adds to each event: the worker
// signs it, the coordinator checks it.
func BenchmarkSignedEvent(b *testing.B) {
	dir := b.TempDir()
	key, pub, err := GenerateKey(dir, "w")
	if err != nil {
		b.Fatal(err)
	}
	s, _ := LoadSigner(key)
	keys, _ := LoadKeys([]string{pub})
	tr := trust{keys: keys}
	data := []byte(strings.Repeat("x", 1024))
	for b.Loop() {
		m := signMsg(s, "flowrun.ev.r", "id", data)
		if _, err := tr.msg(m.Subject, m.Header, m.Data); err != nil {
			b.Fatal(err)
		}
	}
}

// TestKeyFilesOptions checks which keys a coordinator and a worker need
// unless insecure, and that the keys named are read into the options.
func TestKeyFilesOptions(t *testing.T) {
	dir := t.TempDir()
	coordKey, coordPub, err := GenerateKey(dir, "coordinator")
	if err != nil {
		t.Fatal(err)
	}
	workerKey, workerPub, err := GenerateKey(dir, "worker")
	if err != nil {
		t.Fatal(err)
	}
	creds, openCreds := filepath.Join(dir, "u.creds"), filepath.Join(dir, "open.creds")
	must(t, os.WriteFile(creds, []byte("seed"), 0o600))
	must(t, os.WriteFile(openCreds, []byte("seed"), 0o644))
	for _, c := range []struct {
		name    string
		k       KeyFiles
		worker  bool
		missing *MissingKeysError
	}{
		{name: "worker trusting no coordinator", k: KeyFiles{Sign: workerKey}, worker: true, missing: &MissingKeysError{Worker: true, NoTrust: true}},
		{name: "worker without its key", k: KeyFiles{Trust: []string{coordPub}}, worker: true, missing: &MissingKeysError{Worker: true}},
		{name: "coordinator trusting no worker", k: KeyFiles{Sign: coordKey}, missing: &MissingKeysError{}},
		{name: "coordinator without its key", k: KeyFiles{TrustWorker: []string{workerPub}}, missing: &MissingKeysError{}},
		{name: "insecure worker", k: KeyFiles{Insecure: true}, worker: true},
		{name: "worker", k: KeyFiles{Sign: workerKey, Trust: []string{coordPub}}, worker: true},
		{name: "coordinator", k: KeyFiles{Sign: coordKey, TrustWorker: []string{workerPub}, Creds: creds, CA: "ca.pem"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, err := c.k.Options("nats://host:4222", c.worker)
			var missing *MissingKeysError
			if c.missing != nil {
				if !errors.As(err, &missing) || *missing != *c.missing {
					t.Fatalf("error %v, want %+v", err, c.missing)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.URL != "nats://host:4222" || o.Creds != c.k.Creds || o.CA != c.k.CA || o.Insecure != c.k.Insecure {
				t.Errorf("options %+v do not carry the files %+v", o, c.k)
			}
			if (o.Signer != nil) != (c.k.Sign != "") || len(o.Coordinators) != len(c.k.Trust) || len(o.Workers) != len(c.k.TrustWorker) {
				t.Errorf("keys read: signer %v, %d coordinators, %d workers; want those of %+v", o.Signer != nil, len(o.Coordinators), len(o.Workers), c.k)
			}
		})
	}
	var open *OpenFileError
	if _, err := (KeyFiles{Insecure: true, Creds: openCreds}).Options("nats://host:4222", true); !errors.As(err, &open) || open.Path != openCreds {
		t.Errorf("credentials of mode 0644: %v", err)
	}
	if _, err := (KeyFiles{Sign: coordKey, TrustWorker: []string{filepath.Join(dir, "absent.pub")}}).Options("nats://host:4222", false); err == nil {
		t.Error("a missing worker key file was accepted")
	}
}
