#!/usr/bin/env bash
# Scale-out benchmark (see docs/scale-out.md): one batch of ITEMS items (a
# model call, a Python sandbox step, a model call; the fake model answers
# after LATENCY_MS) run by a local flowrun batch and by 1, 2 and 4
# flowrun worker processes through an embedded NATS JetStream server.
# Prints items/minute for each, the scaling ratios against one worker, and
# the coordination overhead per item of one worker against a local batch
# of the same concurrency (2).
#
#   bench/scaleout.sh                 # ITEMS=32 LATENCY_MS=300 SANDBOX=1 COUNT=1
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ITEMS=${ITEMS:-32}
LATENCY_MS=${LATENCY_MS:-300}
COUNT=${COUNT:-1}
SANDBOX=${SANDBOX:-1}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/flowrun-scaleout.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
echo "# load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown) on $(nproc) cores" >&2
FLOWRUN_BENCH_ITEMS=$ITEMS FLOWRUN_BENCH_LATENCY_MS=$LATENCY_MS FLOWRUN_BENCH_SANDBOX=$SANDBOX \
	go test ./cmd/flowrun -run '^$' -bench BenchmarkClusterScaleOut -benchtime 1x -count "$COUNT" | tee "$OUT/bench.txt" >&2
awk -v items="$ITEMS" -v latency="$LATENCY_MS" -v sandbox="$SANDBOX" '
	/BenchmarkClusterScaleOut\// {
		split($1, name, "/"); sub(/-[0-9]+$/, "", name[2])
		for (i = 1; i <= NF; i++) if ($i == "items/min") { sum[name[2]] += $(i-1); n[name[2]]++ }
	}
	END {
		for (k in sum) ipm[k] = sum[k] / n[k]
		printf "scaleout items=%d latency_ms=%d sandbox=%s local_ipm=%.0f w1_ipm=%.0f w2_ipm=%.0f w4_ipm=%.0f", items, latency, sandbox, ipm["local"], ipm["workers=1"], ipm["workers=2"], ipm["workers=4"]
		printf " ratio_w2=%.2f ratio_w4=%.2f target_w2=1.8", ipm["workers=2"] / ipm["workers=1"], ipm["workers=4"] / ipm["workers=1"]
		# Per item, at concurrency 2: 2 * (60 s / items per minute).
		printf " overhead_ms_per_item=%.0f\n", 2 * 60000 * (1 / ipm["workers=1"] - 1 / ipm["local"])
	}' "$OUT/bench.txt"
