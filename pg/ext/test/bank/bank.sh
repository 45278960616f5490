#!/usr/bin/env bash
# Bank test: N accounts spread over tablets, concurrent clients transferring random
# amounts (pgbench, retrying 40001/40P01), at READ COMMITTED, REPEATABLE READ and
# SERIALIZABLE.
# Checks: audits running alongside always see the initial total; afterwards the total
# is unchanged, every committed transfer is in the history exactly once (as many rows
# as pgbench counted), and each account's balance equals its history. Autocommit
# increments of a few counters run alongside: none may be lost.
#
# Usage: bank.sh DB SECONDS CLIENTS ACCOUNTS   (PGHOST/PGPORT/PGUSER from the caller)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
db=$1 secs=$2 clients=$3 accounts=$4
pgbench=/usr/lib/postgresql/15/bin/pgbench
psql_() { psql -X -q -v ON_ERROR_STOP=1 -d "$db" "$@"; }
status=0
for iso in "read committed" "repeatable read" "serializable"; do
  psql_ -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS bank_accounts, bank_transfers, bank_counters" \
    -c "CREATE TABLE bank_counters (id int PRIMARY KEY, n bigint NOT NULL)" \
    -c "INSERT INTO bank_counters SELECT g, 0 FROM generate_series(1, 4) g" \
    -c "CREATE TABLE bank_accounts (id int PRIMARY KEY, balance bigint NOT NULL)" \
    -c "CREATE TABLE bank_transfers (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), src int, dst int, amount bigint)" \
    -c "INSERT INTO bank_accounts SELECT g, 1000 FROM generate_series(1, $accounts) g"
  out=$(PGOPTIONS="-c default_transaction_isolation=${iso// /\\ }" "$pgbench" -n -M prepared -d "$db" \
          -c "$clients" -j "$clients" -T "$secs" --max-tries=1000 --verbose-errors -D accounts="$accounts" \
          -f "$here/transfer.sql@8" -f "$here/audit.sql@1" -f "$here/counter.sql@1" 2>&1) || { grep -iE "error|fatal" <<<"$out" | head -5; echo "$out" | tail -3; status=1; }
  # " - 1476 transactions (89.8% of total, ...)" under each script's heading.
  script_txns() { awk -v s="SQL script $1:" 'index($0, s) == 1 { on = 1 } on && / transactions \(/ { print $2; exit }' <<<"$out"; }
  transfers=$(script_txns 1)
  audits=$(script_txns 2)
  increments=$(script_txns 3)
  failed=$(awk -F'[: ]+' '/^number of failed transactions/ { print $5; exit }' <<<"$out")
  retried=$(awk -F'[: ]+' '/^number of transactions retried/ { print $5; exit }' <<<"$out")
  check=$(psql_ -tA -F' ' -c "SELECT (SELECT sum(balance) FROM bank_accounts), (SELECT count(*) FROM bank_transfers), (SELECT sum(n) FROM bank_counters),
      (SELECT count(*) FROM bank_accounts a WHERE a.balance <> 1000
         - coalesce((SELECT sum(amount) FROM bank_transfers WHERE src = a.id), 0)
         + coalesce((SELECT sum(amount) FROM bank_transfers WHERE dst = a.id), 0))")
  read -r total rows counted wrong <<<"$check"
  line="bank ($iso, $clients clients, ${secs}s, $accounts accounts): $transfers transfers, $audits audits, $increments increments, ${retried:-?} retried, ${failed:-?} failed; total $total, history rows $rows, counters $counted, accounts off $wrong"
  if [[ "$transfers" =~ ^[0-9]+$ && "$transfers" -gt 0 && "$total" == "$((accounts * 1000))" && "$rows" == "$transfers" && "$counted" == "$increments" && "$wrong" == 0 ]]; then
    echo "$line: ok"
  else
    echo "$line: FAILED"; echo "$out" | tail -25; status=1
    # Tell a miscount (count(*) is pushed down to the tablets) from a transfer
    # committed twice, and show the errors the clients retried after.
    psql_ -tA -F' ' -c "SELECT 'history: count(*) ' || (SELECT count(*) FROM bank_transfers) || ', count(DISTINCT id) ' || count(DISTINCT id) || ', rows scanned ' || (SELECT count(*) FROM (SELECT id FROM bank_transfers OFFSET 0) s) FROM bank_transfers"
    grep -iE "error|repeats" <<<"$out" | head -20
  fi
  psql_ -c "DROP TABLE bank_accounts, bank_transfers, bank_counters"
done
exit $status
