#!/usr/bin/env bash
# One-row upserts on Pinax and on stock PostgreSQL 15, side by side in one run:
#
#   INSERT INTO usertable VALUES (key, 10 x 100 bytes)
#     ON CONFLICT (ycsb_key) DO UPDATE SET field0 = EXCLUDED.field0, ..., field9 = EXCLUDED.field9
#
# over YCSB's usertable (RECORDS rows loaded, keys uniform over twice as many: half
# the statements update a row, half insert one), through pgbench over the extended
# protocol, autocommit, CLIENTS clients. Pinax runs twice per round, with
# pinax.enable_insert_at_once off (the arbiter look-up, then a speculative insertion
# in a storage transaction or a row lock and an update) and on (one blind put of the
# row, pg/ext/src/insert_at_once.rs); PostgreSQL once; interleaved, ROUNDS rounds.
# Per run: statements per second, server CPU per statement (PostgreSQL processes
# plus the node daemon, from /proc) and the ratio to PostgreSQL's run of the round.
#
# Usage: bench/upserts.sh [RECORDS] [SECONDS] [CLIENTS] [ROUNDS]   (default 100000 8 4 3)
set -euo pipefail
records="${1:-100000}"
secs="${2:-8}"
clients="${3:-4}"
rounds="${4:-3}"
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

fields=$(for f in $(seq 0 9); do printf ", field%d text" "$f"; done)
values=$(for f in $(seq 0 9); do printf ", substr(repeat(md5(g::text || '%d'), 4), 1, 100)" "$f"; done)
for sys in pinax stock; do
  psql_on $sys -c "SET client_min_messages = warning" -c "CREATE TABLE usertable (ycsb_key varchar PRIMARY KEY $fields)" \
    -c "INSERT INTO usertable SELECT 'user' || lpad(g::text, 10, '0') $values FROM generate_series(1, $records) g" \
    -c "ANALYZE usertable" >/dev/null
  wait_idle $sys
done
value="md5(:key::text) || md5(:key::text) || md5(:key::text) || 'xxxx'"
set_list=$(for f in $(seq 0 9); do printf "%sfield%d = EXCLUDED.field%d" "$([[ $f == 0 ]] || echo ', ')" "$f" "$f"; done)
{
  echo "\\set key random(1, 2 * :records)"
  echo "INSERT INTO usertable VALUES ('user' || lpad(:key::text, 10, '0')$(for _ in $(seq 0 9); do printf ", %s" "$value"; done))"
  echo "  ON CONFLICT (ycsb_key) DO UPDATE SET $set_list;"
} > "$dir/upsert.sql"

# run SYS SETTING: "tps cpu_us" of one pgbench run (SETTING: the Pinax database's
# pinax.enable_insert_at_once, for the sessions pgbench opens).
run() {
  local sys=$1 setting=$2 c0 c1 out n tps
  [[ $sys == pinax ]] && psql_on pinax -c "ALTER DATABASE postgres SET pinax.enable_insert_at_once = $setting" >/dev/null
  c0=$(cpu_of "$sys")
  out=$("$pgbin/pgbench" -n -M prepared -h 127.0.0.1 -p "$(port_of "$sys")" -U "$user" \
          -c "$clients" -j "$clients" -T "$secs" -D records="$records" -f "$dir/upsert.sql" postgres 2>&1) \
    || { echo "$out" | tail -5 >&2; exit 1; }
  c1=$(cpu_of "$sys")
  n=$(awk -F'[:/ ]+' '/^number of transactions actually processed/ { print $6; exit }' <<<"$out")
  tps=$(awk '/^tps = / { printf "%.0f", $3; exit }' <<<"$out")
  echo "$tps $(awk -v c=$((c1 - c0)) -v t="$tck" -v n="${n:-0}" 'BEGIN { if (n > 0) printf "%.0f", c / t * 1e6 / n; else print 0 }')"
}

echo "upserts: $records records, keys over $((2 * records)), $clients clients, ${secs}s per run, $rounds round(s), $(nproc) cores, $(date -u +%F)"
printf "%-6s %-22s %10s %12s %8s\n" round system tps cpu_us tps_x
for r in $(seq 1 "$rounds"); do
  declare -A res=()
  res[off]=$(run pinax off)
  res[stock]=$(run stock -)
  res[on]=$(run pinax on)
  read -r st _ <<<"${res[stock]}"
  for k in off on stock; do
    read -r t c <<<"${res[$k]}"
    case $k in off) name="pinax, at once off" ;; on) name="pinax, at once on" ;; *) name="postgresql" ;; esac
    printf "%-6s %-22s %10s %12s %8s\n" "$r" "$name" "$t" "$c" "$(ratio "$t" "$st")"
  done
done
