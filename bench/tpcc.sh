#!/usr/bin/env bash
# TPC-C (go-tpc, issue #45's OLTP mix) on Pinax and stock PostgreSQL 15 side by
# side (bench/lib.sh: both with fsync on; PINAX_NODES=3 runs Pinax as a local
# 3-node cluster, replication factor 3). Each system is loaded once (`go-tpc tpcc
# prepare`, timed), then ROUNDS runs of SECS seconds each, the systems taking
# turns to go first. Per run: tpmC (new orders a minute), the average latency of
# each transaction kind, errors, and the servers' CPU per new order (all of
# Pinax's daemons plus its PostgreSQL; PostgreSQL's postmaster and backends).
# Prints medians, spread and the Pinax/PostgreSQL ratio. CHECK=1 also runs
# go-tpc's consistency checks after the rounds (at most CHECK_SECS each system).
#
# go-tpc is installed with `go install github.com/pingcap/go-tpc/cmd/go-tpc@v1.0.7`
# into $HOME/.cache/pinax/go-bin the first time (needs `go` on PATH or in
# /usr/local/go/bin, and the Go module proxy).
# Environment: WAREHOUSES (2), THREADS (4), SECS (60), ROUNDS (2), CHECK (0),
# CHECK_SECS (600), PINAX_NODES (1), PINAX_BIN (default: the perf build).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
warehouses="${WAREHOUSES:-2}"; threads="${THREADS:-4}"; secs="${SECS:-60}"; rounds="${ROUNDS:-2}"
gotpc_version=v1.0.7
gobin="$HOME/.cache/pinax/go-bin"
tpc="$gobin/go-tpc"
if [[ ! -x $tpc ]]; then
  PATH="$PATH:/usr/local/go/bin"
  command -v go >/dev/null || { echo "go-tpc needs Go to be built: install go (https://go.dev/dl) or put go-tpc at $tpc" >&2; exit 1; }
  echo "building go-tpc $gotpc_version into $gobin"
  GOBIN="$gobin" go install "github.com/pingcap/go-tpc/cmd/go-tpc@$gotpc_version"
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
echo "TPC-C (go-tpc $gotpc_version): $warehouses warehouses, $threads threads, $secs s a run, $rounds rounds, Pinax on ${nodes} node(s)"
for sys in pinax stock; do
  psql_on $sys -c "CREATE DATABASE tpcc" >/dev/null
  t0=$(date +%s.%N)
  # shellcheck disable=SC2046
  if ! "$tpc" tpcc prepare $(tpc_args $sys) -T "$threads" --no-check >"$out/prepare-$sys.log" 2>&1; then
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
    c0=$(cpu_of $sys)
    # shellcheck disable=SC2046
    "$tpc" tpcc run $(tpc_args $sys) -T "$threads" --time "${secs}s" >"$log" 2>&1 || { echo "$sys round $r: run failed"; tail -5 "$log"; }
    c1=$(cpu_of $sys)
    t=$(awk -F'[:,]' '/^tpmC:/ {print $2 + 0}' "$log" | tail -1)
    n=$(awk '/^\[Summary\] NEW_ORDER -/ {for (i = 1; i <= NF; i++) if ($i == "Count:") print $(i + 1) + 0}' "$log" | tail -1)
    tpmc[$sys,$r]=${t:--}
    cpu_per[$sys,$r]=$(ratio "$(( (c1 - c0) * 1000 / tck ))" "${n:-0}" %.1f)
    err[$sys,$r]=$(awk '/^\[Summary\] [A-Z_]+_ERR -/ {for (i = 1; i <= NF; i++) if ($i == "Count:") s += $(i + 1)} END {print s + 0}' "$log")
    for k in $kinds; do
      lat[$sys,$k,$r]=$(awk -v k="$k" '$1 == "[Summary]" && $2 == k {for (i = 1; i <= NF; i++) if ($i == "Avg(ms):") print $(i + 1) + 0}' "$log" | tail -1)
    done
    printf 'round %d %-6s tpmC %8s  server CPU %6s ms/new order  errors %s  avg ms:' "$r" "$sys" "${tpmc[$sys,$r]}" "${cpu_per[$sys,$r]}" "${err[$sys,$r]}"
    for k in $kinds; do printf ' %s %s' "$k" "${lat[$sys,$k,$r]:--}"; done
    echo
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
