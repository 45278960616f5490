# Shared by the side-by-side benchmarks (sourced): starts a Pinax node (with its
# PostgreSQL) and a stock PostgreSQL 15 cluster on free ports in a temporary
# directory, both with fsync and synchronous commit on, and measures their CPU.
#
# After sourcing: $dir, $user, port_of SYS, cpu_of SYS (ticks; SYS = pinax|stock),
# $tck (ticks per second), psql_on SYS ARGS..., and cleanup on exit.
# PINAX_START_ARGS: extra arguments for `pinax start`.
# PINAX_NODES=N (default 1): run Pinax as a local N-node cluster (`pinax cluster
# start`, replication factor min(N, 3)); its CPU is that of every node's daemon plus
# node 1's PostgreSQL.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The daemon: PINAX_BIN, else the `perf` build (`make perf`: no debug assertions).
bin="${PINAX_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/pinax/target}/perf/pinax}"
[[ -x $bin ]] || { echo "no pinax binary at $bin: run make perf (or set PINAX_BIN)" >&2; exit 1; }
pgbin=/usr/lib/postgresql/15/bin
tck=$(getconf CLK_TCK)

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() {
  local p
  for _ in $(seq 1 200); do
    # Below Linux's ephemeral range (32768+): an outgoing connection's local port
    # there is free to connect() but can make the node's bind fail.
    p=$(( 20000 + RANDOM % 12000 ))
    ok=1
    for i in $(seq 0 $((2 * nodes))); do port_free "$((p + i))" || ok=0; done
    if [[ $ok == 1 ]]; then echo "$p"; return; fi
  done
  exit 1
}
nodes="${PINAX_NODES:-1}"
base=$(pick_port)
rpc=$base; pinax_pg=$((base + nodes)); stock_pg=$((base + 2 * nodes))  # nodes RPC, nodes PostgreSQL, stock
dir="$(mktemp -d /tmp/pinax-bench.XXXXXX)"
chmod 755 "$dir"
user=postgres; run_pg=(runuser -u postgres --)
if [[ "$(id -u)" != 0 ]]; then user="$(id -un)"; run_pg=(); fi
# The data directory of the node running PostgreSQL, and of every node.
if [[ $nodes == 1 ]]; then pinax_home="$dir/pinax"; node_dirs=("$dir/pinax"); else
  pinax_home="$dir/pinax/node-1"; node_dirs=(); for i in $(seq 1 "$nodes"); do node_dirs+=("$dir/pinax/node-$i"); done; fi
cleanup() {
  if [[ $nodes == 1 ]]; then "$bin" stop --data-dir "$dir/pinax" >/dev/null 2>&1 || true
  else "$bin" cluster stop --data-dir "$dir/pinax" >/dev/null 2>&1 || true; fi
  "${run_pg[@]}" "$pgbin/pg_ctl" -D "$dir/stock" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

if [[ $nodes == 1 ]]; then
  # shellcheck disable=SC2086
  "$bin" start --data-dir "$dir/pinax" --port "$rpc" --pg-port "$pinax_pg" ${PINAX_START_ARGS:-} >/dev/null
else
  # shellcheck disable=SC2086
  "$bin" cluster start --nodes "$nodes" --data-dir "$dir/pinax" --base-port "$rpc" --pg-port "$pinax_pg" ${PINAX_CLUSTER_ARGS:-} >/dev/null
fi
# Pinax's PostgreSQL wants the generated password (a secure node; none with
# --insecure). Clients of both servers connect without TLS (loopback), so
# neither pays for encryption the other does not.
export PGPASSFILE="$dir/pinax/credentials" PGSSLMODE=disable
mkdir -p "$dir/stock"
[[ "$(id -u)" == 0 ]] && chown postgres "$dir/stock"
"${run_pg[@]}" "$pgbin/initdb" -D "$dir/stock" --auth=trust --encoding=UTF8 --locale=C.UTF-8 -U "$user" >/dev/null
printf "listen_addresses = '127.0.0.1'\nport = %s\nunix_socket_directories = '%s'\n" "$stock_pg" "$dir/stock" >> "$dir/stock/postgresql.conf"
"${run_pg[@]}" "$pgbin/pg_ctl" -D "$dir/stock" -l "$dir/stock/log" -w start >/dev/null

postmaster_pid() { head -1 "$1/postmaster.pid"; }
# CPU ticks of a postmaster, its live children and its reaped children. Waits (at
# most 3 s) until no client backend is left: one exiting while this reads would be
# counted neither live (its /proc entry gone by the time it is read) nor reaped (the
# postmaster's counters read before). That race lost most of the backends' CPU right
# after a pgbench run (YCSB C once showed PostgreSQL at 6 us per read, 18-22 us
# measured with the wait).
pg_cpu() {
  local pm=$1 total=0 pid s
  for _ in $(seq 1 300); do
    grep -qE '\([0-9]+\)|\[local\]' <<<"$(ps -o args= --ppid "$pm")" || break
    sleep 0.01
  done
  s=$(awk '{print $14+$15+$16+$17}' "/proc/$pm/stat")
  total=$s
  for pid in $(ps -o pid= --ppid "$pm"); do
    s=$(awk '{print $14+$15}' "/proc/$pid/stat" 2>/dev/null || echo 0)
    total=$((total + s))
  done
  echo "$total"
}
daemon_cpu() {
  local t=0 d
  for d in "${node_dirs[@]}"; do t=$((t + $(awk '{print $14+$15}' "/proc/$(cat "$d/pinax.pid")/stat"))); done
  echo "$t"
}
# The daemons' CPU by thread kind ("kind ticks" lines; a kind is a thread's name
# without its digits: rocksdb:low, tokio-runtime-w, ...). PINAX_THREADS=1 makes
# seed.sh print each step's breakdown: where a step's daemon CPU went.
daemon_threads() {
  local d t
  for d in "${node_dirs[@]}"; do
    for t in /proc/"$(cat "$d/pinax.pid")"/task/*; do
      # comm may hold spaces: the fields after it start past the last ')'.
      printf '%s %s\n' "$(tr -d '0-9 ' 2>/dev/null <"$t/comm")" "$(sed 's/.*) //' "$t/stat" 2>/dev/null | awk '{print $12+$13}')"
    done
  done | awk 'NF == 2 {s[$1] += $2} END {for (k in s) print k, s[k]}' | sort
}
# The difference of two daemon_threads outputs, in ms, largest first.
threads_diff() {
  join -a 2 -e 0 -o 0,1.2,2.2 <(echo "$1") <(echo "$2") |
    awk -v tck="$tck" '{d = ($3 - $2) * 1000 / tck; if (d > 0) printf "%s=%d ", $1, d}' | tr ' ' '\n' | sort -t= -k2 -nr | tr '\n' ' '
}
cpu_of() {
  if [[ $1 == pinax ]]; then
    echo $(( $(pg_cpu "$(postmaster_pid "$pinax_home/pg")") + $(daemon_cpu) ))
  else
    pg_cpu "$(postmaster_pid "$dir/stock")"
  fi
}
# Wait until SYS's servers are idle (less than 20 ms of CPU in half a second, at
# most 30 s): work a statement leaves behind (Pinax: applying a transaction's
# intents; PostgreSQL: autovacuum) then counts towards it.
# Idle: two 0.5 s windows in a row with under 20 ms of CPU each (one quiet window
# was not enough: a compaction starting later landed on the next step).
wait_idle() {
  local a b quiet=0
  a=$(cpu_of "$1")
  for _ in $(seq 1 60); do
    sleep 0.5
    b=$(cpu_of "$1")
    if (( (b - a) * 1000 / tck < 20 )); then
      quiet=$((quiet + 1))
      (( quiet >= 2 )) && return
    else
      quiet=0
    fi
    a=$b
  done
}
port_of() { if [[ $1 == pinax ]]; then echo "$pinax_pg"; else echo "$stock_pg"; fi; }
psql_on() { local sys=$1; shift; psql -X -q -h 127.0.0.1 -p "$(port_of "$sys")" -U "$user" -d postgres -v ON_ERROR_STOP=1 "$@"; }

# Median of the whitespace-separated numbers on stdin (the lower middle one of an
# even count; "-" entries, no ratio, are left out; "-" if nothing is left).
median() { tr ' ' '\n' | awk 'NF && $1 != "-"' | sort -n | awk '{ a[NR] = $1 } END { print (NR ? a[int((NR + 1) / 2)] : "-") }'; }
# "min-max" of the numbers on stdin, as `median` takes them (run-to-run spread).
spread() { tr ' ' '\n' | awk 'NF && $1 != "-"' | sort -n | awk '{ a[NR] = $1 } END { if (NR) printf "%s-%s\n", a[1], a[NR]; else print "-" }'; }
# A / B with format FMT ("-" when B is 0 or empty): ratio A B [FMT].
ratio() { awk -v a="$1" -v b="$2" -v f="${3:-%.2f}" 'BEGIN { if (b + 0 > 0) printf f "\n", a / b; else print "-" }'; }
# Median over rounds 1..$rounds of ARRAY[VARIANT,STEP,round]: round_median ARRAY VARIANT STEP.
round_median() {
  local -n values=$1
  local r
  for r in $(seq 1 "$rounds"); do echo -n "${values[$2,$3,$r]} "; done | median
}
