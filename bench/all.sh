#!/usr/bin/env bash
# `make bench`: every side-by-side benchmark in one run, then a summary table of the
# Pinax/PostgreSQL ratios against issue #6's targets.
#
# Each script's output goes to the terminal and to $BENCH_OUT/<name>.txt; the summary
# (machine, date, commit, ratios, targets, met or not) to $BENCH_OUT/summary.txt and
# the terminal. BENCH_OUT defaults to a new directory under /tmp; commit what you
# want to keep under bench/results/.
#
# Sizes (environment): SEED_ROWS (1000000), SEED_ROUNDS (3), YCSB_RECORDS ("100000
# 1000000": one full YCSB run per size), YCSB_SECS (10), YCSB_ROUNDS (3),
# INSERT_SECS (10), COPY_ROWS (1000000), INSERT_ROUNDS (3). The daemon: PINAX_BIN,
# else the `perf` build.
# Every figure in the summary is a median over the rounds (the systems take turns to
# go first), every ratio the median of the rounds' ratios, with their spread
# (lowest-highest ratio of a round): this machine's run-to-run noise is of the order
# of the differences the ratios are read for.
# BENCH_SUMMARY_ONLY=1 with BENCH_OUT=DIR: only print the summary of the outputs in DIR.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${BENCH_OUT:-$(mktemp -d /tmp/pinax-bench-results.XXXXXX)}"
mkdir -p "$out"
bin="${PINAX_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/pinax/target}/perf/pinax}"
export PINAX_BIN="$bin"

run() {
  local name=$1; shift
  echo "=== $name: $*"
  "$@" 2>&1 | tee "$out/$name.txt"
}

if [[ -z "${BENCH_SUMMARY_ONLY:-}" ]]; then
run client-writes bash "$root/bench/client_writes.sh"
run seed bash "$root/bench/seed.sh" "${SEED_ROWS:-1000000}" "${SEED_ROUNDS:-3}"
run filters bash "$root/bench/filters.sh"
for n in ${YCSB_RECORDS:-100000 1000000}; do
  run "ycsb-$n" bash "$root/bench/ycsb.sh" "$n" "${YCSB_SECS:-10}" 4 "${YCSB_ROUNDS:-3}"
done
run inserts bash "$root/bench/inserts.sh" "${INSERT_SECS:-10}" "${COPY_ROWS:-1000000}" "${INSERT_ROUNDS:-3}"
run sequences bash "$root/bench/sequences.sh"
run failover bash "$root/bench/failover.sh"
fi

# The summary: one line per target of issue #6.
{
  echo "# make bench summary: $(date -u '+%F %H:%M') UTC, $(nproc) cores, commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "# one node, one replica, fsync and synchronous commit on; ratios Pinax/PostgreSQL from the same run:"
  echo "# medians over the rounds (seed $(awk '/^seed workload/ { print $7; exit }' "$out/seed.txt"), YCSB and inserts as their headers say), range = lowest-highest ratio of a round"
  printf "%-30s %12s %12s %8s %11s %10s %5s\n" metric pinax postgresql ratio range target met
  line() { # metric pinax postgresql ratio range target ("<=1.5", ">=0.8", "-": none)
    local met
    met=$(awk -v r="$4" -v t="$6" 'BEGIN { op = substr(t, 1, 2); v = substr(t, 3) + 0;
      if (r == "-" || r == "" || t == "-") print "-"; else if (op == "<=") print (r + 0 <= v ? "yes" : "no"); else print (r + 0 >= v ? "yes" : "no") }')
    printf "%-30s %12s %12s %8s %11s %10s %5s\n" "$1" "$2" "$3" "$4" "$5" "$6" "$met"
  }
  # seed.sh medians: step pinax_cpu_ms pg_cpu_ms cpu_x cpu_x_range
  while read -r step pc sc cx range; do
    line "seed $step cpu ms" "$pc" "$sc" "$cx" "$range" "<=1.5"
  done < <(awk '/^medians over/ { m = 1 } m && $1 ~ /^(insert1|insert2|update|count|delete)$/ && NF == 5 { print $1, $2, $3, $4, $5 }' "$out/seed.txt")
  # ycsb.sh: workload pinax_tps pg_tps tps_x pinax_cpu_us pg_cpu_us cpu_x retried tps_x_range
  for n in ${YCSB_RECORDS:-100000 1000000}; do
    while read -r w pt st tx range; do
      t=">=0.8"; [[ $w == E ]] && t=">=0.5"
      line "ycsb $w $n records tps" "$pt" "$st" "$tx" "$range" "$t"
    done < <(awk '$1 ~ /^[ABCEF]$/ && NF == 9 { print $1, $2, $3, $4, $9 }' "$out/ycsb-$n.txt")
  done
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
  # inserts.sh: medians per system (system rows_per_s p50_ms p99_ms copy_ms copy_cpu_ms),
  # then "ratios" (median and range of rows/s, COPY wall, COPY CPU).
  read -r pr pp50 pc pcc < <(awk '$1 == "pinax" && NF == 6 { print $2, $3, $5, $6 }' "$out/inserts.txt")
  read -r sr sp50 sc scc < <(awk '$1 == "stock" && NF == 6 { print $2, $3, $5, $6 }' "$out/inserts.txt")
  read -r rx rr wx wr cx cr < <(awk '$1 == "ratios" && NF == 7 { print $2, $3, $4, $5, $6, $7 }' "$out/inserts.txt")
  line "single-client inserts rows/s" "$pr" "$sr" "$rx" "$rr" ">=0.8"
  line "single-client inserts rows/s" "$pr" "-" "$pr" "-" ">=10000"
  line "single-client insert p50 ms" "$pp50" "$sp50" "$(ratio "$pp50" "$sp50")" "-" "-"
  line "COPY ${COPY_ROWS:-1000000} rows wall ms" "$pc" "$sc" "$wx" "$wr" "-"
  line "COPY ${COPY_ROWS:-1000000} rows cpu ms" "$pcc" "$scc" "$cx" "$cr" "-"
  echo "# per-script output: $out/*.txt"
} | tee "$out/summary.txt"
