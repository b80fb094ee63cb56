#!/usr/bin/env bash
# Runs flowrun's benchmark suite and, when ../shared/bench/langgraph exists,
# the LangGraph.js peer's, back to back on this machine, and prints a table
# of ratios LangGraph.js / flowrun per configuration: time per loop step or
# fan-out branch (warm median), and peak RSS. Above 1, flowrun is faster or
# smaller. See docs/performance.md.
#
#   bench/compare.sh            # about 15 minutes (the peer's K=10000 fan-out alone takes over a minute)
#   QUICK=1 bench/compare.sh    # N=1000 loops and K=1000 fan-outs: about 2.5 minutes
#
# Knobs:
#   QUICK=1          the short suites
#   REPEATS=5        warm runs per configuration (both suites; the peer uses
#                    REPEATS_BIG=3 for N=10000)
#   LG_DIR=DIR       the peer's sources (default: ../shared/bench/langgraph
#                    beside the repository)
#   LG_BIG_FANOUT=0  skip the peer's K=10000 fan-out (it is on in a full run)
#   BENCH_CACHE=DIR  where the peer is copied and its npm packages installed
#                    (default: ${XDG_CACHE_HOME:-~/.cache}/flowrun/langgraph-bench);
#                    the peer's own directory is never written to
#   OUT=DIR          where the raw results go (default: a new temporary directory)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
QUICK=${QUICK:-0}
REPEATS=${REPEATS:-5}
LG_DIR=${LG_DIR:-$root/../shared/bench/langgraph}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/flowrun-compare.XXXXXX")}
mkdir -p "$OUT"

echo "# building the benchmark" >&2
go build -o "$OUT/flowrun-bench" ./cmd/bench

load() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown; }

echo "# flowrun suite (QUICK=$QUICK), load average $(load)" >&2
QUICK=$QUICK REPEATS=$REPEATS "$OUT/flowrun-bench" | tee "$OUT/flowrun.txt" >&2

peer=0
if [[ -d "$LG_DIR" && -f "$LG_DIR/run.sh" ]]; then
	peer=1
	cache=${BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flowrun/langgraph-bench}
	mkdir -p "$cache"
	# A fresh copy of the peer's files (they may be read-only), keeping
	# the installed packages unless package.json changed.
	chmod -R u+w "$cache" 2>/dev/null || true
	(cd "$LG_DIR" && tar --exclude=./node_modules --exclude=./tmp --exclude=./package-lock.json -cf - .) | (cd "$cache" && tar -xf -)
	chmod -R u+w "$cache" 2>/dev/null || true
	sum=$(cksum < "$cache/package.json")
	if [[ ! -f "$cache/.package.cksum" || "$(cat "$cache/.package.cksum")" != "$sum" ]]; then
		rm -rf "$cache/node_modules"
		echo "$sum" > "$cache/.package.cksum"
	fi
	[[ -d "$cache/node_modules" ]] || echo "# installing the peer's npm packages in $cache (about 75 s, once)" >&2
	big=0
	[[ "$QUICK" != 1 ]] && big=${LG_BIG_FANOUT:-1}
	echo "# LangGraph.js suite (QUICK=$QUICK BIG_FANOUT=$big), load average $(load)" >&2
	(cd "$cache" && QUICK=$QUICK REPEATS=$REPEATS BIG_FANOUT=$big ./run.sh) | tee "$OUT/langgraph.txt" >&2
else
	echo "# no peer benchmark at $LG_DIR: flowrun's figures alone" >&2
	: > "$OUT/langgraph.txt"
fi
echo "# done, load average $(load); raw results in $OUT" >&2

# The table: one row per flowrun configuration, in the suite's order.
awk -v peer="$peer" '
function field(line, key,    re, m) {
	re = "(^| )" key "=[^ ]*"
	if (match(line, re)) {
		m = substr(line, RSTART, RLENGTH)
		sub(/^ /, "", m)
		return substr(m, length(key) + 2)
	}
	return ""
}
function per(line) { v = field(line, "us_per_step"); return v != "" ? v : field(line, "us_per_branch") }
function key(line) { return field(line, "mode") " " field(line, "n") " " field(line, "model") " " field(line, "ckpt") }
function ratio(a, b) { return (a != "" && b != "" && b + 0 > 0) ? sprintf("%.1fx", a / b) : "-" }
function mb(kb) { return kb != "" ? sprintf("%.0f", kb / 1024) : "-" }
FNR == 1 { file++ }
/^# date=/ && file == 1 { meta = $0 }
$1 == "lg" && file == 2 && $0 !~ /FAILED/ { lg[key($0)] = $0 }
$1 == "flowrun" && file == 1 && field($0, "mode") != "baseline_imports_only" { rows[++n] = $0 }
$1 == "flowrun" && field($0, "mode") == "baseline_imports_only" { fbase = field($0, "peak_rss_kb") }
$1 == "lg" && field($0, "mode") == "baseline_imports_only" { lbase = field($0, "peak_rss_kb") }
END {
	print ""
	print meta
	print "| mode | n | model | ckpt | LangGraph.js us | flowrun us | time ratio | LangGraph.js MB | flowrun MB | RSS ratio |"
	print "|---|---|---|---|---:|---:|---:|---:|---:|---:|"
	for (i = 1; i <= n; i++) {
		f = rows[i]
		if (f ~ /FAILED/) { print "| " key(f) " | FAILED |"; continue }
		k = key(f); l = (k in lg) ? lg[k] : ""
		split(k, p, " ")
		lus = l != "" ? per(l) : ""
		lrss = l != "" ? field(l, "peak_rss_kb") : ""
		printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p[1], p[2], p[3], p[4],
			(lus != "" ? lus : "-"), per(f), ratio(lus, per(f)),
			mb(lrss), mb(field(f, "peak_rss_kb")), ratio(lrss, field(f, "peak_rss_kb"))
	}
	if (lbase != "")
		printf "\nPeak RSS of the bare process (imports only): LangGraph.js %s MB, flowrun %s MB.\n", mb(lbase), mb(fbase)
	else if (fbase != "")
		printf "\nPeak RSS of flowrun'"'"'s bare process: %s MB.\n", mb(fbase)
	if (!peer) print "\n(no LangGraph.js figures: ../shared/bench/langgraph is absent)"
}' "$OUT/flowrun.txt" "$OUT/langgraph.txt"
