#!/usr/bin/env bash
# Index paths of issue #45 on one node, Pinax and stock PostgreSQL 15 side by side
# (bench/lib.sh: both with fsync on; pgbench -M prepared, CLIENTS clients, SECS
# seconds a run, ROUNDS rounds, the systems taking turns to go first):
# - stock: TPC-C's stock look-up of NEW_ORDER, `SELECT ... FROM stock WHERE
#   (s_w_id, s_i_id) IN ((w, i1), ... (w, i10)) FOR UPDATE` in a transaction, on
#   WAREHOUSES x ITEMS rows (a BitmapOr of primary-key probes on both); on Pinax
#   also with bitmap scans off (the plan before they existed: a scan of the table);
# - oldest: DELIVERY's `SELECT no_o_id FROM new_order WHERE no_w_id = w AND
#   no_d_id = d ORDER BY no_o_id LIMIT 1` on WAREHOUSES x 10 districts x 900
#   orders (an ordered scan under the hash prefix on Pinax);
# - by_index: ORDER-STATUS's customer look-up through a secondary index, `SELECT
#   ... FROM orders WHERE o_w_id = w AND o_d_id = d AND o_c_id = c ORDER BY o_id
#   DESC LIMIT 1` (a backward scan of (o_w_id, o_d_id, o_c_id, o_id)) and the
#   ~10 orders of a customer fetched through it (the rows in one batch per tablet).
# Prints transactions/s per round, medians, and the Pinax/PostgreSQL ratio.
# Environment: WAREHOUSES (2), ITEMS (50000), SECS (15), ROUNDS (3), CLIENTS (1),
# PINAX_BIN (default: the perf build).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
warehouses="${WAREHOUSES:-2}"; items="${ITEMS:-50000}"; secs="${SECS:-15}"; rounds="${ROUNDS:-3}"; clients="${CLIENTS:-1}"
scripts="$dir/scripts"; mkdir -p "$scripts"
setup="
CREATE TABLE stock (s_w_id int, s_i_id int, s_quantity int, s_data text, PRIMARY KEY (s_w_id, s_i_id));
INSERT INTO stock SELECT w, i, 10 + i % 90, repeat('s', 50) FROM generate_series(1, $warehouses) w, generate_series(1, $items) i;
CREATE TABLE new_order (no_w_id int, no_d_id int, no_o_id int, PRIMARY KEY (no_w_id, no_d_id, no_o_id));
INSERT INTO new_order SELECT w, d, o FROM generate_series(1, $warehouses) w, generate_series(1, 10) d, generate_series(2101, 3000) o;
CREATE TABLE orders (o_w_id int, o_d_id int, o_id int, o_c_id int, o_entry_d timestamp, o_carrier_id int, PRIMARY KEY (o_w_id, o_d_id, o_id));
INSERT INTO orders SELECT w, d, o, 1 + (o * 7) % 3000, now(), o % 10 FROM generate_series(1, $warehouses) w, generate_series(1, 10) d, generate_series(1, 3000) o;
CREATE INDEX idx_order ON orders (o_w_id, o_d_id, o_c_id, o_id);
ANALYZE;"
for sys in pinax stock; do psql_on $sys -c "$setup" >/dev/null; done
{
  echo "\\set w random(1, $warehouses)"
  for k in $(seq 1 10); do echo "\\set i$k random(1, $items)"; done
  echo "BEGIN;"
  echo "SELECT s_quantity, s_data FROM stock WHERE (s_w_id, s_i_id) IN ($(for k in $(seq 1 10); do printf '(:w, :i%d)%s' "$k" "$([[ $k -lt 10 ]] && echo ', ')"; done)) FOR UPDATE;"
  echo "COMMIT;"
} > "$scripts/stock.sql"
printf '\\set w random(1, %s)\n\\set d random(1, 10)\nSELECT no_o_id FROM new_order WHERE no_w_id = :w AND no_d_id = :d ORDER BY no_o_id LIMIT 1;\n' "$warehouses" > "$scripts/oldest.sql"
printf '\\set w random(1, %s)\n\\set d random(1, 10)\n\\set c random(1, 3000)\nSELECT o_id, o_entry_d, o_carrier_id FROM orders WHERE o_w_id = :w AND o_d_id = :d AND o_c_id = :c ORDER BY o_id DESC LIMIT 1;\nSELECT count(*), max(o_carrier_id) FROM orders WHERE o_w_id = :w AND o_d_id = :d AND o_c_id = :c;\n' "$warehouses" > "$scripts/by_index.sql"
echo "index paths: $warehouses warehouses, $items items, $clients client(s), ${secs}s a run, $rounds rounds, $(nproc) cores, $(date -u '+%F %H:%M') UTC"
for q in stock oldest by_index; do
  echo "  $q plan on Pinax:"; psql_on pinax -c "SET plan_cache_mode = force_custom_plan" -c "EXPLAIN (COSTS OFF) $(grep -E '^SELECT' "$scripts/$q.sql" | head -1 | sed 's/:w/1/g; s/:d/3/g; s/:c/7/g; s/:i\([0-9]*\)/\1/g')" | sed 's/^/    /'
done
declare -A tps
# run SYS SCRIPT ROUND [VARIANT [PGOPTIONS]]: one pgbench run; sets tps[VARIANT,SCRIPT,ROUND].
run() {
  local sys=$1 q=$2 r=$3 variant=${4:-$1} out
  out=$(PGOPTIONS="${5:-}" "$pgbin/pgbench" -n -M prepared -h 127.0.0.1 -p "$(port_of "$sys")" -U "$user" -c "$clients" -j "$clients" -T "$secs" -f "$scripts/$q.sql" postgres 2>&1) || echo "$out" | tail -3
  tps[$variant,$q,$r]=$(awk '/^tps = / { printf "%.0f", $3; exit }' <<<"$out")
}
printf "%-9s %6s %10s %10s %8s %14s\n" query round pinax_tps pg_tps tps_x pinax_no_bitmap
for q in stock oldest by_index; do
  xs=()
  for r in $(seq 1 "$rounds"); do
    order="pinax stock"; (( r % 2 == 0 )) && order="stock pinax"
    for sys in $order; do run "$sys" "$q" "$r"; done
    nb="-"
    if [[ $q == stock ]]; then run pinax "$q" "$r" nobitmap "-c enable_bitmapscan=off"; nb=${tps[nobitmap,$q,$r]}; fi
    xs+=("$(ratio "${tps[pinax,$q,$r]}" "${tps[stock,$q,$r]}")")
    printf "%-9s %6s %10s %10s %8s %14s\n" "$q" "$r" "${tps[pinax,$q,$r]}" "${tps[stock,$q,$r]}" "${xs[-1]}" "$nb"
  done
  nbm="-"; [[ $q == stock ]] && nbm=$(round_median tps nobitmap "$q")
  printf "%-9s %6s %10s %10s %8s %14s  (ratio range %s)\n" "$q" median "$(round_median tps pinax "$q")" "$(round_median tps stock "$q")" "$(echo "${xs[*]}" | median)" "$nbm" "$(echo "${xs[*]}" | spread)"
done
