#!/usr/bin/env bash
# Bank test: N accounts spread over tablets, concurrent clients transferring random
# amounts (pgbench, retrying 40001/40P01), at READ COMMITTED, REPEATABLE READ and
# SERIALIZABLE.
# Checks: audits running alongside always see the initial total; afterwards the total
# is unchanged, every committed transfer is in the history exactly once (as many rows
# as pgbench counted), and each account's balance equals its history. Autocommit
# increments of a few counters run alongside: none may be lost.
#
# Committed transactions are counted from pgbench's per-transaction log (-l), per
# script and per client: pgbench's per-script summary is added up by its threads
# without a lock ("XXX could use a mutex here, but we choose not to" in pgbench.c),
# so with -j > 1 it can miss a transaction or two. It did, about once in 30 runs:
# one more history row than "transfers", all else consistent; the log matched the
# history exactly, client by client.
#
# Usage: bank.sh DB SECONDS CLIENTS ACCOUNTS   (PGHOST/PGPORT/PGUSER from the caller)
# BANK_SERVERS="HOST:PORT HOST:PORT …" splits the clients over those servers (one
# pgbench each, client numbers kept apart); set-up and checks use PGHOST/PGPORT.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
db=$1 secs=$2 clients=$3 accounts=$4
pgbench=/usr/lib/postgresql/15/bin/pgbench
psql_() { psql -X -q -v ON_ERROR_STOP=1 -d "$db" "$@"; }
status=0
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# BANK_LEVELS="repeatable read" runs one level only (looping a rare failure).
IFS=, read -ra levels <<<"${BANK_LEVELS:-read committed,repeatable read,serializable}"
# Statements around the rounds are tried again when they fail, as an
# application would: under a nemesis (netns.sh kills and cuts nodes all along) a
# statement can meet a node's death ("storage is unavailable ... might succeed
# if retried"). Each of these is safe to run again whole.
again() {
  local try
  for try in 1 2 3 4 5; do
    "$@" && return 0
    echo "bank: $1 failed (try $try of 5)" >&2
    sleep 2
  done
  return 1
}
# The tables of a round, made afresh.
setup() {
  psql_ -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS bank_accounts, bank_transfers, bank_counters" \
    -c "CREATE TABLE bank_counters (id int PRIMARY KEY, n bigint NOT NULL)" \
    -c "INSERT INTO bank_counters SELECT g, 0 FROM generate_series(1, 4) g" \
    -c "CREATE TABLE bank_accounts (id int PRIMARY KEY, balance bigint NOT NULL)" \
    -c "CREATE TABLE bank_transfers (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), src int, dst int, amount bigint, client int)" \
    -c "INSERT INTO bank_accounts SELECT g, 1000 FROM generate_series(1, $accounts) g"
}
for iso in "${levels[@]}"; do
  again setup
  rm -f "$logs"/tx* "$logs"/out*
  servers=(${BANK_SERVERS:-"${PGHOST:-}:${PGPORT:-}"})
  each=$(( clients / ${#servers[@]} ))
  pids=()
  for k in "${!servers[@]}"; do
    server=(-h "${servers[k]%:*}" -p "${servers[k]##*:}")
    [[ -z "${BANK_SERVERS:-}" ]] && server=()
    # Clients of server k are numbered from k * each (the history's client column).
    PGOPTIONS="-c default_transaction_isolation=${iso// /\\ }" "$pgbench" -n -M prepared -l --log-prefix="$logs/tx$k" "${server[@]}" \
      -c "$each" -j "$each" -T "$secs" --max-tries=1000 --verbose-errors -D accounts="$accounts" -D base=$(( k * each )) \
      -f "$here/transfer.sql@8" -f "$here/audit.sql@1" -f "$here/counter.sql@1" "$db" >"$logs/out$k" 2>&1 &
    pids+=($!)
  done
  failed_runs=0
  for pid in "${pids[@]}"; do wait "$pid" || failed_runs=$((failed_runs + 1)); done
  out=$(cat "$logs"/out*)
  # (`|| true`: head closing the pipe early must not end the script under pipefail.)
  (( failed_runs == 0 )) || { echo "bank ($iso): $failed_runs pgbench run(s) failed:"; grep -iE "error|fatal|abort" <<<"$out" | grep -vE "repeats|could not serialize|deadlock detected" | head -10 || true; echo "$out" | tail -3; status=1; }
  # Log lines: client, transaction number, latency (or "failed"), script number, ...
  # (files tx<server>.<pid>…). Committed transactions per script (transfers,
  # audits, increments), then the committed transfers per client as
  # "client:count,..." in client order.
  read -r transfers audits increments per_client < <(awk -v clients="$clients" -v each="$each" '
    FNR == 1 { base = FILENAME; sub(/.*\/tx/, "", base); sub(/\..*/, "", base); base *= each }
    $3 ~ /^[0-9]+$/ { n[$4]++; if ($4 == 0) c[$1 + base]++ }
    END { for (k = 0; k < clients; k++) if (k in c) p = p (p == "" ? "" : ",") k ":" c[k]; print n[0] + 0, n[1] + 0, n[2] + 0, p }' "$logs"/tx*)
  failed=$(awk -F'[: ]+' '/^number of failed transactions/ { n += $5; seen = 1 } END { if (seen) print n }' <<<"$out")
  retried=$(awk -F'[: ]+' '/^number of transactions retried/ { n += $5; seen = 1 } END { if (seen) print n }' <<<"$out")
  check=$(again psql_ -tA -F' ' -c "SELECT (SELECT sum(balance) FROM bank_accounts), (SELECT count(*) FROM bank_transfers), (SELECT sum(n) FROM bank_counters),
      (SELECT string_agg(client || ':' || n, ',' ORDER BY client) FROM (SELECT client, count(*) n FROM bank_transfers GROUP BY client) c),
      (SELECT count(*) FROM bank_accounts a WHERE a.balance <> 1000
         - coalesce((SELECT sum(amount) FROM bank_transfers WHERE src = a.id), 0)
         + coalesce((SELECT sum(amount) FROM bank_transfers WHERE dst = a.id), 0))")
  read -r total rows counted history_clients wrong <<<"$check"
  line="bank ($iso, $clients clients, ${secs}s, $accounts accounts): $transfers transfers, $audits audits, $increments increments, ${retried:-?} retried, ${failed:-?} failed; total $total, history rows $rows, counters $counted, accounts off $wrong"
  if [[ "$transfers" =~ ^[0-9]+$ && "$transfers" -gt 0 && "$total" == "$((accounts * 1000))" && "$rows" == "$transfers" && "$history_clients" == "$per_client" && "$counted" == "$increments" && "$wrong" == 0 ]]; then
    echo "$line: ok"
  else
    echo "$line: FAILED"; echo "$out" | tail -25; status=1
    echo "committed per client (pgbench log): $per_client; history rows per client: $history_clients"
    # Tell a miscount (count(*) is pushed down to the tablets) from a transfer
    # committed twice, and show the errors the clients retried after.
    psql_ -tA -F' ' -c "SELECT 'history: count(*) ' || (SELECT count(*) FROM bank_transfers) || ', count(DISTINCT id) ' || count(DISTINCT id) || ', rows scanned ' || (SELECT count(*) FROM (SELECT id FROM bank_transfers OFFSET 0) s) FROM bank_transfers"
    # The accounts whose balance is not their history's, and by how much.
    psql_ -tA -F' ' -c "SELECT 'account ' || id || ': balance ' || balance || ', history says ' || expected || ' (off by ' || balance - expected || ')'
      FROM (SELECT a.id, a.balance, 1000 - coalesce((SELECT sum(amount) FROM bank_transfers WHERE src = a.id), 0)
                   + coalesce((SELECT sum(amount) FROM bank_transfers WHERE dst = a.id), 0) AS expected FROM bank_accounts a) s
      WHERE balance <> expected ORDER BY id"
    grep -iE "error|repeats" <<<"$out" | head -20 || true
  fi
  again psql_ -c "DROP TABLE IF EXISTS bank_accounts, bank_transfers, bank_counters"
done
exit $status
