#!/usr/bin/env python3
# The Python fake OpenAI server the flowrun team benchmarks against, copied unchanged (below this line) so that TestCompatibilitySuite runs it.
"""A small OpenAI-compatible chat-completions server for benchmarks.

usage: fake_openai.py PORT [--latency-ms N] [--rpm N]
Answers POST /v1/chat/completions (streamed or not) with the text "xyzzy"
and usage figures, after LATENCY ms. With --rpm it enforces a requests-per-
minute limit over a sliding 60 s window and answers 429 with Retry-After
past it. GET /stats returns {"requests": n, "rejected": n, "max_in_flight": n}.
Binds 127.0.0.1 only. Standard library only.
"""
import json, sys, threading, time, collections
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler

args = sys.argv[1:]
PORT = int(args[0])
LAT = float(args[args.index("--latency-ms") + 1]) / 1000 if "--latency-ms" in args else 0.0
RPM = int(args[args.index("--rpm") + 1]) if "--rpm" in args else 0
lock = threading.Lock()
window = collections.deque()
stats = {"requests": 0, "rejected": 0, "in_flight": 0, "max_in_flight": 0}

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send(self, code, body, ctype="application/json", extra=()):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra: self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        with lock: s = dict(stats)
        self.send(200, json.dumps(s))
    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        req = json.loads(self.rfile.read(n) or b"{}")
        now = time.monotonic()
        with lock:
            stats["requests"] += 1
            if RPM:
                while window and now - window[0] > 60: window.popleft()
                if len(window) >= RPM:
                    stats["rejected"] += 1
                    wait = max(1, int(60 - (now - window[0])) + 1)
                    self.send(429, json.dumps({"error": {"message": "rate limit", "type": "rate_limit_exceeded", "code": "rate_limit_exceeded"}}),
                              extra=[("Retry-After", str(wait))])
                    return
                window.append(now)
            stats["in_flight"] += 1
            stats["max_in_flight"] = max(stats["max_in_flight"], stats["in_flight"])
        try:
            if LAT: time.sleep(LAT)
            model = req.get("model", "gpt-4.1-mini")
            usage = {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22}
            if req.get("stream"):
                chunks = [
                    {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model,
                     "choices": [{"index": 0, "delta": {"role": "assistant", "content": "xyzzy"}, "finish_reason": None}]},
                    {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model,
                     "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                    {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [], "usage": usage},
                ]
                body = "".join("data: " + json.dumps(c) + "\n\n" for c in chunks) + "data: [DONE]\n\n"
                self.send(200, body, "text/event-stream")
            else:
                self.send(200, json.dumps({"id": "c1", "object": "chat.completion", "created": 0, "model": model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "xyzzy"}, "finish_reason": "stop"}],
                    "usage": usage}))
        finally:
            with lock: stats["in_flight"] -= 1

ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", PORT), H).serve_forever()
