// Package tracing exports flowrun runs as OpenTelemetry traces over OTLP
// (HTTP/protobuf, or gRPC when OTEL_EXPORTER_OTLP_PROTOCOL says grpc). It
// is an event sink: spans are built from a run's events and carry the
// events' own timestamps. A run's trace id is derived from
// its run id, so a resumed run continues the same trace. Error texts and,
// when captured at all, message contents are redacted; no secret flowrun
// knows of is ever exported.
package tracing

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowrun/flowrun/eventview"
	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/runtime"
)

// CaptureContentEnv turns on exporting message contents, as the GenAI
// semantic conventions name it.
const CaptureContentEnv = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

// Endpoint is where traces go: the flag's URL if given, else whatever the
// standard OTLP environment variables say; "" when tracing is off.
func Endpoint(flag string) string {
	if flag != "" {
		return flag
	}
	if v := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
		return v
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
}

// Exporter sends the spans of any number of runs; Shutdown flushes it.
type Exporter struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	content  bool
	mu       sync.Mutex
	runs     map[string]*runTrace
}

// Protocol is the OTLP protocol traces go over, as the standard
// variables choose it: "grpc", or "http/protobuf" (the default).
func Protocol() string {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := os.Getenv(name); v != "" {
			return v
		}
	}
	return "http/protobuf"
}

// New starts an exporter. flagURL, when set, is the collector's base URL
// (http://host:4318, or http://host:4317 over gRPC); otherwise the
// OTEL_EXPORTER_OTLP_* variables apply.
func New(ctx context.Context, flagURL string) (*Exporter, error) {
	var exp sdktrace.SpanExporter
	var err error
	switch proto := Protocol(); proto {
	case "grpc":
		var opts []otlptracegrpc.Option
		if flagURL != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(strings.TrimRight(flagURL, "/")))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	case "http/protobuf":
		var opts []otlptracehttp.Option
		if flagURL != "" {
			u := strings.TrimRight(flagURL, "/")
			if !strings.HasSuffix(u, "/v1/traces") {
				u += "/v1/traces"
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(u))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("OTLP protocol %q (OTEL_EXPORTER_OTLP_PROTOCOL): flowrun exports traces over grpc or http/protobuf", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("starting the OTLP trace exporter for %s: %w", Endpoint(flagURL), err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "flowrun"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(runIDs{}))
	return &Exporter{provider: tp, tracer: tp.Tracer("github.com/flowrun/flowrun"),
		content: os.Getenv(CaptureContentEnv) == "true", runs: map[string]*runTrace{}}, nil
}

// Shutdown sends what is left and stops the exporter.
func (x *Exporter) Shutdown(ctx context.Context) error {
	if err := x.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("sending the last spans: %w", err)
	}
	return nil
}

// TraceID is the trace every attempt of the run shares.
func TraceID(runID string) trace.TraceID {
	sum := sha256.Sum256([]byte(runID))
	var id trace.TraceID
	copy(id[:], sum[:16])
	return id
}

type traceIDKey struct{}

// runIDs gives a run's root span its derived trace id; span ids are random.
type runIDs struct{}

func (runIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	tid, _ := ctx.Value(traceIDKey{}).(trace.TraceID)
	return tid, newSpanID()
}

func (runIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var sid trace.SpanID
	_, _ = rand.Read(sid[:]) // crypto/rand.Read never fails
	return sid
}

// runTrace is the open spans of one run: the run's and its nodes' by path.
type runTrace struct {
	ctx   context.Context
	run   trace.Span
	nodes map[string]nodeSpan
}

type nodeSpan struct {
	ctx  context.Context
	span trace.Span
}

// Event turns one event into spans.
func (x *Exporter) Event(e runtime.Event) {
	x.record(e)
	if e.Type == runtime.EventRunFinished {
		// Outside the lock: a slow backend holds up only the run that ended.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = x.provider.ForceFlush(ctx) // a backend that is down must not fail the run
	}
}

func (x *Exporter) record(e runtime.Event) {
	x.mu.Lock()
	defer x.mu.Unlock()
	v := eventview.Describe(e)
	r := x.runs[e.Run]
	if v.Trace == eventview.TraceRunStart || r == nil {
		r = x.startRun(e)
	}
	switch v.Trace {
	case eventview.TraceNodeStart:
		ctx, span := x.tracer.Start(r.parent(e.Path), v.Span, trace.WithTimestamp(e.Time),
			trace.WithAttributes(nodeAttrs(e)...))
		r.nodes[e.Path] = nodeSpan{ctx, span}
	case eventview.TraceNodeEnd:
		n, ok := r.nodes[e.Path]
		if !ok {
			_, n.span = x.tracer.Start(r.parent(e.Path), v.Span, trace.WithTimestamp(e.Time),
				trace.WithAttributes(nodeAttrs(e)...))
		}
		delete(r.nodes, e.Path)
		n.span.SetAttributes(attribute.String("flowrun.node.status", strings.TrimPrefix(e.Type, "node_")))
		if e.CostUSD > 0 {
			n.span.SetAttributes(attribute.Float64("flowrun.cost_usd", e.CostUSD))
		}
		if v.Failed {
			failed(n.span, v)
		}
		n.span.End(trace.WithTimestamp(e.Time))
	case eventview.TraceNodeMark:
		n, ok := r.nodes[e.Path]
		switch {
		case !ok:
		case e.Remote != nil:
			n.span.AddEvent("flowrun.remote_work."+e.Remote.What, trace.WithTimestamp(e.Time), trace.WithAttributes(
				attribute.String("flowrun.remote_work.id", e.Remote.ID), attribute.String("flowrun.remote_work.status", e.Remote.Status),
				attribute.Int("flowrun.remote_work.polls", e.Remote.Polls)))
		default:
			n.span.AddEvent(v.Tag, trace.WithTimestamp(e.Time), trace.WithAttributes(
				attribute.Int("flowrun.attempt", e.Attempt), attribute.String("flowrun.error.class", string(e.Class)),
				attribute.String("error.message", redact.Line(e.Error, 500))))
		}
	case eventview.TraceChild:
		switch {
		case e.Turn != nil:
			x.modelTurn(r, e, v)
		case e.Tool != nil:
			x.child(r, e, v, attribute.String("gen_ai.operation.name", "execute_tool"),
				attribute.String("gen_ai.tool.name", e.Tool.Name))
		default:
			x.child(r, e, v, attribute.String("flowrun.sandbox.language", e.Kind))
		}
	case eventview.TraceRunEnd:
		x.finishRun(r, e, v)
	}
}

func (x *Exporter) startRun(e runtime.Event) *runTrace {
	ctx := context.WithValue(context.Background(), traceIDKey{}, TraceID(e.Run))
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithTimestamp(e.Time),
		trace.WithAttributes(attribute.String("flowrun.run.id", e.Run), attribute.String("flowrun.pipeline", e.Pipeline))}
	if e.ForkOf != "" {
		// The parent's trace has a run span per attempt; the link names its
		// trace, which is what a backend can follow.
		parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: TraceID(e.ForkOf)})
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: parent,
			Attributes: []attribute.KeyValue{attribute.String("flowrun.fork_of", e.ForkOf)}}))
	}
	ctx, span := x.tracer.Start(ctx, "run "+e.Pipeline, opts...)
	r := &runTrace{ctx: ctx, run: span, nodes: map[string]nodeSpan{}}
	x.runs[e.Run] = r
	return r
}

// finishRun ends the run's span and any node still open (a run waiting
// for an answer, or stopped).
func (x *Exporter) finishRun(r *runTrace, e runtime.Event, v eventview.View) {
	for path, n := range r.nodes {
		n.span.SetAttributes(attribute.String("flowrun.node.status", string(e.Status)))
		n.span.End(trace.WithTimestamp(e.Time))
		delete(r.nodes, path)
	}
	r.run.SetAttributes(attribute.String("flowrun.run.status", string(e.Status)),
		attribute.Float64("flowrun.cost_usd", e.CostUSD), attribute.Int64("flowrun.tokens", e.Tokens))
	if v.Failed {
		failed(r.run, v)
	}
	r.run.End(trace.WithTimestamp(e.Time))
	delete(x.runs, e.Run)
}

// parent is the context a span at path starts in: the enclosing node's
// span ("refine" for "refine[2]/route"), else the run's.
func (r *runTrace) parent(path string) context.Context {
	for {
		i := strings.LastIndexByte(path, '/')
		if i < 0 {
			return r.ctx
		}
		path = path[:i]
		if n, ok := r.nodes[path]; ok {
			return n.ctx
		}
		if j := strings.LastIndexByte(path, '['); j > 0 && strings.HasSuffix(path, "]") {
			if n, ok := r.nodes[path[:j]]; ok {
				return n.ctx
			}
		}
	}
}

// ownerContext is the span a model turn, tool call or sandbox run at path
// belongs to: its node's.
func (r *runTrace) ownerContext(path string) context.Context {
	if n, ok := r.nodes[path]; ok {
		return n.ctx
	}
	return r.parent(path)
}

func nodeAttrs(e runtime.Event) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("flowrun.run.id", e.Run), attribute.String("flowrun.node.path", e.Path),
		attribute.String("flowrun.node.id", e.Node), attribute.String("flowrun.node.kind", e.Kind)}
	if it, ok := iteration(e.Path); ok {
		attrs = append(attrs, attribute.Int("flowrun.loop.iteration", it))
	}
	if e.Attempt > 0 {
		attrs = append(attrs, attribute.Int("flowrun.attempt", e.Attempt))
	}
	return attrs
}

// iteration is the innermost numeric index in path: "refine[2]/route" is
// in iteration 2.
func iteration(path string) (int, bool) {
	segs := strings.Split(path, "/")
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		j := strings.LastIndexByte(s, '[')
		if j < 0 || !strings.HasSuffix(s, "]") {
			continue
		}
		if n, err := strconv.Atoi(s[j+1 : len(s)-1]); err == nil {
			return n, true
		}
	}
	return 0, false
}

func (x *Exporter) modelTurn(r *runTrace, e runtime.Event, v eventview.View) {
	tu := e.Turn
	var reply struct {
		Model string `json:"model"`
	}
	usage := tu.Tokens()
	decode(tu.Reply, &reply)
	start := e.Time.Add(-time.Duration(tu.LatencyMS * float64(time.Millisecond)))
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.system", "openai"),
		attribute.String("gen_ai.request.model", tu.Model),
		attribute.Int("gen_ai.usage.input_tokens", usage.Prompt), attribute.Int("gen_ai.usage.output_tokens", usage.Completion),
		attribute.String("flowrun.run.id", e.Run), attribute.String("flowrun.node.path", e.Path),
		attribute.Float64("flowrun.cost_usd", tu.CostUSD), attribute.Int("flowrun.try", tu.Try),
	}
	if reply.Model != "" {
		attrs = append(attrs, attribute.String("gen_ai.response.model", reply.Model))
	}
	if usage.Estimated {
		attrs = append(attrs, attribute.Bool("flowrun.usage.estimated", true))
	}
	_, span := x.tracer.Start(r.ownerContext(e.Path), v.Span, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	if x.content {
		span.AddEvent("gen_ai.client.inference.operation.details", trace.WithTimestamp(e.Time), trace.WithAttributes(
			attribute.String("gen_ai.input.messages", redactedJSON(tu.Messages)),
			attribute.String("gen_ai.output.messages", redactedJSON(tu.Reply))))
	}
	if v.Failed {
		failed(span, v)
	}
	span.End(trace.WithTimestamp(e.Time))
}

// child is a span for a tool call or sandbox run, which end at their event.
func (x *Exporter) child(r *runTrace, e runtime.Event, v eventview.View, attrs ...attribute.KeyValue) {
	start := e.Time.Add(-time.Duration(v.DurationMS * float64(time.Millisecond)))
	attrs = append(attrs, attribute.String("flowrun.run.id", e.Run), attribute.String("flowrun.node.path", e.Path))
	_, span := x.tracer.Start(r.ownerContext(e.Path), v.Span, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	if x.content && e.Tool != nil {
		span.SetAttributes(attribute.String("gen_ai.tool.call.arguments", redactedJSON(e.Tool.Args)),
			attribute.String("gen_ai.tool.call.result", redactedJSON(e.Tool.Result)))
	}
	if v.Failed {
		failed(span, v)
	}
	span.End(trace.WithTimestamp(e.Time))
}

func failed(span trace.Span, v eventview.View) {
	if class := string(v.Class); class != "" {
		span.SetAttributes(attribute.String("flowrun.error.class", class), attribute.String("error.type", class))
	}
	span.SetStatus(codes.Error, redact.Line(v.Error, 500))
}

func decode(v, into any) {
	b, _ := json.Marshal(v)
	_ = json.Unmarshal(b, into)
}

func redactedJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(redact.JSON(b))
}
