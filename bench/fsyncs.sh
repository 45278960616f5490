#!/usr/bin/env bash
# fsyncs of one node daemon per write (issue #41: with one Raft log per data
# directory, writes to different tablets that arrive together share an fsync).
# Not a test. Needs strace. Runs the daemon under `strace -f` (fdatasync and
# fsync calls of every thread), drives it with pinax-bench, and counts the calls
# made during each of pinax-bench's phases (a phase ends when pinax-bench prints its
# line, the next starts there), and per row or per batch.
# Usage: bench/fsyncs.sh [SINGLE_ROWS] [BATCHES] [THREADS] [--no-sync]
#   PINAX_BIN: the daemon (default: the dev build); PINAX_BENCH_BIN: the client.
set -euo pipefail
cd "$(dirname "$0")/.."
T=${CARGO_TARGET_DIR:-$HOME/.cache/pinax/target}
bin=${PINAX_BIN:-$T/debug/pinax}
bench=${PINAX_BENCH_BIN:-$T/debug/pinax-bench}
single=${1:-2000}
batches=${2:-100}
threads=${3:-4}
sync_flag=${4:-}
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
trace=$dir/strace.out
marks=$dir/marks
# shellcheck disable=SC2086
strace -f -qq -ttt -e trace=fdatasync,fsync -o "$trace" "$bin" run --data-dir "$dir/node" --port "$port" --block-cache-mb 64 $sync_flag >"$dir/log" 2>&1 &
spid=$!
trap '"$bin" stop --data-dir "$dir/node" >/dev/null 2>&1 || true; wait $spid 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 1 300); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
sleep 3 # the master group and the node's status tablet settle
echo "# fsyncs per phase: $(date -u +%FT%TZ), daemon $bin, fsync: ${sync_flag:-on}, $single single rows, $batches batches, $threads threads"
idle_from=$(date +%s.%N)
sleep 5
idle_to=$(date +%s.%N)
"$bench" --addr "127.0.0.1:$port" --certs-dir "$dir/node/certs" --single-rows "$single" --batches "$batches" --threads "$threads" | while IFS= read -r line; do
  echo "$(date +%s.%N) $line" >>"$marks"
done
sleep 0.5
count() { awk -v a="$1" -v b="$2" '$2 + 0 >= a + 0 && $2 + 0 < b + 0 && /(fdatasync|fsync)\(/ { n++ } END { print n + 0 }' "$trace"; }
printf '%-44s %8s %10s %12s\n' phase fsyncs per "fsyncs/s"
n=$(count "$idle_from" "$idle_to")
printf '%-44s %8d %10s %12.1f\n' "idle (5 s)" "$n" "-" "$(echo "$n / 5" | bc -l)"
prev=""
while IFS= read -r l; do
  t=${l%% *}
  rest=${l#* }
  if [[ -n $prev ]]; then
    name=$(echo "$rest" | sed -E 's/ +[0-9]+ rows .*//')
    rows=$(echo "$rest" | sed -nE 's/.* ([0-9]+) rows .*/\1/p')
    secs=$(echo "$rest" | sed -nE 's/.* rows +([0-9.]+) s .*/\1/p')
    n=$(count "$prev" "$t")
    unit=rows
    [[ $name == 1000-row* ]] && rows=$((rows / 1000)) && unit=batches
    per="-"
    [[ ${rows:-0} -gt 0 ]] && per=$(printf '%.3f/%s' "$(echo "$n / $rows" | bc -l)" "${unit%s}")
    printf '%-44s %8d %10s %12.1f\n' "$name" "$n" "$per" "$(echo "$n / ${secs:-1}" | bc -l)"
  fi
  prev=$t
done <"$marks"
