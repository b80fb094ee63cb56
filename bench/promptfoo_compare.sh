#!/usr/bin/env bash
# flowrun batch side by side with promptfoo (the eval tool our users know):
# the same N-item dataset, one model call per item and one "contains xyzzy"
# check, against the same local fake OpenAI server, at the same concurrency.
# Prints the median wall time and peak RSS of each, and the ratios
# promptfoo / flowrun (above 1, flowrun is faster or smaller).
#
# uses ../shared/bench/promptfoo when present (its run.sh and
# fake_openai.py; PF_DIR names another copy). Without it, only flowrun's
# side runs. promptfoo's first run installs it and Node 22 into its own
# cache (about 2 minutes, 1.5 GB; see its README.md).
#
#   bench/promptfoo_compare.sh                      # N=1000, concurrency 8, 0 ms latency, 3 repeats
#   N=200 REPEATS=1 bench/promptfoo_compare.sh
#   LATENCY_MS=50 CONCURRENCY=16 bench/promptfoo_compare.sh
#
# Seen on a shared, loaded 2-core machine (2026-11-22, N=1000, concurrency
# 8, fake server at 0 ms, 3 repeats, medians): flowrun 5.7 s wall and
# 41 MB peak RSS, promptfoo 0.123.1 10.7 s and 269 MB: ratios 1.9x wall,
# 6.5x peak RSS. Both sides' wall times include start-up and, for flowrun,
# a durable run with checkpoints per item.
#
# Knobs: N, CONCURRENCY, LATENCY_MS (the fake server's), REPEATS,
# PF_DIR, SKIP_PROMPTFOO=1, OUT=DIR (raw logs; default a new temporary
# directory, kept).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
N=${N:-1000}; CONCURRENCY=${CONCURRENCY:-8}; LATENCY_MS=${LATENCY_MS:-0}; REPEATS=${REPEATS:-3}
PF_DIR=${PF_DIR:-$root/../shared/bench/promptfoo}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/flowrun-promptfoo.XXXXXX")}
mkdir -p "$OUT"

if [[ ! -f "$PF_DIR/fake_openai.py" ]]; then
	echo "promptfoo_compare: no $PF_DIR/fake_openai.py: this benchmark needs the promptfoo peer's fake server (PF_DIR=DIR names it)" >&2
	exit 2
fi

echo "# building flowrun" >&2
go build -o "$OUT/flowrun" ./cmd/flowrun
if [[ "$("$OUT/flowrun" batch --help 2>&1 || true)" != *--dataset* ]]; then
	echo "promptfoo_compare: this flowrun has no 'flowrun batch PIPELINE --dataset D': build it from a tree that has the batch runner" >&2
	exit 2
fi

# The dataset and the pipeline: one llm call per item, scored like
# promptfoo's "contains" assertion.
python3 - "$OUT/dataset.jsonl" "$N" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        f.write(json.dumps({"id": f"item-{i:05d}", "i": i}) + "\n")
PY
cat >"$OUT/one_call.yaml" <<'YAML'
version: 1
name: one_call
inputs:
  i: {type: integer}
models:
  default: {model: gpt-4.1-mini}
nodes:
  - id: say
    llm:
      prompt: "Item ${{ inputs.i }}: say the magic word."
outputs:
  text: nodes.say.text
score:
  pass: 'outputs.text contains "xyzzy"'
YAML

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$PF_DIR/fake_openai.py" "$port" --latency-ms "$LATENCY_MS" &
srv=$!
trap 'kill "$srv" 2>/dev/null || true' EXIT
base="http://127.0.0.1:$port/v1"
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/stats" >/dev/null && break; sleep 0.1; done
requests() { curl -sf "http://127.0.0.1:$port/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])'; }

echo "# date=$(date -u +%FT%TZ) host_cpus=$(nproc) load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo ?) n=$N concurrency=$CONCURRENCY latency_ms=$LATENCY_MS repeats=$REPEATS" >&2
for r in $(seq "$REPEATS"); do
	before=$(requests)
	OPENAI_BASE_URL=$base OPENAI_API_KEY=sk-bench FLOWRUN_STORE="$OUT/flowrun-$r.db" \
		/usr/bin/time -o "$OUT/time-$r.txt" -f 'peak_rss_kb=%M wall_s=%e' \
		"$OUT/flowrun" batch "$OUT/one_call.yaml" --dataset "$OUT/dataset.jsonl" --concurrency "$CONCURRENCY" --json \
		>"$OUT/flowrun-$r.jsonl" 2>"$OUT/flowrun-$r.log" || true
	calls=$(($(requests) - before))
	passed=$("$OUT/flowrun" batch show last --store "$OUT/flowrun-$r.db" --format json 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["pass_rate"]["passed"])' 2>/dev/null || echo "?")
	echo "flowrun mode=batch n=$N concurrency=$CONCURRENCY latency_ms=$LATENCY_MS repeat=$r passed=$passed requests=$calls $(tail -1 "$OUT/time-$r.txt")" | tee -a "$OUT/results.txt"
done

if [[ "${SKIP_PROMPTFOO:-0}" != 1 ]]; then
	BASE_URL=$base N=$N CONCURRENCY=$CONCURRENCY REPEATS=$REPEATS bash "$PF_DIR/run.sh" 2>"$OUT/promptfoo.log" | tee -a "$OUT/results.txt"
fi

python3 - "$OUT/results.txt" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) mode=.*peak_rss_kb=(\d+) wall_s=([\d.]+)", line)
    if m:
        runs.setdefault(m.group(1), []).append((float(m.group(3)), int(m.group(2))))
def med(tool, i):
    return statistics.median(r[i] for r in runs[tool])
print()
for tool in ("flowrun", "pf"):
    if tool in runs:
        print(f"{tool:8s} median wall {med(tool, 0):7.2f} s   peak RSS {med(tool, 1) / 1024:7.1f} MB   ({len(runs[tool])} runs)")
if "flowrun" in runs and "pf" in runs:
    print(f"ratio promptfoo/flowrun: wall {med('pf', 0) / med('flowrun', 0):.1f}x   peak RSS {med('pf', 1) / med('flowrun', 1):.1f}x")
PY
echo "# raw results in $OUT" >&2
