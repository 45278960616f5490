#!/usr/bin/env bash
# Serial keys against explicit keys, Pinax and stock PostgreSQL 15 side by side:
# INSERT ... SELECT of ROWS rows into a table keyed by a serial column (values from
# the sequence: on Pinax, the cluster's, taken max(CACHE, 100) at a time) and into
# the same table with the key given. Printed per system and sequence CACHE: wall
# time and server CPU of each, and serial/explicit ratios. ROUNDS rounds, the
# variants interleaved; the median of each is printed.
#
# Usage: bench/sequences.sh [ROWS] [ROUNDS]   (default 100000 rows, 3 rounds)
set -euo pipefail
rows="${1:-100000}"
rounds="${2:-3}"
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

echo "sequences: $rows rows per INSERT, $rounds rounds, $(nproc) cores, $(date -u +%F)"
printf "%-6s %6s %10s %10s %10s %10s %8s %8s\n" system cache serial_ms expl_ms serial_cpu expl_cpu wall_x cpu_x
for sys in pinax stock; do
  for cache in 1 10000; do
    psql_on $sys -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS s, e" -c "CREATE TABLE s (id bigserial PRIMARY KEY, v int)" -c "CREATE TABLE e (id bigint PRIMARY KEY, v int)" \
      -c "ALTER SEQUENCE s_id_seq CACHE $cache"
    : > "$dir/s_ms"; : > "$dir/e_ms"; : > "$dir/s_cpu"; : > "$dir/e_cpu"
    for _ in $(seq 1 "$rounds"); do
      for t in s e; do
        psql_on $sys -c "TRUNCATE $t"
        if [[ $t == s ]]; then sql="INSERT INTO s (v) SELECT g FROM generate_series(1, $rows) g"; else sql="INSERT INTO e (id, v) SELECT g, g FROM generate_series(1, $rows) g"; fi
        c0=$(cpu_of $sys); t0=$(date +%s%N)
        psql_on $sys -c "$sql"
        t1=$(date +%s%N); c1=$(cpu_of $sys)
        echo $(( (t1 - t0) / 1000000 )) >> "$dir/${t}_ms"
        echo $(( (c1 - c0) * 1000 / tck )) >> "$dir/${t}_cpu"
      done
    done
    sm=$(median < "$dir/s_ms"); em=$(median < "$dir/e_ms"); sc=$(median < "$dir/s_cpu"); ec=$(median < "$dir/e_cpu")
    printf "%-6s %6s %10s %10s %10s %10s %8.2f %8.2f\n" $sys "$cache" "$sm" "$em" "$sc" "$ec" "$(echo "$sm / $em" | bc -l)" "$(echo "$sc / ($ec + 0.001)" | bc -l)"
  done
done
