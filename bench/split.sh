#!/usr/bin/env bash
# Tablet splitting (issue #44) on a local 3-node cluster (RF 3, TLS between nodes,
# fsync on): YCSB's usertable, range-sharded and created as one tablet, loaded with
# ROWS rows in increasing key order (INSERT ... SELECT generate_series, BATCH rows a
# statement, one client on node 1) while the master splits it by itself, at a size
# threshold scaled down to this machine. A sampler records the table's tablet count
# every INTERVAL seconds; the loader the end of each batch. Printed: the time series
# (rows loaded, tablets, insert rate per interval), the insert rate before the first
# split, in the intervals where the tablet count changed, between them and after the
# last, and the dip (the slowest interval against the rate before the first split).
#
# Then the same rows into a table pre-split by hand into as many tablets as the
# auto-split one ended with (pinax.split_at evenly over the keys, pinax.auto_split
# off), and into a stock PostgreSQL 15 heap table (fsync on) for reference, and
# YCSB A (50% reads, 50% updates of field0, zipfian; bench/ycsb/read.sql and
# update.sql through pgbench -M prepared, CLIENTS clients on node 1) on the three,
# interleaved: ROUNDS rounds, the order turning every round. Throughput per round,
# medians, and the ratios auto-split/pre-split and Pinax/PostgreSQL.
#
# The threshold: YugabyteDB's (and the node's) defaults are a 512 MiB tablet in the
# low phase (below 8 tablets per node), 10 GiB in the high phase (below 24), 100 GiB
# past it. All three are scaled by SPLIT_MB/512 here (high = 20x, force = 200x
# SPLIT_MB), so that the table goes through the low phase as a table of hundreds of
# GiB would. A tablet's size is what its leader reports of its flushed files (every
# 10 s while it takes writes, once a minute when idle); a split halves it at its
# middle key, and the right half gets every later insert: the table ends with its
# flushed size / about 0.6 x SPLIT_MB tablets (54 MiB flushed per million rows
# here, so 48 MiB gives 12-24 for 10M rows; at most 24 in the low phase).
# The memtable budget is 2 x SPLIT_MB (at least 16 MiB): write buffers (half the
# budget) of one split size, so that a tablet's size grows in steps below the
# threshold. (Not scaled as the threshold is, 256 MiB / 512: with budgets of 8-24
# MiB a load that comes after another one ran at half the first one's rate.)
#
# Environment: ROWS (10000000), SPLIT_MB (48), SPLIT_HIGH_MB (20 x SPLIT_MB),
# SPLIT_FORCE_MB (200 x SPLIT_MB), SPLIT_LOW_TABLETS_PER_NODE (8),
# SPLIT_HIGH_TABLETS_PER_NODE (24), SPLIT_MAX_OUTSTANDING (2), SPLIT_MAX_PER_NODE
# (1), MEMTABLE_MB (2 x SPLIT_MB, at least 16), FIELDS (1: ycsb_key and field0, 100 bytes; 10 is ycsb.sh's full row),
# BATCH (10000 rows an INSERT), INTERVAL (5 s between samples), SETTLE (70) and
# SETTLE_MAX (300): after the load, sampling goes on until the tablet count has not
# changed for SETTLE s, or for 10 s with no tablet at its split size, at most
# SETTLE_MAX s. (A leader reports the size of a tablet that takes no writes only in
# its full reports, once a minute, but a new tablet (a split's half) in its next
# report: a tablet that grew past the threshold just before the load ended splits
# up to a minute later, a half still past it about 10 s later.)
# DURATION (60 s per YCSB run), CLIENTS (4), ROUNDS (3), STOCK (1; 0: no stock
# PostgreSQL), PINAX_BIN (default: the perf build if there, else the dev build),
# BENCH_OUT (a directory: the raw samples, batch ends and node logs are copied there).
# At the defaults: about 25-35 minutes on 2 cores, and about 20 GB of disk (3 nodes
# x 2 tables x ~330 MB per million rows, Raft logs included, plus PostgreSQL's).
# Validated at 1M rows: ROWS=1000000 SPLIT_MB=4 INTERVAL=1 DURATION=15 ROUNDS=2
# (about 6 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
rows="${ROWS:-10000000}"
split_mb="${SPLIT_MB:-48}"
high_mb="${SPLIT_HIGH_MB:-$((split_mb * 20))}"
force_mb="${SPLIT_FORCE_MB:-$((split_mb * 200))}"
low_per_node="${SPLIT_LOW_TABLETS_PER_NODE:-8}"
high_per_node="${SPLIT_HIGH_TABLETS_PER_NODE:-24}"
max_outstanding="${SPLIT_MAX_OUTSTANDING:-2}"
max_per_node="${SPLIT_MAX_PER_NODE:-1}"
memtable_mb="${MEMTABLE_MB:-$(( split_mb * 2 > 16 ? split_mb * 2 : 16 ))}"
nfields="${FIELDS:-1}"
batch="${BATCH:-10000}"
interval="${INTERVAL:-5}"
settle="${SETTLE:-70}"
settle_max="${SETTLE_MAX:-300}"
secs="${DURATION:-60}"
clients="${CLIENTS:-4}"
rounds="${ROUNDS:-3}"
stock="${STOCK:-1}"
t="${CARGO_TARGET_DIR:-$HOME/.cache/pinax/target}"
bin="${PINAX_BIN:-}"
[[ -z $bin && -x $t/perf/pinax ]] && bin=$t/perf/pinax
[[ -z $bin ]] && bin=$t/debug/pinax
[[ -x $bin ]] || { echo "split bench: no pinax binary at $bin (make perf, or set PINAX_BIN)" >&2; exit 1; }
pgbin=/usr/lib/postgresql/15/bin
# shellcheck source=pg/ext/test/lib.sh
source pg/ext/test/lib.sh
rpc=$(pick_ports 7)   # nodes' RPC rpc..rpc+2, their PostgreSQL rpc+3..rpc+5, stock rpc+6
pg=$((rpc + 3))
stock_pg=$((rpc + 6))
dir="$(mktemp -d "${TMPDIR:-/tmp}/pinax-splitbench.XXXXXX")"
chmod 755 "$dir"
run_pg=()
[[ "$(id -u)" == 0 ]] && run_pg=(runuser -u postgres --)
bg_pids=()
started=$(date +%s)
cleanup() {
  local p
  for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${bg_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for i in 3 2 1; do "$bin" stop --data-dir "$dir/n$i" >/dev/null 2>&1 || true; done
  if [[ -n ${BENCH_OUT:-} ]]; then
    mkdir -p "$BENCH_OUT"
    for i in 1 2 3; do cp "$dir/n$i/pinax.log" "$BENCH_OUT/split-node-$i.log" 2>/dev/null || true; done
  fi
  "${run_pg[@]}" "$pgbin/pg_ctl" -D "$dir/stock" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "split bench: $*" >&2
  for i in 1 2 3; do echo "--- node $i: $dir/n$i/pinax.log"; tail -15 "$dir/n$i/pinax.log" 2>/dev/null; done >&2
  exit 1
}

echo "split bench: $rows rows, 3 nodes RF 3, split at $split_mb MiB below $low_per_node tablets per node, $high_mb MiB below $high_per_node, then $force_mb MiB; $max_outstanding splits at once, $max_per_node per node; memtable budget $memtable_mb MiB; $(basename "$bin") build, $(nproc) cores, $(date -u '+%F %H:%M') UTC"

# The cluster: node 1 makes its CA and is the master; nodes 2 and 3 join it with
# join tokens (their certificates from node 1) and take its superuser password.
flags=(--split-low-mb "$split_mb" --split-low-tablets-per-node "$low_per_node" --split-high-mb "$high_mb"
       --split-high-tablets-per-node "$high_per_node" --split-force-mb "$force_mb"
       --split-max-outstanding "$max_outstanding" --split-max-per-node "$max_per_node" --memtable-mb "$memtable_mb")
"$bin" start --data-dir "$dir/n1" --port "$rpc" --pg-port "$pg" "${flags[@]}" >/dev/null || fail "node 1 did not start"
for i in 2 3; do
  token=$("$bin" cert create-join-token --certs-dir "$dir/n1/certs")
  "$bin" start --data-dir "$dir/n$i" --port $((rpc + i - 1)) --pg-port $((pg + i - 1)) --join "127.0.0.1:$rpc" \
    --token "$token" --pg-credentials "$dir/n1/credentials" "${flags[@]}" >/dev/null || fail "node $i did not start"
done
for _ in $(seq 1 100); do
  "$bin" status --data-dir "$dir/n1" 2>/dev/null | grep -q "nodes: 3 live" && break
  sleep 0.2
done
"$bin" status --data-dir "$dir/n1" | grep -q "nodes: 3 live" || fail "the master does not see 3 live nodes"
export PGPASSFILE="$dir/n1/credentials" PGSSLMODE=disable
sql() { local port=$1 db=$2; shift 2; psql -X -q -h 127.0.0.1 -p "$port" -U "$superuser" -d "$db" -v ON_ERROR_STOP=1 -tA "$@"; }
sql "$pg" postgres -c "CREATE DATABASE auto" -c "CREATE DATABASE presplit"

if [[ $stock == 1 ]]; then
  mkdir -p "$dir/stock"
  [[ "$(id -u)" == 0 ]] && chown postgres "$dir/stock"
  "${run_pg[@]}" "$pgbin/initdb" -D "$dir/stock" --auth=trust --encoding=UTF8 --locale=C.UTF-8 -U "$superuser" >/dev/null
  printf "listen_addresses = '127.0.0.1'\nport = %s\nunix_socket_directories = '%s'\n" "$stock_pg" "$dir/stock" >>"$dir/stock/postgresql.conf"
  "${run_pg[@]}" "$pgbin/pg_ctl" -D "$dir/stock" -l "$dir/stock/log" -w start >/dev/null
fi

fields=$(for f in $(seq 0 $((nfields - 1))); do printf ", field%d text" "$f"; done)
values=$(for f in $(seq 0 $((nfields - 1))); do printf ", substr(repeat(md5(g::text || '%d'), 4), 1, 100)" "$f"; done)
tablets_sql="SELECT count(*) FROM pinax_tablets('usertable') WHERE relation = 'usertable'::regclass"
# Tablets, and MiB in flushed files: all of them, the largest tablet (as leaders last reported).
sample_sql="SELECT count(*) || ' ' || round(coalesce(sum(approximate_bytes), 0) / 1048576.0, 1) || ' ' || round(coalesce(max(approximate_bytes), 0) / 1048576.0, 1) FROM pinax_tablets('usertable') WHERE relation = 'usertable'::regclass"
now() { date +%s.%N; }

# sample PORT DB FILE: appends "epoch tablets flushed_mib largest_mib" ("- - -"
# for a failed query).
sample() {
  local n="1 - -"
  [[ $1 == "$stock_pg" ]] || n=$(sql "$1" "$2" -c "$sample_sql" 2>/dev/null) || n="- - -"
  echo "$(now) ${n:-- - -}" >>"$3"
}
# sampler PORT DB FILE: a sample every INTERVAL s (aligned to its start) until killed.
sampler() {
  local port=$1 db=$2 out=$3 t0 k=1
  t0=$(now)
  while :; do
    sleep "$(awk -v t0="$t0" -v k="$k" -v i="$interval" -v t="$(now)" 'BEGIN { s = t0 + k * i - t; printf "%.3f", (s > 0 ? s : 0) }')"
    sample "$port" "$db" "$out"
    k=$((k + 1))
  done
}
# load PORT DB NAME: ROWS rows in BATCH-row statements, keys increasing, one
# session; $dir/NAME.batches gets "rows_so_far epoch" at the start and after
# each statement (the server's clock: this machine's), $dir/NAME.samples the
# sampler's lines. With SETTLE=1, the sampler goes on after the load until the
# tablet count settles (see SETTLE above); else for one more sample.
load() {
  local port=$1 db=$2 name=$3 settling=${4:-0} from to sp last since
  : >"$dir/$name.samples"
  sample "$port" "$db" "$dir/$name.samples"
  echo "0 $(now)" >"$dir/$name.batches"
  sampler "$port" "$db" "$dir/$name.samples" &
  sp=$!
  bg_pids+=("$sp")
  for ((from = 1; from <= rows; from += batch)); do
    to=$((from + batch - 1 < rows ? from + batch - 1 : rows))
    echo "INSERT INTO usertable SELECT 'user' || lpad(g::text, 10, '0') $values FROM generate_series($from, $to) g;"
    echo "SELECT $to, extract(epoch FROM clock_timestamp());"
  done | sql "$port" "$db" -F ' ' >>"$dir/$name.batches" || { kill "$sp"; fail "$name: the load failed"; }
  if [[ $settling == 1 ]]; then
    local end t k big limit
    end=$(date +%s); since=$end; last=
    while :; do
      read -r _ k _ big < <(tail -1 "$dir/$name.samples")
      t=$(date +%s)
      [[ $k != "$last" ]] && { last=$k; since=$t; }
      limit=$force_mb
      if [[ $k != - ]]; then
        if (( k < 3 * low_per_node )); then limit=$split_mb; elif (( k < 3 * high_per_node )); then limit=$high_mb; fi
      fi
      if (( t - since >= settle )); then
        echo "  $name: settled $((t - end)) s after the load: $k tablets for ${settle} s (the largest $big MiB, splits at $limit MiB)"
        break
      fi
      if (( t - since >= 10 )) && [[ $big != - ]] && awk -v b="$big" -v l="$limit" 'BEGIN { exit !(b < l) }'; then
        echo "  $name: settled $((t - end)) s after the load: $k tablets, none at its split size ($limit MiB) for 10 s"
        break
      fi
      if (( t - end >= settle_max )); then
        echo "  $name: not settled $settle_max s after the load: $k tablets, the largest $big MiB (splits at $limit MiB)"
        break
      fi
      sleep 1
    done
  else
    sleep "$interval"   # one sample past the end
  fi
  kill "$sp" 2>/dev/null || true
  wait "$sp" 2>/dev/null || true
}
# series NAME: the time series of a load, one line per sampling interval, from
# the batch ends (each batch's rows spread evenly over its statement's time):
# "t_end rows_loaded tablets rows_per_s split(0/1) rows_in_interval load_s_in_interval
# flushed_mib largest_mib"
# (t from the load's start; a split: the tablet count changed in the interval;
# load_s: the part of the interval the load ran in).
series() {
  awk 'NR == FNR { n++; b[n] = $2; r[n] = $1; next }
       { m++; s[m] = $1; k[m] = $2; f[m] = $3; l[m] = $4 }
       END {
         t0 = b[1]; tend = b[n]
         for (j = 1; j <= m; j++) {   # rows loaded by sample j
           x = s[j]; got = 0
           for (i = 2; i <= n; i++) {
             if (x >= b[i]) got = r[i]
             else { if (x > b[i - 1]) got = r[i - 1] + (r[i] - r[i - 1]) * (x - b[i - 1]) / (b[i] - b[i - 1]); break }
           }
           at[j] = got
         }
         for (j = 2; j <= m; j++) {
           a = s[j - 1] > t0 ? s[j - 1] : t0; e = s[j] < tend ? s[j] : tend
           dt = e > a ? e - a : 0
           split_ = (k[j] != k[j - 1] && k[j] != "-" && k[j - 1] != "-") ? 1 : 0
           printf "%.1f %d %s %.0f %d %d %.3f %s %s\n", s[j] - t0, at[j], k[j], (dt > 0.05 ? (at[j] - at[j - 1]) / dt : 0), split_, at[j] - at[j - 1], dt, f[j], l[j]
         }
       }' "$dir/$1.batches" "$dir/$1.samples"
}
# report NAME: the series and the insert rates before / during / between / after
# the splits, and the dip.
report() {
  series "$1" >"$dir/$1.series"
  printf "  %8s %10s %8s %10s %11s %11s\n" t_s rows tablets "rows/s" flushed_mib largest_mib
  # (after the load, only the lines where something changed)
  awk '{ key = $3 " " $8 " " $9 }
       $7 > 0.05 || key != prev || NR == 1 { if (gap) print "       ..."; gap = 0
         printf "  %8s %10d %8s %10s %11s %11s%s\n", $1, $2, $3, ($7 > 0.05 ? $4 : "-"), $8, $9, ($5 ? "  split" : ""); prev = key; next }
       { gap = 1 }
       END { if (gap) printf "  %8s %10d %8s %10s %11s %11s\n", $1, $2, $3, "-", $8, $9 }' "$dir/$1.series"
  awk -v name="$1" -v k0="$(head -1 "$dir/$1.samples" | awk '{ print $2 }')" -v iv="$interval" '
    { t[NR] = $1; k[NR] = $3; rate[NR] = $4; sp[NR] = $5; dr[NR] = $6; dt[NR] = $7
      if ($5) { if (!fs) fs = NR; ls = NR; nsp++; if ($7 > 0.05) nspl++ } }
    END {
      for (j = 1; j <= NR; j++) {
        if (dt[j] <= 0.05) continue
        c = !fs || j < fs ? 1 : sp[j] ? 2 : j > ls ? 4 : 3
        r[c] += dr[j]; d[c] += dt[j]; rall += dr[j]; dall += dt[j]
        # the dip: the slowest full interval from the first split on
        if (fs && j >= fs && dt[j] > iv / 2 && (min == "" || rate[j] < min)) { min = rate[j]; mint = t[j] }
      }
      printf "  %s: tablets %s -> %s (%d intervals with a split, %d of them during the load); %d rows in %.0f s, %.0f rows/s\n", name, k0, k[NR], nsp, nspl, rall, dall, (dall ? rall / dall : 0)
      split("before the first split|intervals with a split|between splits|after the last split", label, "|")
      for (c = 1; c <= 4; c++)
        if (d[c] > 0) printf "    %-24s %10.0f rows/s  (%d rows in %.0f s)\n", label[c], r[c] / d[c], r[c], d[c]
        else printf "    %-24s %10s\n", label[c], "-"
      if (min != "" && d[1] > 0) printf "    dip: slowest interval from the first split on %.0f rows/s (ending at %s s) = %.2f of the rate before\n", min, mint, min / (r[1] / d[1])
      else if (!nspl) printf "    dip: - (no split during the load)\n"
      else printf "    dip: - (a split in the first interval already: no rate before it; lower INTERVAL)\n"
      c = k0 " at 0 s"
      for (j = 1; j <= NR; j++) if (sp[j]) c = c ", " k[j] " at " t[j] " s"
      printf "    tablets over time (at the sample that saw the count): %s\n", c
    }' "$dir/$1.series"
}
# flat NAME: a load without splits (pre-split, stock): mean rate and slowest interval.
flat() {
  series "$1" >"$dir/$1.series"
  awk -v name="$1" -v iv="$interval" '$7 > 0.05 { r += $6; d += $7; if ($7 > iv / 2 && (min == "" || $4 < min)) min = $4 }
    END { printf "  %s: %d rows in %.0f s, %.0f rows/s; slowest %s-s interval %.0f rows/s (%.2f of the mean)\n", name, r, d, (d ? r / d : 0), iv, min, (d && r ? min / (r / d) : 0) }' "$dir/$1.series"
}
leaders() { # leaders PORT DB: "n1 N, n2 N, n3 N", tablets led per node
  sql "$1" "$2" -c "SELECT string_agg('n' || i || ' ' || coalesce(n, 0), ', ' ORDER BY i) FROM generate_series(1, 3) i LEFT JOIN
    (SELECT split_part(leader, ':', 2)::int - $rpc + 1 AS node, count(*) n FROM pinax_tablets('usertable') WHERE relation = 'usertable'::regclass GROUP BY 1) s ON s.node = i"
}
sizes() { # sizes PORT DB: each tablet's flushed MiB, in key order
  sql "$1" "$2" -c "SELECT string_agg(round(approximate_bytes / 1048576.0, 1)::text, ' ' ORDER BY start_key COLLATE \"C\" NULLS FIRST) FROM pinax_tablets('usertable') WHERE relation = 'usertable'::regclass"
}
# wait_idle: the three daemons under 15% of a core (4-6% idle) for two seconds in
# a row (at most 60 s): the compactions a load leaves land in no later step.
daemon_ticks() { local s=0 i; for i in 1 2 3; do s=$((s + $(awk '{ print $14 + $15 }' "/proc/$(cat "$dir/n$i/pinax.pid")/stat"))); done; echo $s; }
wait_idle() {
  local a b quiet=0
  a=$(daemon_ticks)
  for _ in $(seq 1 60); do
    sleep 1
    b=$(daemon_ticks)
    if (( (b - a) * 100 / $(getconf CLK_TCK) < 15 )); then quiet=$((quiet + 1)); (( quiet >= 2 )) && return; else quiet=0; fi
    a=$b
  done
}
# by_leader PORT DB: the pre-split load's rate by where its statement wrote: a
# tablet led by node 1 (the client's), 2 or 3 (leaders as they are now), or two
# tablets (a statement across a split point: a distributed transaction).
by_leader() {
  local order
  order=$(sql "$1" "$2" -c "SELECT string_agg((split_part(leader, ':', 2)::int - $rpc + 1)::text, ' ' ORDER BY start_key COLLATE \"C\" NULLS FIRST) FROM pinax_tablets('usertable') WHERE relation = 'usertable'::regclass")
  awk -v order="$order" -v rows="$rows" '
    BEGIN { n = split(order, lead, " ") }
    NR > 1 { a = int((p + 1) * n / rows) + 1; b = int($1 * n / rows) + 1; if (a > n) a = n; if (b > n) b = n
             c = a == b ? "n" lead[a] : "two tablets"; r[c] += $1 - p; d[c] += $2 - t }
    { p = $1; t = $2 }
    END { split("n1|n2|n3|two tablets", cs, "|")
          for (i = 1; i <= 4; i++) if (d[cs[i]] > 0) { printf "%s%s %.0f rows/s (%d rows)", sep, cs[i], r[cs[i]] / d[cs[i]], r[cs[i]]; sep = ", " }
          print "" }' "$dir/presplit.batches"
}
check_count() { # check_count PORT DB NAME
  local n
  n=$(sql "$1" "$2" -c "SELECT count(*) FROM usertable")
  [[ $n == "$rows" ]] || fail "$3: usertable has $n rows, not $rows"
}

# 1. The auto-split table.
sql "$pg" auto -c "CREATE TABLE usertable (ycsb_key varchar PRIMARY KEY $fields) WITH (pinax.sharding = 'range')"
got=$(sql "$pg" auto -c "SELECT count(*), bool_and(cardinality(replicas) = 3), bool_and(auto_split) FROM pinax_tablets('usertable')")
[[ $got == "1|t|t" ]] || fail "the new table's tablets are not one of 3 replicas with auto split on: $got"
wait_idle
echo "load with automatic splits (node 1, $batch rows a statement, samples every $interval s):"
load "$pg" auto auto 1
report auto
check_count "$pg" auto auto
final=$(sql "$pg" auto -c "$tablets_sql")
echo "  auto: $final tablets (leaders: $(leaders "$pg" auto)), $(sql "$pg" auto -c "SELECT pg_size_pretty(sum(approximate_bytes)) FROM pinax_tablets('usertable')") flushed; MiB per tablet in key order: $(sizes "$pg" auto)"
sql "$pg" auto -c "ANALYZE usertable"

# 2. The same table pre-split by hand into as many tablets, no auto split.
splits=$(for ((q = 1; q < final; q++)); do printf "user%010d," $((rows * q / final)); done)
splits=${splits%,}
with="pinax.sharding = 'range', pinax.auto_split = off"
[[ -n $splits ]] && with="$with, pinax.split_at = '$splits'"
sql "$pg" presplit -c "CREATE TABLE usertable (ycsb_key varchar PRIMARY KEY $fields) WITH ($with)"
wait_idle
echo "load into $final tablets pre-split by hand (pinax.split_at evenly over the keys, auto split off):"
load "$pg" presplit presplit
flat presplit
echo "    by the statement's tablet: $(by_leader "$pg" presplit)"
check_count "$pg" presplit presplit
echo "  presplit: $(sql "$pg" presplit -c "$tablets_sql") tablets (leaders: $(leaders "$pg" presplit)), $(sql "$pg" presplit -c "SELECT pg_size_pretty(sum(approximate_bytes)) FROM pinax_tablets('usertable')") flushed; MiB per tablet: $(sizes "$pg" presplit)"
sql "$pg" presplit -c "ANALYZE usertable"
if [[ $stock == 1 ]]; then
  sql "$stock_pg" postgres -c "CREATE TABLE usertable (ycsb_key varchar PRIMARY KEY $fields)"
  echo "load into stock PostgreSQL (heap):"
  load "$stock_pg" postgres stock
  flat stock
  check_count "$stock_pg" postgres stock
  sql "$stock_pg" postgres -c "VACUUM ANALYZE usertable"
fi
if [[ -n ${BENCH_OUT:-} ]]; then
  mkdir -p "$BENCH_OUT"
  for f in "$dir"/*.samples "$dir"/*.batches "$dir"/*.series; do cp "$f" "$BENCH_OUT/split-$(basename "$f")"; done
fi

# 3. YCSB A on the three, interleaved.
wait_idle
now_k=$(sql "$pg" auto -c "$tablets_sql")
[[ $now_k == "$final" ]] || echo "  (auto: $now_k tablets by now, $final when its load settled)"
declare -A tps retried
ycsb_a() { # ycsb_a SYS ROUND
  local port=$pg db=$1 out
  [[ $1 == stock ]] && { port=$stock_pg; db=postgres; }
  out=$("$pgbin/pgbench" -n -M prepared -h 127.0.0.1 -p "$port" -U "$superuser" -c "$clients" -j "$clients" -T "$secs" \
          --max-tries=100 -D records="$rows" -f "$root/bench/ycsb/read.sql@50" -f "$root/bench/ycsb/update.sql@50" "$db" 2>&1) \
    || { echo "$out" | tail -5; }
  tps[$1,$2]=$(awk '/^tps = / { printf "%.0f", $3; exit }' <<<"$out")
  retried[$1,$2]=$(awk -F'[: ]+' '/^number of transactions retried/ { print $5; exit }' <<<"$out")
}
median() { tr ' ' '\n' | awk 'NF && $1 != "-"' | sort -n | awk '{ a[NR] = $1 } END { print (NR ? a[int((NR + 1) / 2)] : "-") }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0) printf "%.2f\n", a / b; else print "-" }'; }
systems="auto presplit"
[[ $stock == 1 ]] && systems="$systems stock"
echo "YCSB A ($rows records, 50% read / 50% update, zipfian; $clients clients on node 1, ${secs}s a run, $rounds rounds):"
printf "  %-7s %10s %10s %10s %8s %8s %8s\n" round auto_tps pre_tps pg_tps auto/pre auto/pg pre/pg
ra=(); rp=(); rq=()
for r in $(seq 1 "$rounds"); do
  order=$systems
  (( r % 2 == 0 )) && order=$(tr ' ' '\n' <<<"$systems" | tac | tr '\n' ' ')
  for s in $order; do ycsb_a "$s" "$r"; done
  ra+=("$(ratio "${tps[auto,$r]}" "${tps[presplit,$r]}")")
  rp+=("$(ratio "${tps[auto,$r]}" "${tps[stock,$r]:-}")")
  rq+=("$(ratio "${tps[presplit,$r]}" "${tps[stock,$r]:-}")")
  printf "  %-7s %10s %10s %10s %8s %8s %8s\n" "$r" "${tps[auto,$r]}" "${tps[presplit,$r]}" "${tps[stock,$r]:--}" "${ra[-1]}" "${rp[-1]}" "${rq[-1]}"
done
med() { for r in $(seq 1 "$rounds"); do echo -n "${tps[$1,$r]:--} "; done | median; }
printf "  %-7s %10s %10s %10s %8s %8s %8s\n" median "$(med auto)" "$(med presplit)" "$(med stock)" "$(echo "${ra[*]}" | median)" "$(echo "${rp[*]}" | median)" "$(echo "${rq[*]}" | median)"
rt() { local s=0 r; for r in $(seq 1 "$rounds"); do s=$((s + ${retried[$1,$r]:-0})); done; echo $s; }
echo "  retried transactions: auto $(rt auto), presplit $(rt presplit)$([[ $stock == 1 ]] && echo ", stock $(rt stock)")"
echo "  tablets after YCSB A: auto $(sql "$pg" auto -c "$tablets_sql") (leaders: $(leaders "$pg" auto)), presplit $(sql "$pg" presplit -c "$tablets_sql")"
echo "split bench: done in $(( $(date +%s) - started )) s"
