#!/usr/bin/env bash
# What TLS between nodes costs: the seed workload (bench/seed.sh) on a 3-node
# cluster (RF 3), secure (mutual TLS between the nodes, the default) and
# `--insecure` (plaintext), taking turns: pair 1 secure first, pair 2 plaintext
# first, ... Each run starts its own cluster (and stock PostgreSQL, whose figures
# show how noisy the machine was). Prints every run's Pinax wall and server CPU
# per step, then per step the medians of each mode and the secure/plaintext ratio.
#
# Usage: bench/tls.sh [ROWS] [PAIRS]     (default 300000 rows, 3 pairs)
set -euo pipefail
rows="${1:-300000}"
pairs="${2:-3}"
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mktemp -d /tmp/pinax-tls-bench.XXXXXX)"
trap 'rm -rf "$out"' EXIT
declare -A wall cpu
steps=()
for p in $(seq 1 "$pairs"); do
  order="tls plain"; (( p % 2 == 0 )) && order="plain tls"
  for mode in $order; do
    args=""; [[ $mode == plain ]] && args="--insecure"
    PINAX_NODES=3 PINAX_CLUSTER_ARGS="$args" "$here/seed.sh" "$rows" 1 >"$out/$mode.$p"
    # The first table: step pinax_ms pg_ms wall_x pinax_cpu_ms pg_cpu_ms cpu_x
    while read -r step pw _ _ pc _; do
      wall[$mode,$step,$p]=$pw; cpu[$mode,$step,$p]=$pc
      [[ $p == 1 && $mode == "${order%% *}" ]] && steps+=("$step")
    done < <(awk '/^step /{n++; next} n==1 && NF==7' "$out/$mode.$p")
    echo "pair $p $mode: $(awk '/^step /{n++; next} n==1 && NF==7 {printf "%s %s/%s ms  ", $1, $2, $5}' "$out/$mode.$p")" >&2
  done
done
median() { sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%d\n", (a[NR/2]+a[NR/2+1])/2}'; }
echo "TLS between nodes: seed workload, $rows rows per insert, 3 nodes RF 3, $pairs pair(s) interleaved, $(nproc) cores, $(date -u +%F)"
printf "%-8s %10s %10s %7s %12s %12s %7s\n" step tls_ms plain_ms wall_x tls_cpu_ms plain_cpu_ms cpu_x
for s in "${steps[@]}"; do
  tw=$(for p in $(seq 1 "$pairs"); do echo "${wall[tls,$s,$p]}"; done | median)
  pw=$(for p in $(seq 1 "$pairs"); do echo "${wall[plain,$s,$p]}"; done | median)
  tc=$(for p in $(seq 1 "$pairs"); do echo "${cpu[tls,$s,$p]}"; done | median)
  pc=$(for p in $(seq 1 "$pairs"); do echo "${cpu[plain,$s,$p]}"; done | median)
  printf "%-8s %10d %10d %7s %12d %12d %7s\n" "$s" "$tw" "$pw" "$(awk -v a="$tw" -v b="$pw" 'BEGIN{printf (b>0 ? "%.2f" : "-"), a/b}')" \
    "$tc" "$pc" "$(awk -v a="$tc" -v b="$pc" 'BEGIN{printf (b>0 ? "%.2f" : "-"), a/b}')"
done
