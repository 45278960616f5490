#!/usr/bin/env bash
# Client-level write throughput of one Pinax node (issue #3). Not a test.
# Starts a node on a free port in a temporary data dir, runs pinax-bench, stops it.
# Usage: bench/client_writes.sh [--no-sync] [pinax-bench args...]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/pinax/target}
T=$CARGO_TARGET_DIR
cargo build --workspace --all-targets --locked >/dev/null
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sync_flag=""
if [ "${1:-}" = "--no-sync" ]; then sync_flag="--no-sync"; shift; fi
trap '"$T/debug/pinax" stop --data-dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
# The Rust client only: no PostgreSQL (which could not run from mktemp's private dir).
"$T/debug/pinax" start --data-dir "$dir" --port "$port" --no-postgres $sync_flag >/dev/null
echo "# pinax client benchmark: $(date -u +%FT%TZ), $(nproc) cores, fsync: ${sync_flag:-on}"
"$T/debug/pinax-bench" --addr "127.0.0.1:$port" --certs-dir "$dir/certs" "$@"
