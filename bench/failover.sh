#!/usr/bin/env bash
# Failover times on a local 3-node cluster (RF 3): 10 rounds of SIGKILL of one
# tablet's leader, timing until a write to that tablet succeeds again (election +
# client rerouting), then restarting the node. Prints each round, the median and
# the worst. Runs the ignored `failover_times` test of crates/node/tests/cluster.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/pinax/target}"
echo "failover: 3 nodes, RF 3, 10 kills, $(nproc) cores, $(date -u +%F)"
cargo test -q --locked -p pinax --test cluster failover_times -- --ignored --nocapture 2>&1 | grep -E "^(round|failover)"
