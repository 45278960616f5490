#!/usr/bin/env bash
# The seed workload on Pinax and on stock PostgreSQL 15, side by side in one run.
#
#   create table demo (id uuid default gen_random_uuid() primary key, value float);
#   insert into demo(value) select random() from generate_series(1,N)   -- twice
#   update demo set value = value + 1;  select count(*) from demo;  delete from demo;
#
# Both servers run on this machine with the same settings (fsync on, synchronous
# commit on, shared_buffers 128MB). Steps alternate between the systems; each is a
# separate psql call. Per step it prints wall time and server CPU time (PostgreSQL:
# postmaster + all its processes, including exited backends; Pinax: the same plus the
# node daemon), and the Pinax/PostgreSQL ratios.
#
# Usage: bench/seed.sh [ROWS] [ROUNDS]     (default 1000000 rows, 1 round)
set -euo pipefail
rows="${1:-1000000}"
rounds="${2:-1}"
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${PINAX_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/pinax/target}/debug/pinax}"
pgbin=/usr/lib/postgresql/15/bin
tck=$(getconf CLK_TCK)

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() {
  local p
  for _ in $(seq 1 200); do
    p=$(( 20000 + RANDOM % 20000 ))
    if port_free "$p" && port_free "$((p + 1))" && port_free "$((p + 2))"; then echo "$p"; return; fi
  done
  exit 1
}
base=$(pick_port)
rpc=$base; pinax_pg=$((base + 1)); stock_pg=$((base + 2))
dir="$(mktemp -d /tmp/pinax-seed.XXXXXX)"
chmod 755 "$dir"
user=postgres; run_pg=(runuser -u postgres --)
if [[ "$(id -u)" != 0 ]]; then user="$(id -un)"; run_pg=(); fi
cleanup() {
  "$bin" stop --data-dir "$dir/pinax" >/dev/null 2>&1 || true
  "${run_pg[@]}" "$pgbin/pg_ctl" -D "$dir/stock" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

"$bin" start --data-dir "$dir/pinax" --port "$rpc" --pg-port "$pinax_pg" >/dev/null
mkdir -p "$dir/stock"
[[ "$(id -u)" == 0 ]] && chown postgres "$dir/stock"
"${run_pg[@]}" "$pgbin/initdb" -D "$dir/stock" --auth=trust --encoding=UTF8 --locale=C.UTF-8 -U "$user" >/dev/null
printf "listen_addresses = '127.0.0.1'\nport = %s\nunix_socket_directories = '%s'\n" "$stock_pg" "$dir/stock" >> "$dir/stock/postgresql.conf"
"${run_pg[@]}" "$pgbin/pg_ctl" -D "$dir/stock" -l "$dir/stock/log" -w start >/dev/null

postmaster_pid() { head -1 "$1/postmaster.pid"; }
# CPU seconds of a postmaster, its live children and its reaped children.
pg_cpu() {
  local pm=$1 total=0 pid s
  s=$(awk '{print $14+$15+$16+$17}' "/proc/$pm/stat")
  total=$s
  for pid in $(ps -o pid= --ppid "$pm"); do
    s=$(awk '{print $14+$15}' "/proc/$pid/stat" 2>/dev/null || echo 0)
    total=$((total + s))
  done
  echo "$total"
}
daemon_cpu() { awk '{print $14+$15}' "/proc/$(cat "$dir/pinax/pinax.pid")/stat"; }
cpu_of() {
  if [[ $1 == pinax ]]; then
    echo $(( $(pg_cpu "$(postmaster_pid "$dir/pinax/pg")") + $(daemon_cpu) ))
  else
    pg_cpu "$(postmaster_pid "$dir/stock")"
  fi
}
port_of() { if [[ $1 == pinax ]]; then echo "$pinax_pg"; else echo "$stock_pg"; fi; }

steps=(
  "create table demo (id uuid default gen_random_uuid() primary key, value float)"
  "insert into demo(value) select random() from generate_series(1,$rows)"
  "insert into demo(value) select random() from generate_series(1,$rows)"
  "update demo set value = value + 1"
  "select count(*) from demo"
  "delete from demo"
  "drop table demo"
)
names=(create insert1 insert2 update count delete drop)
declare -A wall cpu
for r in $(seq 1 "$rounds"); do
  for i in "${!steps[@]}"; do
    for sys in pinax stock; do
      c0=$(cpu_of $sys); t0=$(date +%s%N)
      res=$(psql -X -q -tA -h 127.0.0.1 -p "$(port_of $sys)" -U "$user" -d postgres -v ON_ERROR_STOP=1 -c "select pg_backend_pid()" -c "${steps[$i]}")
      t1=$(date +%s%N)
      # The backend's CPU reaches the postmaster's cutime only once it is reaped.
      backend=$(head -1 <<<"$res"); out=$(tail -n +2 <<<"$res")
      while [[ -e /proc/$backend ]]; do sleep 0.01; done
      c1=$(cpu_of $sys)
      [[ ${names[$i]} == count && "$out" != "$((2 * rows))" ]] && { echo "wrong count on $sys: $out" >&2; exit 1; }
      wall[$sys,$i,$r]=$(( (t1 - t0) / 1000000 ))
      cpu[$sys,$i,$r]=$(( (c1 - c0) * 1000 / tck ))
    done
  done
done
echo "seed workload, $rows rows per insert, $rounds round(s), $(nproc) cores, $(date -u +%F)"
printf "%-8s %12s %12s %7s %12s %12s %7s\n" step pinax_ms pg_ms wall_x pinax_cpu_ms pg_cpu_ms cpu_x
for i in "${!steps[@]}"; do
  for r in $(seq 1 "$rounds"); do
    pw=${wall[pinax,$i,$r]}; sw=${wall[stock,$i,$r]}; pc=${cpu[pinax,$i,$r]}; sc=${cpu[stock,$i,$r]}
    printf "%-8s %12d %12d %7s %12d %12d %7s\n" "${names[$i]}" "$pw" "$sw" \
      "$(awk -v a="$pw" -v b="$sw" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "-" }')" "$pc" "$sc" \
      "$(awk -v a="$pc" -v b="$sc" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "-" }')"
  done
done
