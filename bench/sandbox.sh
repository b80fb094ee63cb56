#!/usr/bin/env bash
# Sandbox benchmark (see docs/sandbox.md, "Measured"): warm Python calls,
# which start from the pre-initialised interpreter, against a native python3
# subprocess doing the same work, run back to back on the same machine.
#
#   bench/sandbox.sh          # COUNT=10 (calls per variant)
#
# It compares:
#   trivial   a function returning 1: the sandbox's warm call against
#             `python3 -c` (target: warm call at most 5 ms)
#   worker    a warm call inside the worker (BenchmarkCallInWorker, no pipe):
#             the trivial function and one scoring candidate
#   arc       the ARC flood-fill transform on a 30x30 grid (target: at most
#             0.2x native)
#   arc-numpy the same written with numpy, native python3 importing numpy
#             too (target: at most 0.3x native); skipped when the sandbox's
#             Python was built without numpy
#   map       a map of code nodes scoring 1,000 candidate transforms against
#             4 train pairs, at max_concurrency 2 and 8, against as many
#             native subprocesses at once (target: at least 100
#             transforms/s on 2 cores), and how many workers each started
#   pool      the same map against the baseline a Python ARC harness uses:
#             a persistent multiprocessing pool of as many workers that
#             exec()s each candidate, without isolation, run back to back
#             with the map (target: within 3x of the pool, at least 1,000
#             transforms/s at max_concurrency 2)
#
# The native interpreter is PYTHON (default /usr/bin/python3, Debian's, with
# numpy from `apt-get install python3-numpy`), not a version manager's shim.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
COUNT=${COUNT:-10}
PYTHON=${PYTHON:-/usr/bin/python3}
[ -x "$PYTHON" ] || { echo "sandbox.sh: no $PYTHON; set PYTHON to a python3 interpreter" >&2; exit 2; }
OUT=$(mktemp -d "${TMPDIR:-/tmp}/flowrun-sandbox-bench.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
echo "# load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown) on $(nproc) cores; native: $PYTHON ($("$PYTHON" -c 'import sys; print(sys.version.split()[0])'), numpy $("$PYTHON" -c 'import numpy; print(numpy.__version__)' 2>/dev/null || echo absent))" >&2
export FLOWRUN_BENCH_PYTHON=$PYTHON
go test ./sandbox -run '^$' -bench 'BenchmarkWarmCall|BenchmarkCallInWorker|BenchmarkARCTransform$|BenchmarkARCTransformNumpy' \
	-benchtime "${COUNT}x" -count 1 -timeout 30m | tee "$OUT/bench.txt" >&2
go test ./nodes -run '^$' -bench BenchmarkCodeMapScoring -benchtime 1x -count 1 -timeout 30m | tee -a "$OUT/bench.txt" >&2
awk '
	function metric(name,   i) { for (i = 1; i <= NF; i++) if ($i == name) return $(i-1); return "" }
	/^BenchmarkWarmCall/ { printf "trivial   native %7.1f ms  sandbox warm %6.1f ms  ratio %.3f  (target: warm <= 5 ms)\n", metric("native_ms"), metric("warm_ms"), metric("warm_x_native") }
	/^BenchmarkCallInWorker\// {
		split($1, name, "/"); sub(/-[0-9]+$/, "", name[2])
		printf "worker    %-9s in the worker: %.2f ms from job to report, %.2f ms with making the next instance, %.2f ms CPU, %d page faults\n", name[2], metric("ms/call"), metric("ms/cycle"), metric("cpu_ms/cycle"), metric("faults/cycle")
	}
	/^BenchmarkARCTransform-/ { printf "arc       native %7.1f ms  sandbox warm %6.1f ms  ratio %.3f  (target: <= 0.2)  cold %.2fx  go %.2fx\n", metric("native_ms"), metric("warm_ms"), metric("warm_x_native"), metric("cold_x_native"), metric("go_x_native") }
	/^BenchmarkARCTransformNumpy-/ { numpy = 1; printf "arc-numpy native %7.1f ms  sandbox warm %6.1f ms  ratio %.3f  (target: <= 0.3)\n", metric("native_ms"), metric("warm_ms"), metric("warm_x_native") }
	/^BenchmarkCodeMapScoring\// {
		split($1, name, "/"); sub(/-[0-9]+$/, "", name[2])
		printf "map       %-17s sandbox %6.1f transforms/s  native %6.1f  ratio %.2f  workers %d  (target: >= 100/s)\n", name[2], metric("transforms/s"), metric("native_transforms/s"), metric("transforms/s") / metric("native_transforms/s"), metric("workers")
		printf "pool      %-17s sandbox %6.1f transforms/s  native pool %6.1f  pool is %.1fx faster  (target: within 3x, >= 1,000/s at 2)\n", name[2], metric("transforms/s"), metric("pool_transforms/s"), metric("pool_transforms/s") / metric("transforms/s")
	}
	END { if (!numpy) print "arc-numpy skipped: the sandbox or the native python3 has no numpy (see the go test output above)" }
' "$OUT/bench.txt"
echo "ratio: the sandbox's median time as a multiple of the native subprocess's (below 1 is faster); for map, the sandbox's rate over native's (above 1 is faster); for pool, how many times the native pool's rate is the sandbox's"
echo "# load average at the end $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
