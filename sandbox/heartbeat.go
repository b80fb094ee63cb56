package sandbox

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"sync"
	"time"
)

// buildStepLine matches the lines build.sh prints as it enters a step:
// "[python-build  12s] native build-python: make -j2 (next: WASI build)".
var buildStepLine = regexp.MustCompile(`^\[python-build\s+\d+s\] (.+)$`)

// heartbeat passes a build's output through to out and, whenever out has
// been silent for every, prints a line saying which step is still running,
// for how long, and what comes next (the step's own "(next: ...)" text).
// The build's compilers write to a log, not to out, so without it a user
// sees nothing for minutes and cannot tell a slow build from a hung one.
type heartbeat struct {
	out     io.Writer
	every   time.Duration
	started time.Time

	mu        sync.Mutex
	partial   []byte
	step      string
	stepSince time.Time
	lastWrite time.Time

	stop chan struct{}
	done chan struct{}
}

// startHeartbeat starts the ticker; Close stops it and waits for it.
func startHeartbeat(out io.Writer, every time.Duration) *heartbeat {
	now := time.Now()
	h := &heartbeat{out: out, every: every, started: now, stepSince: now, lastWrite: now,
		step: "starting", stop: make(chan struct{}), done: make(chan struct{})}
	go h.run()
	return h
}

func (h *heartbeat) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastWrite = time.Now()
	h.partial = append(h.partial, p...)
	for {
		i := bytes.IndexByte(h.partial, '\n')
		if i < 0 {
			break
		}
		if m := buildStepLine.FindSubmatch(h.partial[:i]); m != nil {
			h.step, h.stepSince = string(m[1]), h.lastWrite
		}
		h.partial = h.partial[i+1:]
	}
	return h.out.Write(p)
}

func (h *heartbeat) run() {
	defer close(h.done)
	t := time.NewTicker(h.every / 3)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case now := <-t.C:
			h.mu.Lock()
			if now.Sub(h.lastWrite) >= h.every {
				if len(h.partial) > 0 { // never glue the line onto the build's unfinished one
					fmt.Fprintln(h.out)
					h.partial = h.partial[:0]
				}
				fmt.Fprintf(h.out, "[python-build %3ds] still running: %s (%s in this step)\n",
					int(now.Sub(h.started).Seconds()), h.step, now.Sub(h.stepSince).Round(time.Second))
				h.lastWrite = now
			}
			h.mu.Unlock()
		}
	}
}

// Close stops the heartbeat; the build's output is complete by then.
func (h *heartbeat) Close() {
	close(h.stop)
	<-h.done
}
