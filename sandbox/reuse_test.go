//go:build linux

package sandbox

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/flowrun/flowrun/errclass"
)

// inWorker runs Python calls the way a worker does (host.run, then
// prepareNext), in this process, so that a test can see whether each call
// was served by a kept instance (host.reused).
type inWorker struct {
	t   *testing.T
	s   *Sandbox
	h   *host
	ctx context.Context
}

func newInWorker(t *testing.T) *inWorker {
	s := New(Options{CacheDir: sharedCache(t)})
	t.Cleanup(s.Close)
	needPython(t, s)
	w := &inWorker{t: t, s: s, h: &host{}, ctx: context.Background()}
	t.Cleanup(func() { w.h.close(w.ctx) })
	return w
}

// call runs source's f and returns its result as JSON text (or the
// error's class and message) and whether a kept instance served it.
func (w *inWorker) call(source string) (string, bool) {
	w.t.Helper()
	req := Request{Language: Python, Source: source, Call: "f"}
	req.Limits = req.Limits.withDefaults()
	j, res, err := w.s.prepare(w.ctx, req)
	if err != nil || res != nil {
		w.t.Fatal(err, res)
	}
	before := w.h.reused
	r, fatal := w.h.run(w.ctx, j, func() {})
	if fatal != nil || r.ColdStart != "" {
		w.t.Fatalf("%v %+v", fatal, r)
	}
	w.h.prepareNext(w.ctx, j)
	if r.Error != nil {
		return string(r.Error.Class) + ": " + r.Error.Message, w.h.reused > before
	}
	return string(r.Result), w.h.reused > before
}

const returnsOne = "def f():\n    return 1\n"

// TestOrdinaryCallsReuseTheirInstance: trivial calls, and calls that
// print and import a module of the image, each serve the next one
// from the same instance, so the saving cannot vanish unnoticed; the
// maxReuses-th call ends it.
func TestOrdinaryCallsReuseTheirInstance(t *testing.T) {
	w := newInWorker(t)
	w.call(returnsOne)
	for i, src := range []string{
		returnsOne,
		"import json\ndef f():\n    print('hello')\n    return json.dumps([1])\n",
		returnsOne,
	} {
		if _, reused := w.call(src); !reused {
			t.Fatalf("call %d was not served by the last call's instance", i+1)
		}
	}
	w.h.ready.reuses = maxReuses - 1
	if _, reused := w.call(returnsOne); !reused { // the instance's last
		t.Fatal("the instance's last call was not served by it")
	}
	if _, reused := w.call(returnsOne); reused {
		t.Error("an instance served more than maxReuses calls")
	}
}

// TestReuseEndsWhereStateChanged: after a call that changes what a kept
// instance would carry (its files, its memory's size, a failure, its
// exit), the next call gets a new instance and sees none of it: the same
// file descriptor, the same address for a new object as a first call.
func TestReuseEndsWhereStateChanged(t *testing.T) {
	w := newInWorker(t)
	const openFile = "import builtins\ndef f():\n    builtins.kept = open('/usr/local/lib/python3.13/os.py')\n    return builtins.kept.fileno()\n"
	const newObject = "def f():\n    return id(object())\n"
	firstFD, _ := w.call(openFile)
	firstID, _ := w.call(newObject)
	cases := []struct{ name, source string }{
		{"opens a file and keeps it", openFile},
		{"raises (its traceback opens a file)", "def f():\n    raise ValueError('no')\n"},
		{"closes stdin", "import os\ndef f():\n    os.close(0)\n    return 1\n"},
		{"grows its memory", "import builtins\ndef f():\n    builtins.kept = bytearray(64 << 20)\n    return 1\n"},
		{"floods its output", "def f():\n    print('x' * (4 << 20))\n"},
		{"exits", "import os\ndef f():\n    os._exit(0)\n"},
	}
	for _, c := range cases {
		w.call(returnsOne) // on the instance the last case left
		w.call(c.source)
		if got, reused := w.call(openFile); reused || got != firstFD {
			t.Errorf("after a call that %s: opening a file gave fd %s on a kept instance: %v; want %s on a new one", c.name, got, reused, firstFD)
		}
		w.call(c.source)
		if got, reused := w.call(newObject); reused || got != firstID {
			t.Errorf("after a call that %s: a new object at %s on a kept instance: %v; want %s on a new one", c.name, got, reused, firstID)
		}
	}
}

// TestKeptInstanceReadsAFreshClock: the first readings of time.monotonic
// and time.time in a kept instance are those of a new one, whatever the
// last call read.
func TestKeptInstanceReadsAFreshClock(t *testing.T) {
	w := newInWorker(t)
	const clocks = "import time\ndef f():\n    return [time.monotonic(), time.time(), time.monotonic()]\n"
	first, _ := w.call(clocks)
	w.call("import time\ndef f():\n    return [time.monotonic() for _ in range(100)][-1]\n")
	again, reused := w.call(clocks)
	if !reused || again != first {
		t.Fatalf("clocks %s on a kept instance (%v); a new instance read %s", again, reused, first)
	}
	var v []float64
	if err := json.Unmarshal([]byte(first), &v); err != nil || v[2] <= v[0] {
		t.Errorf("the clock does not advance within a call: %s", first)
	}
}

// TestReadyInstanceStillTimesOut: a call that a worker's ready instance
// runs sends no "started" (its deadline runs from the job), and a
// spinning one is still stopped at its deadline, on a worker that ran a
// call before.
func TestReadyInstanceStillTimesOut(t *testing.T) {
	s := New(Options{CacheDir: sharedCache(t), Workers: 1})
	defer s.Close()
	needPython(t, s)
	ctx := context.Background()
	for range 2 {
		if res, err := s.Run(ctx, Request{Language: Python, Source: returnsOne, Call: "f"}); err != nil || !res.OK {
			t.Fatal(err, res)
		}
	}
	if w := s.idle[0]; w.warm == (warmth{}) {
		t.Fatal("the worker is not known to have an instance ready after two calls")
	}
	const timeout = 300 * time.Millisecond
	done := make(chan *Result, 1)
	go func() {
		res, err := s.Run(ctx, Request{Language: Python, Source: "def f():\n    while True:\n        pass\n", Call: "f", Limits: Limits{Timeout: timeout}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	select {
	case res := <-done:
		if res == nil || res.Error == nil || res.Error.Class != errclass.Timeout {
			t.Fatalf("a spinning call on a ready instance ended %+v, want a timeout", res)
		}
	case <-time.After(timeout + 30*time.Second):
		t.Fatal("a spinning call on a ready instance was not stopped: no deadline ran")
	}
}
