#!/usr/bin/env bash
# Many tablets on one node (issue #41): TABLES tables with a primary key and an
# index each, 4 tablets apiece (`pinax.tablets = 4`: 2,000 tables make 16,000
# tablets), created as an application's migrations would (one psql session), a row
# written to each, the node restarted, every row read back through its index.
#
# Checked bounds (a node of many tablets must stay a node that serves):
#   - the daemon's open descriptors stay under MAX_FDS (the shared store and Raft
#     log: descriptors do not grow with tablets);
#   - the data directory's allocated bytes per tablet stay under MAX_BYTES;
#   - the idle daemon uses under MAX_IDLE_MS of CPU per second (its groups have
#     quiesced: were they ticking, 16,000 groups would take both cores);
#   - the node serves SQL again within MAX_START seconds of its restart.
# The figures are printed (the CI log keeps them).
#
# Usage: pg/ext/test/tablets.sh [TABLES]   (default 2000; PINAX_BIN: the daemon)
set -euo pipefail
tables="${1:-2000}"
max_fds=1000
max_bytes=$((64 << 10))
max_start=180
max_idle_ms=500
bin="${PINAX_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/pinax/target}/debug/pinax}"

# shellcheck source=pg/ext/test/lib.sh
source "$(dirname "$0")/lib.sh"
rpc=$(pick_ports 2)
pg=$((rpc + 1))
dir="$(mktemp -d /tmp/pinax-tablets.XXXXXX)"
chmod 755 "$dir"
cleanup() {
  "$bin" stop --data-dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "tablets.sh: FAIL: $*" >&2; exit 1; }

start() { "$bin" start --data-dir "$dir" --port "$rpc" --pg-port "$pg" --tablets-per-node 4 >/dev/null; }
export PGHOST=127.0.0.1 PGPORT=$pg PGUSER=$superuser PGOPTIONS="-c pinax.tablets=4" PGPASSFILE="$dir/credentials"
sql() { psql -X -q -v ON_ERROR_STOP=1 -d postgres "$@"; }
pid() { cat "$dir/pinax.pid"; }
fds() { find "/proc/$(pid)/fd" -mindepth 1 -maxdepth 1 | wc -l; }
alloc() { du -sB1 "$dir/data" | cut -f1; }
tablet_count() { "$bin" status --data-dir "$dir" | grep -c '^    tablet ' || true; }

start
b0=$(alloc); n0=$(tablet_count); t0=$(date +%s)
for i in $(seq 1 "$tables"); do
  echo "create table t$i (id int primary key, v text); create index t${i}_v on t$i (v);"
done | sql
t1=$(date +%s)
for i in $(seq 1 "$tables"); do echo "insert into t$i values ($i, 'x$i');"; done | sql
t2=$(date +%s)
n=$(( $(tablet_count) - n0 ))
t3=$(date +%s)
(( n >= tables * 8 )) || fail "$n tablets created for $tables tables with an index each (expected $((tables * 8)))"
f=$(fds); b=$(alloc)
per_tablet=$(( (b - b0) / n ))
echo "tablets.sh: $tables tables + indexes, $n tablets: created in $((t1 - t0)) s, a row each in $((t2 - t1)) s, counted in $((t3 - t2)) s; $f descriptors; $per_tablet bytes allocated per tablet"
(( f <= max_fds )) || fail "$f open descriptors with $n tablets (bound $max_fds)"
(( per_tablet <= max_bytes )) || fail "$per_tablet bytes per tablet (bound $max_bytes)"

# The daemon idle with every tablet: its CPU over 5 s, once the groups the inserts
# woke have quiesced again (3 s after their last request).
cpu() { awk '{print $14 + $15}' "/proc/$(pid)/stat"; }
sleep 5; c0=$(cpu); sleep 5; idle=$(( ($(cpu) - c0) * 1000 / $(getconf CLK_TCK) / 5 ))
st0=$(date +%s)
"$bin" stop --data-dir "$dir" >/dev/null
s0=$(date +%s)
echo "tablets.sh: idle daemon CPU $idle ms per second; stopped in $((s0 - st0)) s"
(( idle <= max_idle_ms )) || fail "the idle daemon used $idle ms of CPU per second with $n tablets (bound $max_idle_ms)"
start
until sql -tAc "select 1" >/dev/null 2>&1; do
  (( $(date +%s) - s0 <= max_start )) || fail "the node did not serve SQL within $max_start s of its start"
  sleep 0.5
done
# The first read of each table waits for its tablets' leaders: part of the start.
sql -tAc "select count(*) from t1" >/dev/null
s1=$(date +%s)
(( s1 - s0 <= max_start )) || fail "the node took $((s1 - s0)) s to serve after its restart (bound $max_start)"
sql <<EOF
DO \$\$
DECLARE n int;
BEGIN
  FOR i IN 1..$tables LOOP
    EXECUTE format('select count(*) from t%s where v = %L', i, 'x' || i) INTO n;
    IF n <> 1 THEN RAISE EXCEPTION 'table t% has % rows with its value after the restart', i, n; END IF;
  END LOOP;
END \$\$;
EOF
s2=$(date +%s)
echo "tablets.sh: restarted and serving in $((s1 - s0)) s, every row read back in $((s2 - s1)) s; $(fds) descriptors after the reads"
