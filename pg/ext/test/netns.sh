#!/usr/bin/env bash
# Multi-host test: a 4-node cluster whose nodes are hosts of their own
# (`pinax cluster start --netns`: each node in a network namespace with its own
# address on a bridge, no shared loopback, joined with --join and a join token
# over the bridge).
# The bank test (bank/bank.sh, all three isolation levels) runs through nodes 3's
# and 4's PostgreSQL while, in turn, node 1 (the first master) is killed and
# restarted and node 2 is cut off the network (its link down) and healed. Its
# checks (total unchanged, every committed transfer in the history once, no
# counter increment lost) must hold across the failovers and the partitions.
#
# Needs root (network namespaces); skipped otherwise.
# Usage: pg/ext/test/netns.sh [SECONDS_PER_LEVEL]   (default 8)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${PINAX_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/pinax/target}/debug/pinax}"
secs="${1:-8}"

if [[ "$(id -u)" != 0 ]] || ! ip netns list >/dev/null 2>&1; then
  echo "netns: skipped (network namespaces need root)"
  exit 0
fi
# shellcheck source=pg/ext/test/lib.sh
source "$(dirname "$0")/lib.sh"
rpc=$(pick_ports 8)
pg=$((rpc + 4))
prefix="pnxt$$"
subnet=10.88.0
dir="$(mktemp -d /tmp/pinax-netns.XXXXXX)"
chmod 755 "$dir"
chaos_pid=
cleanup() {
  [[ -n "$chaos_pid" ]] && kill "$chaos_pid" 2>/dev/null && wait "$chaos_pid" 2>/dev/null
  "$bin" cluster stop --data-dir "$dir" >/dev/null 2>&1 || true
  if [[ -n "${PINAX_KEEP_LOGS:-}" && "${status:-1}" != 0 ]]; then
    mkdir -p "$PINAX_KEEP_LOGS"
    for n in 1 2 3 4; do cp "$dir/node-$n/pinax.log" "$PINAX_KEEP_LOGS/node-$n.log"; cp "$dir/node-$n/pg/postgres.log" "$PINAX_KEEP_LOGS/pg-$n.log"; done 2>/dev/null || true
  fi
  for ns in $(ip netns list | awk -v p="$prefix-" 'index($1, p) == 1 { print $1 }'); do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
# Logs kept for a failure carry the transaction trace (node/trace.rs; add
# pinax_raft_trace=debug for every group's elections, raft/group.rs).
[[ -n "${PINAX_KEEP_LOGS:-}" ]] && export RUST_LOG="${RUST_LOG:-info,openraft=warn,pinax_trace=debug}"

if ! "$bin" cluster start --nodes 4 --netns "$prefix" --subnet "$subnet" --data-dir "$dir" --base-port "$rpc" --pg-port "$pg" --tablets-per-node 2 >/dev/null; then
  for l in "$dir"/node-*/pinax.log; do echo "--- $l"; tail -20 "$l"; done >&2
  exit 1
fi
fail() { echo "netns: $*" >&2; exit 1; }
# Each node is its own host: it serves on its own address, nothing on this
# namespace's loopback, and the nodes know each other by those addresses.
for i in 1 2 3 4; do
  ip netns exec "$prefix-sw" bash -c "exec 3<>/dev/tcp/$subnet.$i/$((rpc + i - 1))" 2>/dev/null || fail "node $i does not answer at $subnet.$i"
  ! bash -c "exec 3<>/dev/tcp/127.0.0.1/$((rpc + i - 1))" 2>/dev/null || fail "node $i's port answers on this host's loopback"
done
st=$(ip netns exec "$prefix-sw" "$bin" status --certs-dir "$dir/node-1/certs" --addr "$subnet.1:$rpc")
grep -q "nodes: 4 live: 1@$subnet.1:$rpc 2@$subnet.2:$((rpc + 1)) 3@$subnet.3:$((rpc + 2)) 4@$subnet.4:$((rpc + 3))" <<<"$st" || fail "the master does not list the 4 nodes at their addresses: $st"
# Nodes 2-4 joined as on machines of their own: with a join token, their
# certificates issued by node 1 (the CA key's holder) over the bridge.
for i in 2 3 4; do
  grep -q "joined with a token" "$dir/node-$i/pinax.log" || fail "node $i did not join with a token"
  [[ ! -e "$dir/node-$i/certs/ca.key" ]] || fail "node $i holds the CA key"
done

# Clients use the nodes' PostgreSQL through their Unix sockets (a file: reachable
# from any namespace); every node-to-node message crosses the bridge.
export PGUSER=$superuser
on() { local n=$1; shift; psql -X -q -v ON_ERROR_STOP=1 -h "$dir/node-$n/pg" -p $((pg + n - 1)) -tA "$@"; }
on 3 -d postgres -c "CREATE DATABASE bank_netns"
on 4 -d bank_netns -c "CREATE TABLE probe (id int PRIMARY KEY, v text)" -c "INSERT INTO probe SELECT g, 'x' FROM generate_series(1, 100) g"
[[ "$(on 1 -d bank_netns -c "SELECT count(*) FROM probe")" == 100 ]] || fail "rows written on node 4 are not read on node 1"

# PostgreSQL clients on another host (the bridge's namespace): a password over
# TLS (sslmode=verify-full against the cluster CA: each node's certificate names
# its address), or nothing. Roles, row-level security and column privileges
# made on one node hold on every node.
on 3 -d bank_netns >/dev/null <<'SQL'
CREATE ROLE alice LOGIN PASSWORD 'alice-secret';
CREATE TABLE notes (id int PRIMARY KEY, owner text, body text, secret text);
INSERT INTO notes VALUES (1, 'alice', 'a1', 's1'), (2, 'bob', 'b2', 's2'), (3, 'alice', 'a3', 's3');
ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
CREATE POLICY own ON notes USING (owner = current_user);
GRANT SELECT (id, owner, body) ON notes TO alice;
SQL
remote() { ip netns exec "$prefix-sw" env PGPASSFILE="$dir/none" "$@"; }
for i in 1 2 3 4; do
  conn="host=$subnet.$i port=$((pg + i - 1)) dbname=bank_netns"
  ! remote psql -X -w "$conn user=$superuser sslmode=require" -c 'SELECT 1' >/dev/null 2>&1 || fail "node $i's PostgreSQL took a client without a password"
  ! remote env PGPASSFILE="$dir/credentials" psql -X -w "$conn user=$superuser sslmode=disable" -c 'SELECT 1' >/dev/null 2>&1 \
    || fail "node $i's PostgreSQL took a password over a connection without TLS"
  got=$(remote env PGPASSFILE="$dir/credentials" psql -X -w -tA "$conn user=$superuser sslmode=verify-full sslrootcert=$dir/certs/ca.crt" \
    -c 'SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()') || fail "node $i: no verify-full connection with the generated password"
  [[ "$got" == t ]] || fail "node $i: the connection is not TLS ($got)"
  alice="$conn user=alice sslmode=verify-full sslrootcert=$dir/certs/ca.crt"
  got=$(remote env PGPASSWORD=alice-secret psql -X -w -tA "$alice" -c "SELECT string_agg(body, ',' ORDER BY id) FROM notes") || fail "node $i: alice cannot log in"
  [[ "$got" == "a1,a3" ]] || fail "node $i: row-level security let alice see '$got'"
  ! remote env PGPASSWORD=alice-secret psql -X -w -tA "$alice" -c "SELECT secret FROM notes" >/dev/null 2>&1 || fail "node $i: alice read a column she was not granted"
  ! remote env PGPASSWORD=wrong psql -X -w -tA "$alice" -c "SELECT 1" >/dev/null 2>&1 || fail "node $i: a wrong password was taken"
done
# The role's password reached every node as PostgreSQL's verifier: no node's
# files (the DDL log in the master's Raft log and store among them) hold it.
! grep -rqa "alice-secret" "$dir"/node-* || fail "a role's password is stored in plaintext under a node's data directory"
echo "netns: PostgreSQL clients need a password and TLS off this host; roles, RLS and column privileges hold on all 4 nodes: ok"

# Node 1 killed and restarted, then node 2 cut off and healed, in turn, a few
# seconds each; never both at once (three replicas: a tablet keeps a majority).
(
  while true; do
    sleep 2
    "$bin" cluster kill 1 --data-dir "$dir" >/dev/null
    sleep 3
    "$bin" cluster restart 1 --data-dir "$dir" >/dev/null
    sleep 2
    "$bin" cluster cut 2 --data-dir "$dir" >/dev/null
    sleep 3
    "$bin" cluster heal 2 --data-dir "$dir" >/dev/null
  done
) &
chaos_pid=$!
status=0
BANK_SERVERS="$dir/node-3/pg:$((pg + 2)) $dir/node-4/pg:$((pg + 3))" PGHOST="$dir/node-3/pg" PGPORT=$((pg + 2)) \
  "$here/bank/bank.sh" bank_netns "$secs" 4 40 | sed 's/^bank/bank on 4 hosts (nodes 3 and 4) with kills and partitions/' || status=1
kill "$chaos_pid" 2>/dev/null; wait "$chaos_pid" 2>/dev/null || true
chaos_pid=
"$bin" cluster heal 2 --data-dir "$dir" >/dev/null
# (The chaos may have stopped with node 1 killed, and a read may meet its death:
# node 1 back, the probe retried on "unavailable", as an application would.)
"$bin" cluster restart 1 --data-dir "$dir" >/dev/null 2>&1 || true
for _ in 1 2 3 4 5; do got=$(on 3 -d bank_netns -c "SELECT count(*) FROM probe" 2>&1) && break; sleep 2; done
[[ "$got" == 100 ]] || { echo "netns: probe table has $got rows, not 100" >&2; status=1; }
exit $status
