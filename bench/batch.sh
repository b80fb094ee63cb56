#!/usr/bin/env bash
# Batch benchmarks (see docs/batch.md):
#  1. overhead: 10,000 items through a one-llm-node pipeline against the
#     in-process fake model at zero latency: µs per item and peak RSS
#     (targets: under 1000 µs and 300 MB);
#  2. throughput: a batch against a local fake OpenAI server that enforces
#     an rpm limit and answers with realistic latency: requests per minute
#     achieved as a fraction of the limit (target: at least 0.95) and items
#     failed by a 429 (target: none). The server is
#     ../shared/bench/promptfoo/fake_openai.py beside the repository when it
#     is present (FAKE_SERVER=FILE to use another); without it this part is
#     skipped, and says so.
#
#   bench/batch.sh                  # ITEMS=10000 RPM=600 LATENCY_MS=300
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ITEMS=${ITEMS:-10000}
RPM=${RPM:-600}
LATENCY_MS=${LATENCY_MS:-300}
FAKE_SERVER=${FAKE_SERVER:-$root/../shared/bench/promptfoo/fake_openai.py}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/flowrun-batch-bench.XXXXXX")
trap 'rm -rf "$OUT"; [ -n "${server:-}" ] && kill "$server" 2>/dev/null || true' EXIT

echo "# load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown) on $(nproc) cores" >&2
go test -c -o "$OUT/batch.test" ./batch

# Peak RSS of the whole benchmark process (the fake server included).
rss() { awk '/Maximum resident/ {print $NF}' "$1"; }
/usr/bin/time -v "$OUT/batch.test" -test.run '^$' -test.bench BatchOverhead -test.benchtime "${ITEMS}x" >"$OUT/overhead.txt" 2>"$OUT/overhead.time"
us=$(awk '/BenchmarkBatchOverhead/ {for (i=1;i<=NF;i++) if ($i=="us/item") print $(i-1)}' "$OUT/overhead.txt")
kb=$(rss "$OUT/overhead.time")
echo "overhead items=$ITEMS us_per_item=$us peak_rss_mb=$((kb / 1024)) target_us=1000 target_mb=300 ratio_us=$(awk -v u="$us" 'BEGIN {printf "%.2f", u/1000}') ratio_mb=$(awk -v k="$kb" 'BEGIN {printf "%.2f", k/1024/300}')"

if [ ! -f "$FAKE_SERVER" ]; then
	echo "throughput skipped: no rate-limited fake server at $FAKE_SERVER (set FAKE_SERVER)"
	exit 0
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 "$FAKE_SERVER" "$port" --rpm "$RPM" --latency-ms "$LATENCY_MS" &
server=$!
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/stats" >/dev/null 2>&1 && break; sleep 0.1; done
FLOWRUN_BENCH_URL="http://127.0.0.1:$port/v1" FLOWRUN_BENCH_RPM=$RPM "$OUT/batch.test" -test.run '^$' -test.bench BatchThroughput -test.benchtime 1x >"$OUT/throughput.txt"
stats=$(curl -fs "http://127.0.0.1:$port/stats")
metric() { awk -v m="$1" '/BenchmarkBatchThroughput/ {for (i=1;i<=NF;i++) if ($i==m) print $(i-1)}' "$OUT/throughput.txt"; }
echo "throughput server=$(basename "$FAKE_SERVER") rpm=$RPM latency_ms=$LATENCY_MS items=$(metric items) rpm_fraction=$(metric rpm_fraction) failed_items=$(metric failed_items) server_stats=$stats target_fraction=0.95"
