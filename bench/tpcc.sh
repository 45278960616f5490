#!/usr/bin/env bash
# TPC-C (go-tpc, issue #45's OLTP mix) on Pinax and stock PostgreSQL 15 side by
# side (bench/lib.sh: both with fsync on; PINAX_NODES=3 runs Pinax as a local
# 3-node cluster, replication factor 3). Each system is loaded once (`go-tpc tpcc
# prepare`, timed), then ROUNDS runs of SECS seconds each, the systems taking
# turns to go first. Per run: tpmC (new orders a minute), the average latency of
# each transaction kind, errors, and the servers' CPU per new order (all of
# Pinax's daemons plus its PostgreSQL, the daemons' share in parentheses;
# PostgreSQL's postmaster and backends).
# Prints medians, spread and the Pinax/PostgreSQL ratio. CHECK=1 also runs
# go-tpc's consistency checks after the rounds (at most CHECK_SECS each system).
#
# go-tpc: GO_TPC (default ~/.cache/pinax/go-bin/go-tpc). Its only tagged release
# on the Go module proxy (v1.0.7) speaks MySQL alone; PostgreSQL support is in
# later commits, which the proxy does not serve: build it from source (git clone
# https://github.com/pingcap/go-tpc, at 682637f or later; go build ./cmd/go-tpc)
# and put the binary there. Measured with 682637f.
# Environment: WAREHOUSES (2), THREADS (4), SECS (60), ROUNDS (2), CHECK (0),
# CHECK_SECS (600), PINAX_NODES (1), PINAX_BIN (default: the perf build), GO_TPC,
# PINAX_THREADS=1 (the daemons' CPU of each run by thread kind).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
warehouses="${WAREHOUSES:-2}"; threads="${THREADS:-4}"; secs="${SECS:-60}"; rounds="${ROUNDS:-2}"
tpc="${GO_TPC:-$HOME/.cache/pinax/go-bin/go-tpc}"
if [[ ! -x $tpc ]] || ! "$tpc" --help 2>&1 | grep -q -- --conn-params; then
  echo "no go-tpc with PostgreSQL support at $tpc: build it from https://github.com/pingcap/go-tpc (682637f or later: go build ./cmd/go-tpc) and set GO_TPC" >&2
  exit 1
fi
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
pinax_password=$(awk -F: 'NR == 1 {print $5}' "$PGPASSFILE")
tpc_args() {
  local a=(-d postgres -U "$user" -H 127.0.0.1 -P "$(port_of "$1")" -D tpcc --conn-params sslmode=disable --warehouses "$warehouses")
  [[ $1 == pinax && -n $pinax_password ]] && a+=(-p "$pinax_password")
  echo "${a[@]}"
}
out="$dir/out"; mkdir -p "$out"
echo "TPC-C (go-tpc): $warehouses warehouses, $threads threads, $secs s a run, $rounds rounds, Pinax on ${nodes} node(s)"
for sys in pinax stock; do
  psql_on $sys -c "CREATE DATABASE tpcc" >/dev/null
  t0=$(date +%s.%N)
  # shellcheck disable=SC2046
  if ! "$tpc" tpcc prepare $(tpc_args $sys) -T "$threads" --no-check >"$out/prepare-$sys.log" 2>&1 || grep -qiE "^error" "$out/prepare-$sys.log"; then
    echo "$sys: prepare failed:"; tail -5 "$out/prepare-$sys.log"; exit 1
  fi
  printf '%-6s prepare: %.0f s\n' "$sys" "$(echo "$(date +%s.%N) - $t0" | bc)"
  wait_idle $sys
done

declare -A tpmc cpu_per err
kinds="NEW_ORDER PAYMENT ORDER_STATUS DELIVERY STOCK_LEVEL"
declare -A lat
for r in $(seq 1 "$rounds"); do
  order="pinax stock"; (( r % 2 == 0 )) && order="stock pinax"
  for sys in $order; do
    log="$out/run-$sys-$r.log"
    c0=$(cpu_of $sys); [[ $sys == pinax ]] && { d0=$(daemon_cpu); th0=$(daemon_threads); }
    # shellcheck disable=SC2046
    "$tpc" tpcc run $(tpc_args $sys) -T "$threads" --time "${secs}s" >"$log" 2>&1 || { echo "$sys round $r: run failed"; tail -5 "$log"; }
    c1=$(cpu_of $sys); [[ $sys == pinax ]] && { d1=$(daemon_cpu); th1=$(daemon_threads); }
    t=$(awk -F'[:,]' '/^tpmC:/ {print $2 + 0}' "$log" | tail -1)
    n=$(awk '/^\[Summary\] NEW_ORDER -/ {for (i = 1; i <= NF; i++) if ($i == "Count:") print $(i + 1) + 0}' "$log" | tail -1)
    tpmc[$sys,$r]=${t:--}
    cpu_per[$sys,$r]=$(ratio "$(( (c1 - c0) * 1000 / tck ))" "${n:-0}" %.1f)
    err[$sys,$r]=$(awk '/^\[Summary\] [A-Z_]+_ERR -/ {for (i = 1; i <= NF; i++) if ($i == "Count:") s += $(i + 1)} END {print s + 0}' "$log")
    for k in $kinds; do
      lat[$sys,$k,$r]=$(awk -v k="$k" '$1 == "[Summary]" && $2 == k {for (i = 1; i <= NF; i++) if ($i == "Avg(ms):") print $(i + 1) + 0}' "$log" | tail -1)
    done
    split=""
    [[ $sys == pinax ]] && split=" (daemon $(ratio "$(( (d1 - d0) * 1000 / tck ))" "${n:-0}" %.1f))"
    printf 'round %d %-6s tpmC %8s  server CPU %6s ms/new order%s  errors %s  avg ms:' "$r" "$sys" "${tpmc[$sys,$r]}" "${cpu_per[$sys,$r]}" "$split" "${err[$sys,$r]}"
    for k in $kinds; do printf ' %s %s' "$k" "${lat[$sys,$k,$r]:--}"; done
    echo
    # Where the daemons' CPU went (ms by thread kind), with PINAX_THREADS=1.
    [[ $sys == pinax && -n ${PINAX_THREADS:-} ]] && echo "  daemon threads (ms): $(threads_diff "$th0" "$th1")"
    wait_idle $sys
  done
done
echo
series() { local -n a=$1; for r in $(seq 1 "$rounds"); do echo -n "${a[$2,$r]} "; done; }
for sys in pinax stock; do
  printf '%-6s tpmC median %8s (%s)  CPU/new order median %6s ms (%s)\n' "$sys" \
    "$(series tpmc $sys | median)" "$(series tpmc $sys | spread)" "$(series cpu_per $sys | median)" "$(series cpu_per $sys | spread)"
done
p=$(series tpmc pinax | median)
s=$(series tpmc stock | median)
echo "Pinax/PostgreSQL tpmC: $(ratio "$p" "$s")"
if [[ ${CHECK:-0} == 1 ]]; then
  for sys in pinax stock; do
    t0=$(date +%s)
    # shellcheck disable=SC2046
    if timeout "${CHECK_SECS:-600}" "$tpc" tpcc check $(tpc_args $sys) >"$out/check-$sys.log" 2>&1; then
      echo "$sys check: passed in $(( $(date +%s) - t0 )) s"
    else
      echo "$sys check: FAILED or timed out after $(( $(date +%s) - t0 )) s:"; tail -3 "$out/check-$sys.log"
    fi
  done
fi
