package jsjournal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flowrun/flowrun/journal"
	"github.com/flowrun/flowrun/journal/journaltest"
	"github.com/flowrun/flowrun/journal/jsjournal"
	"github.com/flowrun/flowrun/journal/jsjournal/jsjournaltest"
	"github.com/flowrun/flowrun/runtime"
)

// clusterLike is a log laid out and sealed as a flowrun cluster's: its
// own stream and subjects, every message signed (here, a header) and
// checked as it is read back.
var clusterLike = jsjournal.Config{
	Stream: "FLOWRUN_RUNS", Checkpoints: "flowrun.cp.", Events: "flowrun.ev.",
	Seal: func(subject, msgID string, data []byte) *nats.Msg {
		m := nats.NewMsg(subject)
		m.Data = data
		m.Header.Set(nats.MsgIdHdr, msgID)
		m.Header.Set("Signed", "worker")
		return m
	},
	Check: func(_ string, h nats.Header, _ []byte) error {
		if h.Get("Signed") != "worker" {
			return errors.New("not signed by a trusted worker")
		}
		return nil
	},
}

func openLog(t *testing.T, nc *nats.Conn, cfg jsjournal.Config, opts ...jetstream.JetStreamOpt) *jsjournal.Log {
	js, err := jetstream.New(nc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := jsjournal.OpenLog(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLogConformance runs the Log suite on the journal's own layout and
// on a cluster's.
func TestLogConformance(t *testing.T) {
	for name, cfg := range map[string]jsjournal.Config{"own": {}, "cluster": clusterLike} {
		t.Run(name, func(t *testing.T) {
			journaltest.RunLog(t, func(t *testing.T) journal.Log { return openLog(t, jsjournaltest.Connect(t), cfg) })
		})
	}
}

// TestLogRefusesWhatItsCheckRefuses: checkpoints and events a stranger
// publishes on a run's subjects are left out of what is read back, and
// each is reported.
func TestLogRefusesWhatItsCheckRefuses(t *testing.T) {
	ctx := context.Background()
	nc := jsjournaltest.Connect(t)
	var refused []string
	cfg := clusterLike
	cfg.Refused = func(what, line string) { refused = append(refused, what+": "+line) }
	l := openLog(t, nc, cfg)
	must(t, l.Save(ctx, "r1", &runtime.Checkpoint{Seq: 1, Path: "a"}))
	must(t, l.Event(ctx, "r1", runtime.Event{Type: runtime.EventNodeFinished, Run: "r1", Path: "a"}))
	must(t, l.Flush(ctx, "r1"))
	must(t, nc.Publish("flowrun.cp.r1", []byte(`{"seq":2,"path":"b"}`)))
	must(t, nc.Publish("flowrun.ev.r1", []byte(`{"type":"model_turn","run":"r1","cost_usd":999}`)))
	must(t, nc.Flush())
	cps, err := l.Checkpoints(ctx, "r1", 0)
	must(t, err)
	evs, err := l.Events(ctx, "r1")
	must(t, err)
	if len(cps) != 1 || cps[0].Path != "a" || len(evs) != 1 || evs[0].CostUSD != 0 {
		t.Errorf("read back checkpoints %+v and events %+v, want only the run's own", cps, evs)
	}
	if len(refused) != 2 {
		t.Errorf("reported %q, want the forged checkpoint and event", refused)
	}
}

// unacknowledged is a log whose stream is gone, so that no event
// published on it is acknowledged, with a short acknowledgement timeout.
func unacknowledged(t *testing.T) (*jsjournal.Log, *nats.Conn) {
	d := jsjournal.EventAckTimeout
	t.Cleanup(func() { jsjournal.EventAckTimeout = d })
	jsjournal.EventAckTimeout = 200 * time.Millisecond
	nc := jsjournaltest.Connect(t)
	l := openLog(t, nc, clusterLike, jetstream.WithPublishAsyncTimeout(jsjournal.EventAckTimeout))
	js, _ := jetstream.New(nc)
	must(t, js.DeleteStream(context.Background(), clusterLike.Stream))
	return l, nc
}

// TestEventWithoutAckDoesNotHangItsRun: an event whose acknowledgement
// never comes (lost with a stream leader that was shut down mid-publish;
// here, a stream that is gone and a subscriber that swallows the message)
// is published again for a while and then given up: Flush returns,
// and the run (a cluster worker's item) ends instead of waiting forever.
func TestEventWithoutAckDoesNotHangItsRun(t *testing.T) {
	l, nc := unacknowledged(t)
	ctx := context.Background()
	swallowed := make(chan struct{}, 16)
	sub, err := nc.Subscribe(clusterLike.Events+">", func(*nats.Msg) { swallowed <- struct{}{} })
	must(t, err)
	defer sub.Unsubscribe()
	must(t, l.Event(ctx, "r1", runtime.Event{Type: runtime.EventRunStarted, Run: "r1"}))
	done := make(chan struct{})
	go func() { _ = l.Flush(ctx, "r1"); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("flushing an event JetStream never acknowledged still waits after a minute")
	}
	if len(swallowed) < 2 {
		t.Errorf("the event was published %d times, want it published again after no acknowledgement", len(swallowed))
	}
}

// TestEventsWithoutAckShareOneBudget: when many events lose their
// acknowledgement, publishing them again shares one budget instead of
// taking one each, one after another (20 events would wait 20 budgets).
func TestEventsWithoutAckShareOneBudget(t *testing.T) {
	l, _ := unacknowledged(t)
	ctx := context.Background()
	const n = 20
	for range n {
		must(t, l.Event(ctx, "r1", runtime.Event{Type: runtime.EventNodeStarted, Run: "r1"}))
	}
	start := time.Now()
	_ = l.Flush(ctx, "r1")
	budget := 4 * jsjournal.EventAckTimeout
	if took := time.Since(start); took > n/2*budget {
		t.Errorf("flushing %d unacknowledged events took %s, want about one budget of %s, not one each", n, took, budget)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
