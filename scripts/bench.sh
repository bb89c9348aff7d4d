#!/usr/bin/env bash
# Runs the evaluator benchmarks and measures the startup cost of
# `aml run examples/hello.star`: wall time and maximum resident set size of
# N runs of the built binary under /usr/bin/time -v.
#
# Usage: scripts/bench.sh
#
# Environment:
#   N=10             runs of `aml run` to time
#   BENCHTIME=3x     -benchtime of the wide benchmarks
#   NESTTIME=1x      -benchtime of BenchmarkNest100k
#   BENCH=.          -bench regexp of the wide benchmarks
#   SKIP_BENCH=1     skip the Go benchmarks
#   SKIP_STARTUP=1   skip the `aml run` measurement
set -euo pipefail

cd "$(dirname "$0")/.."

N=${N:-10}
BENCHTIME=${BENCHTIME:-3x}
NESTTIME=${NESTTIME:-1x}
BENCH=${BENCH:-.}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [[ -z ${SKIP_BENCH:-} ]]; then
	echo "== go benchmarks (./eval, -benchtime=$BENCHTIME; Nest100k -benchtime=$NESTTIME)"
	# The wide benchmarks, then the deep chain on its own: one 100,000-agent
	# chain is enough for a stable figure and takes far longer per op.
	go test -run='^$' -bench="$BENCH" -skip='Nest100k' -benchtime="$BENCHTIME" -benchmem ./eval/
	if [[ $BENCH == . || Nest100k =~ $BENCH ]]; then
		go test -run='^$' -bench='Nest100k' -benchtime="$NESTTIME" -benchmem ./eval/
	fi
fi

if [[ -n ${SKIP_STARTUP:-} ]]; then
	exit 0
fi

echo
echo "== aml run startup ($N runs)"
if [[ ! -x /usr/bin/time ]]; then
	echo "/usr/bin/time is missing; install GNU time to measure startup:" >&2
	echo "    apt-get install time" >&2
	echo "skipping the startup measurement" >&2
	exit 0
fi

bin=$tmp/aml
go build -o "$tmp/" ./cmd/aml ./cmd/aml-full

workflow=examples/hello.star
if [[ ! -f $workflow ]]; then
	workflow=$tmp/hello.star
	cat >"$workflow" <<'EOF'
echo = deterministic_agent(respond = lambda req: "Resolved: " + req.prompt)

def main():
    return agent("Explain what AML evaluates.", provider = echo)
EOF
	echo "(examples/hello.star does not exist; timing a copy in $workflow)"
fi

# One untimed run checks the workflow and warms the page cache.
"$bin" run --quiet "$workflow" >/dev/null

# GNU time reports the elapsed time in hundredths of a second, too coarse
# for a run that takes a few milliseconds, so the wall time is taken from
# the clock around each run (it includes starting /usr/bin/time itself);
# the maximum RSS comes from time -v.
now_ns() { date +%s%N; }

walls=()
rss=()
for ((i = 1; i <= N; i++)); do
	out=$tmp/time.$i
	start=$(now_ns)
	if ! /usr/bin/time -v -o "$out" "$bin" run --quiet "$workflow" >/dev/null; then
		echo "run $i failed:" >&2
		cat "$out" >&2
		exit 1
	fi
	end=$(now_ns)
	walls+=("$(awk -v ns="$((end - start))" 'BEGIN { printf "%.2f", ns / 1e6 }')")
	rss+=("$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$out")")
	printf 'run %2d: wall %s ms  max RSS %s KiB  (time -v elapsed %s)\n' "$i" "${walls[-1]}" "${rss[-1]}" \
		"$(sed -n 's/^[[:space:]]*Elapsed (wall clock) time.*: //p' "$out")"
done

summary() {
	sort -n | awk '{ v[NR] = $1; s += $1 } END {
		printf "min %s  median %s  max %s  mean %.2f\n", v[1], v[int((NR + 1) / 2)], v[NR], s / NR }'
}
echo "wall time (ms):     $(printf '%s\n' "${walls[@]}" | summary)"
echo "max RSS (KiB):      $(printf '%s\n' "${rss[@]}" | summary)"
