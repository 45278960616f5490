#!/usr/bin/env bash
# Where TLS between nodes spends: the seed workload's inserts and update
# (bench/seed.sh's steps) on a secure 3-node cluster (RF 3) under `perf record
# -a`, then the share of all samples (every process, kernel included) that fall
# in TLS code: rustls, and ring's AEAD/GHASH/key-exchange/signature and hash
# primitives. A share is immune to the machine's noise that a wall-clock
# comparison of two runs is not (bench/tls.sh).
#
# With PINAX_CLUSTER_ARGS=--insecure: the same on plaintext, to compare the
# per-process totals.
#
# Usage: bench/tls_profile.sh [ROWS]     (default 300000)
set -euo pipefail
rows="${1:-300000}"
export PINAX_NODES=3
source "$(dirname "$0")/lib.sh"
data="$(mktemp -d /tmp/pinax-tls-profile.XXXXXX)"
trap 'rm -rf "$data"; cleanup' EXIT
psql_on pinax -c "create table demo (id uuid default gen_random_uuid() primary key, value float)"
perf record -a -F 499 -o "$data/perf.data" -- bash -c "
  psql -X -q -h 127.0.0.1 -p $(port_of pinax) -U $user -d postgres -v ON_ERROR_STOP=1 \
    -c 'insert into demo(value) select random() from generate_series(1,$rows)' \
    -c 'insert into demo(value) select random() from generate_series(1,$rows)' \
    -c 'update demo set value = value + 1'" 2>/dev/null
perf report -i "$data/perf.data" --no-children --sort comm,dso,sym --stdio 2>/dev/null | grep -E '^ +[0-9]' > "$data/report"
# Samples per process (all CPUs at 499 Hz: idle time is `swapper`'s).
perf report -i "$data/perf.data" --no-children --sort comm -n --stdio 2>/dev/null | grep -E '^ +[0-9]' > "$data/comms"
tls_re='rustls::|ring_core_|[^a-z_]ring::|aes_gcm|gcm_|ghash|chacha|poly1305|ecp_nistz|p256_|x25519|sha256_block|sha512_block'
total=$(awk '{ gsub("%", "", $1); s += $1 } END { printf "%.1f", s }' "$data/report")
tls=$({ grep -E "$tls_re" "$data/report" || true; } | awk '{ gsub("%", "", $1); s += $1 } END { printf "%.2f", s }')
[[ -n ${PROFILE_KEEP:-} ]] && cp "$data/report" "$PROFILE_KEEP.report" && cp "$data/comms" "$PROFILE_KEEP.comms"
mode=secure; [[ ${PINAX_CLUSTER_ARGS:-} == *--insecure* ]] && mode=insecure
echo "TLS between nodes, profile: seed inserts + update, $rows rows per insert, 3 nodes RF 3 $mode, $(nproc) cores, $(date -u +%F)"
echo "samples: $(perf report -i "$data/perf.data" --stdio 2>/dev/null | awk '/^# Samples:/ { print $3; exit }'), in TLS code: $tls% of all samples ($total% listed)"
echo "by process (comm): share of all samples, samples:"
head -10 "$data/comms" || true
echo "TLS code by process and symbol, top 15:"
grep -E "$tls_re" "$data/report" | head -15 || true
echo "all processes, top 15 symbols:"
head -15 "$data/report" || true
