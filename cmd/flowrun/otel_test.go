package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/flowrun/flowrun/tracing"
)

// otlpReceiver keeps what an in-process OTLP collector decoded: every
// POST /v1/traces (startOTLPReceiver) or gRPC Export (otlpGRPCService).
type otlpReceiver struct {
	mu    sync.Mutex
	raw   [][]byte
	spans []*tracepb.Span
}

func startOTLPReceiver(t *testing.T) (*otlpReceiver, string) {
	t.Helper()
	rc := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP request %s %s (%s)", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
			return
		}
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("decoding the OTLP payload: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rc.add(body, &req)
		b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return rc, srv.URL
}

func (rc *otlpReceiver) add(raw []byte, req *collectortrace.ExportTraceServiceRequest) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.raw = append(rc.raw, raw)
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			rc.spans = append(rc.spans, ss.Spans...)
		}
	}
}

// otlpGRPCService is the OTLP gRPC trace service, received into rc.
type otlpGRPCService struct {
	collectortrace.UnimplementedTraceServiceServer
	rc *otlpReceiver
}

func (g otlpGRPCService) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	raw, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	g.rc.add(raw, req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// startOTLPGRPCReceiver is an OTLP gRPC collector on a local port; it
// returns the URL to give --otel.
func startOTLPGRPCReceiver(t *testing.T) (*otlpReceiver, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := &otlpReceiver{}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, otlpGRPCService{rc: rc})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("the gRPC receiver: %v", err)
		}
	})
	return rc, "http://" + l.Addr().String()
}

func (rc *otlpReceiver) take() ([]*tracepb.Span, []byte) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	spans, raw := rc.spans, bytes.Join(rc.raw, nil)
	rc.spans, rc.raw = nil, nil
	return spans, raw
}

func spanAttr(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

const otelSentinelKey = "sk-otel-sentinel-9f8e7d6c5b4a39281706"

func otelEnv(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", otelSentinelKey)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv(tracing.CaptureContentEnv, "true")
}

// traceShippedPipeline runs approach_proposer from its cassette with its
// trace sent to url, and returns the spans rc received, none holding the
// API key.
func traceShippedPipeline(t *testing.T, rc *otlpReceiver, url, db string) []*tracepb.Span {
	t.Helper()
	code, _, stderr := flowrun(t, "run", "../../pipelines/approach_proposer.yaml", "--auto", "--store", db,
		"--replay", "../../pipelines/approach_proposer.cassette.yaml", "--otel", url)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	spans, raw := rc.take()
	if bytes.Contains(raw, []byte(otelSentinelKey)) || bytes.Contains(raw, []byte(otelSentinelKey[:16])) {
		t.Fatal("the API key is in the exported trace")
	}
	return spans
}

func TestOTelTraceOfShippedPipeline(t *testing.T) {
	otelEnv(t)
	rc, url := startOTLPReceiver(t)
	db := filepath.Join(t.TempDir(), "runs.db")
	spans := traceShippedPipeline(t, rc, url, db)
	byID := map[string]*tracepb.Span{}
	byName := map[string]*tracepb.Span{}
	for _, s := range spans {
		byID[hex.EncodeToString(s.SpanId)] = s
		byName[s.Name] = s
	}
	run := byName["run approach_proposer"]
	if run == nil {
		t.Fatalf("no run span among %d spans", len(spans))
	}
	runID := spanAttr(run, "flowrun.run.id").GetStringValue()
	if runID == "" || len(run.ParentSpanId) != 0 {
		t.Fatalf("run span: id %q, parent %x", runID, run.ParentSpanId)
	}
	if want := tracing.TraceID(runID); !bytes.Equal(run.TraceId, want[:]) {
		t.Errorf("trace id %x, want %x derived from run %s", run.TraceId, want[:], runID)
	}
	parentName := func(name string) string {
		s := byName[name]
		if s == nil {
			t.Fatalf("no span %q", name)
		}
		if p := byID[hex.EncodeToString(s.ParentSpanId)]; p != nil {
			return p.Name
		}
		return ""
	}
	for child, parent := range map[string]string{
		"node propose":          "run approach_proposer",
		"node rounds":           "run approach_proposer",
		"node rounds[2]/expert": "node rounds",
		"node route":            "run approach_proposer",
		"run approach_proposer": "",
	} {
		if got := parentName(child); got != parent {
			t.Errorf("span %q has parent %q, want %q", child, got, parent)
		}
	}
	if it := spanAttr(byName["node rounds[2]/expert"], "flowrun.loop.iteration"); it.GetIntValue() != 2 {
		t.Errorf("flowrun.loop.iteration %v, want 2", it)
	}
	chats := 0
	for _, s := range spans {
		if !bytes.Equal(s.TraceId, run.TraceId) {
			t.Errorf("span %q is in trace %x, not the run's", s.Name, s.TraceId)
		}
		if s.Name != "chat gpt-4.1-mini" {
			continue
		}
		chats++
		p := byID[hex.EncodeToString(s.ParentSpanId)]
		path := spanAttr(s, "flowrun.node.path").GetStringValue()
		if p == nil || p.Name != "node "+path {
			t.Errorf("chat span at %q is not under its node's span", path)
		}
		if spanAttr(s, "gen_ai.operation.name").GetStringValue() != "chat" ||
			spanAttr(s, "gen_ai.request.model").GetStringValue() != "gpt-4.1-mini" ||
			spanAttr(s, "gen_ai.system").GetStringValue() != "openai" ||
			spanAttr(s, "gen_ai.usage.input_tokens").GetIntValue() <= 0 ||
			spanAttr(s, "gen_ai.usage.output_tokens").GetIntValue() <= 0 ||
			spanAttr(s, "flowrun.run.id").GetStringValue() != runID {
			t.Errorf("chat span at %q lacks GenAI attributes: %v", path, s.Attributes)
		}
		if s.StartTimeUnixNano > s.EndTimeUnixNano || s.StartTimeUnixNano < run.StartTimeUnixNano {
			t.Errorf("chat span at %q: times %d..%d, run from %d", path, s.StartTimeUnixNano, s.EndTimeUnixNano, run.StartTimeUnixNano)
		}
		if len(s.Events) != 1 || !strings.HasPrefix(s.Events[0].Name, "gen_ai.") {
			t.Errorf("chat span at %q: message content events %v", path, s.Events)
		}
	}
	if chats != 8 {
		t.Errorf("%d chat spans, want 8 (one per model call)", chats)
	}

	code, _, stderr := flowrun(t, "resume", runID, "--from", "2", "--auto", "--store", db,
		"--replay", "../../pipelines/approach_proposer.cassette.yaml", "--otel", url)
	if code != exitOK {
		t.Fatalf("fork: exit %d\n%s", code, stderr)
	}
	forked, _ := rc.take()
	for _, s := range forked {
		if s.Name != "run approach_proposer" {
			continue
		}
		if bytes.Equal(s.TraceId, run.TraceId) || len(s.Links) != 1 || !bytes.Equal(s.Links[0].TraceId, run.TraceId) {
			t.Errorf("the fork's run span (trace %x, links %v) does not link to the parent's trace %x", s.TraceId, s.Links, run.TraceId)
		}
		return
	}
	t.Errorf("the fork exported no run span among %d", len(forked))
}

func TestOTelResumeContinuesTheTrace(t *testing.T) {
	otelEnv(t)
	rc, url := startOTLPReceiver(t)
	db := filepath.Join(t.TempDir(), "runs.db")
	cassette := "../../pipelines/approach_proposer.cassette.yaml"
	code, _, stderr := flowrun(t, "run", "../../pipelines/approach_proposer.yaml", "--no-input", "--store", db,
		"--replay", cassette, "--otel", url)
	if !strings.Contains(stderr, "is waiting") {
		t.Fatalf("exit %d: the run did not wait for its confirmation\n%s", code, stderr)
	}
	first, _ := rc.take()
	if len(first) == 0 {
		t.Fatal("the waiting run exported no span")
	}
	runID := spanAttr(first[0], "flowrun.run.id").GetStringValue()
	code, _, stderr = flowrun(t, "resume", runID, "--auto", "--store", db, "--replay", cassette, "--otel", url)
	if code != exitOK {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	second, _ := rc.take()
	if len(second) < 10 {
		t.Fatalf("the resumed run exported %d spans", len(second))
	}
	for _, s := range second {
		if !bytes.Equal(s.TraceId, first[0].TraceId) {
			t.Fatalf("resumed span %q is in trace %x, the run began in %x", s.Name, s.TraceId, first[0].TraceId)
		}
	}
}

// Items of a batch run at once, each its own trace.
func TestOTelBatchTracesEachItemRun(t *testing.T) {
	otelEnv(t)
	rc, url := startOTLPReceiver(t)
	dir := t.TempDir()
	p := writeFile(t, dir, "qa.yaml", fmt.Sprintf(qaPipeline, ""))
	data := writeFile(t, dir, "qa.jsonl", "{\"question\": \"q1\"}\n{\"question\": \"q2\"}\n{\"question\": \"q3\"}\n")
	_, srv := newQAModel(t, 0)
	useModel(t, srv)
	code, stdout, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", filepath.Join(dir, "runs.db"),
		"--concurrency", "3", "--otel", url)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	spans, _ := rc.take()
	runs := map[string]string{}
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "run ") {
			id := spanAttr(s, "flowrun.run.id").GetStringValue()
			want := tracing.TraceID(id)
			if !bytes.Equal(s.TraceId, want[:]) {
				t.Errorf("run %s is in trace %x", id, s.TraceId)
			}
			runs[hex.EncodeToString(s.TraceId)] = id
		}
	}
	if len(runs) != 3 {
		t.Fatalf("%d run traces, want 3", len(runs))
	}
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "chat ") && runs[hex.EncodeToString(s.TraceId)] != spanAttr(s, "flowrun.run.id").GetStringValue() {
			t.Errorf("chat span of run %s is in another run's trace", spanAttr(s, "flowrun.run.id").GetStringValue())
		}
	}
}

// With OTEL_EXPORTER_OTLP_PROTOCOL=grpc a run's trace goes over OTLP gRPC:
// the same spans, GenAI attributes and trace id, and no key.
func TestOTelOverGRPC(t *testing.T) {
	otelEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	rc, url := startOTLPGRPCReceiver(t)
	spans := traceShippedPipeline(t, rc, url, filepath.Join(t.TempDir(), "runs.db"))
	var run *tracepb.Span
	chats := 0
	for _, s := range spans {
		switch {
		case s.Name == "run approach_proposer":
			run = s
		case s.Name == "chat gpt-4.1-mini" && spanAttr(s, "gen_ai.operation.name").GetStringValue() == "chat" &&
			spanAttr(s, "gen_ai.usage.input_tokens").GetIntValue() > 0:
			chats++
		}
	}
	if run == nil {
		t.Fatalf("no run span among %d spans received over gRPC", len(spans))
	}
	if want := tracing.TraceID(spanAttr(run, "flowrun.run.id").GetStringValue()); !bytes.Equal(run.TraceId, want[:]) {
		t.Errorf("trace id %x, want %x", run.TraceId, want[:])
	}
	if chats != 8 {
		t.Errorf("%d chat spans with GenAI attributes, want 8", chats)
	}
}

// A protocol flowrun cannot export over is refused before the run, naming it.
func TestOTelUnknownProtocol(t *testing.T) {
	otelEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	code, _, stderr := flowrun(t, "run", "../../pipelines/counter.yaml", "--store", filepath.Join(t.TempDir(), "runs.db"), "--otel", "http://127.0.0.1:1")
	if code != exitInvalid || !strings.Contains(stderr, `OTLP protocol "http/json" (OTEL_EXPORTER_OTLP_PROTOCOL): flowrun exports traces over grpc or http/protobuf`) {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
}
