#!/usr/bin/env bash
# Index builds under a write load on a local 3-node cluster (RF 3), issue #43:
# a table of ROWS rows (id, k, v); writers on node 2 (pgbench, CLIENTS clients:
# an UPDATE of v by random id, then an INSERT of a new row) while node 1 runs
# CREATE INDEX, then CREATE INDEX CONCURRENTLY; then both builds again with no
# load. Prints each build's time and the writers' throughput and p50/p99
# latency during it, next to the same writers with no build running.
#
# Usage: bench/online_ddl.sh [ROWS] [CLIENTS]   (default 1000000 4)
# PINAX_BIN: the daemon (default: the perf build if there, else the dev build).
set -euo pipefail
cd "$(dirname "$0")/.."
rows="${1:-1000000}"
clients="${2:-4}"
t="${CARGO_TARGET_DIR:-$HOME/.cache/pinax/target}"
bin="${PINAX_BIN:-}"
[[ -z $bin && -x $t/perf/pinax ]] && bin=$t/perf/pinax
[[ -z $bin ]] && bin=$t/debug/pinax
# shellcheck source=pg/ext/test/lib.sh
source pg/ext/test/lib.sh
rpc=$(pick_ports 6)
pg=$((rpc + 3))
dir="$(mktemp -d /tmp/pinax-ddlbench.XXXXXX)"
chmod 755 "$dir"
cleanup() {
  "$bin" cluster stop --data-dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
"$bin" cluster start --nodes 3 --data-dir "$dir" --base-port "$rpc" --pg-port "$pg" >/dev/null
export PGHOST=127.0.0.1 PGUSER=$superuser PGPASSFILE="$dir/credentials" PGSSLMODE=disable
pg1=$pg pg2=$((pg + 1))
on() { local port=$1; shift; psql -X -q -v ON_ERROR_STOP=1 -p "$port" -d ddlbench -tA "$@"; }
psql -X -q -p "$pg1" -d postgres -c "CREATE DATABASE ddlbench"
on "$pg1" -c "CREATE TABLE t (id int PRIMARY KEY, k int NOT NULL, v int NOT NULL)"
s=$(date +%s)
for ((from = 1; from <= rows; from += 200000)); do
  to=$((from + 199999 < rows ? from + 199999 : rows))
  on "$pg1" -c "INSERT INTO t SELECT g, g, g FROM generate_series($from, $to) g"
done
echo "online_ddl bench: $rows rows loaded in $(($(date +%s) - s)) s ($(basename "$bin"), $(nproc) cores, $(date -u +%F))"

cat >"$dir/write.sql" <<EOF
\set id random(1, $rows)
\set nid random(1000000000, 2000000000)
UPDATE t SET v = v + 1 WHERE id = :id;
INSERT INTO t VALUES (:nid, :id, :id) ON CONFLICT DO NOTHING;
EOF
# Writers for SECS seconds, each transaction's end time and latency logged.
writers() { # writers NAME SECS (pgbench itself, so that the caller can stop it)
  exec pgbench -n -h 127.0.0.1 -p "$pg2" -U "$superuser" -c "$clients" -j 2 -T "$2" -f "$dir/write.sql" \
    --log --log-prefix="$dir/$1" ddlbench >"$dir/$1.out" 2>&1
}
# Throughput and latency percentiles of the transactions of logs NAME.* that ended
# within [FROM, TO] (epoch microseconds).
window() { # window NAME FROM TO
  cat "$dir/$1".* | awk -v a="$2" -v b="$3" '{ e = $5 * 1000000 + $6; if (e >= a && e <= b) print $3 }' | sort -n |
    awk -v span="$(( ($3 - $2) ))" '{ l[NR] = $1 } END {
      if (NR == 0) { print "0 tps, no transactions"; exit }
      printf "%.0f tps, p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d transactions)", NR / (span / 1e6), l[int(NR * 0.5) + 1] / 1000, l[int(NR * 0.99) + 1] / 1000, l[NR] / 1000, NR }'
}
us() { echo $(( $(date +%s%N) / 1000 )); }
build() { # build NAME SQL: time SQL on node 1 while the writers run; report both
  local name=$1 sql=$2
  (writers "$name" 1000) &
  local wp=$!
  sleep 5
  local a b
  a=$(us)
  on "$pg1" -c "$sql"
  b=$(us)
  sleep 3
  kill -INT "$wp" 2>/dev/null || true
  wait "$wp" 2>/dev/null || true
  local c=$((a - 5000000))
  echo "  $name: $(( (b - a) / 1000 )) ms; writers during it: $(window "$name" "$a" "$b"); in the 5 s before: $(window "$name" "$c" "$a")"
}
echo "with writers on node 2 ($clients clients: UPDATE v by random id + INSERT):"
build create_index "CREATE INDEX t_k ON t (k)"
on "$pg1" -c "DROP INDEX t_k"
build create_index_concurrently "CREATE INDEX CONCURRENTLY t_k ON t (k)"
n=$(on "$pg2" -c "SET enable_seqscan = off" -c "SELECT count(*) FROM t WHERE k > 0")
m=$(on "$pg2" -c "SELECT count(*) FROM t")
[[ "$n" == "$m" ]] || { echo "online_ddl bench: index counts $n rows, table $m" >&2; exit 1; }
on "$pg1" -c "DROP INDEX t_k"
echo "no load:"
for sql in "CREATE INDEX t_k ON t (k)" "DROP INDEX t_k" "CREATE INDEX CONCURRENTLY t_k ON t (k)"; do
  a=$(us)
  on "$pg1" -c "$sql"
  b=$(us)
  [[ $sql == DROP* ]] || echo "  $sql: $(( (b - a) / 1000 )) ms"
done
echo "index and table agree on node 2 after the concurrent build under load ($n rows): ok"
