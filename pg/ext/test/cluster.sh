#!/usr/bin/env bash
# Multi-node SQL test: a local 3-node cluster (`pinax cluster start --nodes 3`),
# tables with three replicas created through node 1's PostgreSQL, and the bank test
# (bank/bank.sh, all three isolation levels) while a non-master node is killed
# (SIGKILL) and restarted every few seconds. The bank test's checks (total
# unchanged, every committed transfer in the history once, no counter increment
# lost) must hold across the failovers.
#
# Usage: pg/ext/test/cluster.sh [SECONDS_PER_LEVEL]   (default 6)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${PINAX_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/pinax/target}/debug/pinax}"
secs="${1:-6}"

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_ports() {
  local p i ok
  for _ in $(seq 1 200); do
    # Below Linux's ephemeral range (32768+): an outgoing connection's local port
    # there is free to connect() but can make the node's bind fail.
    p=$(( 20000 + RANDOM % 12000 )); ok=1
    for i in 0 1 2 3; do port_free "$((p + i))" || ok=0; done
    if [[ $ok == 1 ]]; then echo "$p"; return; fi
  done
  echo "no free ports" >&2; exit 1
}
rpc=$(pick_ports)
pg=$((rpc + 3))
dir="$(mktemp -d /tmp/pinax-cluster.XXXXXX)"
chmod 755 "$dir"
superuser=postgres
[[ "$(id -u)" != 0 ]] && superuser="$(id -un)"
chaos_pid=
cleanup() {
  [[ -n "$chaos_pid" ]] && kill "$chaos_pid" 2>/dev/null && wait "$chaos_pid" 2>/dev/null
  "$bin" cluster stop --data-dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

if ! "$bin" cluster start --nodes 3 --data-dir "$dir" --base-port "$rpc" --pg-port "$pg" --tablets-per-node 2 >/dev/null; then
  for l in "$dir"/node-*/pinax.log; do echo "--- $l"; tail -20 "$l"; done >&2
  exit 1
fi
export PGHOST=127.0.0.1 PGPORT=$pg PGUSER=$superuser
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
psql_ -d postgres -c "CREATE DATABASE bank_cluster"
st=$("$bin" status --addr "127.0.0.1:$rpc")
grep -q "nodes: 3 live" <<<"$st" || { echo "cluster: the master does not see 3 nodes" >&2; exit 1; }
psql_ -d bank_cluster -c "CREATE TABLE probe (id int PRIMARY KEY, v text)" -c "INSERT INTO probe SELECT g, 'x' FROM generate_series(1, 100) g"
st=$("$bin" status --addr "127.0.0.1:$rpc")
replicas=$(awk '/^    tablet/ { n = split($NF, r, ","); print n }' <<<"$st" | sort -u)
[[ "$replicas" == 3 ]] || { echo "cluster: tablets of a new table have '$replicas' replicas, not 3" >&2; exit 1; }

# Kill node 2 or 3 (alternately) every few seconds, restarting the previous one.
(
  n=2
  while true; do
    sleep 3
    "$bin" cluster kill "$n" --data-dir "$dir" >/dev/null
    sleep 3
    "$bin" cluster restart "$n" --data-dir "$dir" >/dev/null
    n=$(( n == 2 ? 3 : 2 ))
  done
) &
chaos_pid=$!
status=0
"$here/bank/bank.sh" bank_cluster "$secs" 4 40 | sed 's/^bank/bank on 3 nodes with kills/' || status=1
kill "$chaos_pid" 2>/dev/null; wait "$chaos_pid" 2>/dev/null || true
chaos_pid=
got=$(psql_ -d bank_cluster -tA -c "SELECT count(*) FROM probe")
[[ "$got" == 100 ]] || { echo "cluster: probe table has $got rows, not 100" >&2; status=1; }
exit $status
