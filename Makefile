# Pinax — see README.md. Two commands matter: `make start` and `make test`.
SHELL := /bin/bash
export CARGO_TARGET_DIR ?= $(HOME)/.cache/pinax/target
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo
# As root, PostgreSQL runs as the postgres OS user, which cannot enter /root.
PINAX_DATA_DIR ?= $(if $(filter 0,$(shell id -u)),/var/lib/pinax,$(HOME)/.pinax)
APT_PACKAGES := build-essential ccache clang iproute2 libclang-dev pkg-config postgresql-15 postgresql-server-dev-15 postgresql-contrib
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: start stop status test deps build check fmt fmt-check bench perf clean-cache ext ext-perf pgrx sqltest bank soak fuzz

## Install what is missing (Debian 12): apt packages and a Rust toolchain check.
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@command -v $(CARGO) >/dev/null || { echo "error: cargo not found; install Rust (https://rustup.rs)"; exit 1; }

# CC/CXX go through ccache (see .cargo/config.toml); its cache lives with the other
# build outputs.
export CCACHE_DIR ?= $(HOME)/.cache/pinax/ccache

# One build serves start, test and bench: `--all-targets` unifies features exactly as
# `cargo test` does, so the RocksDB C++ build (the slow part) happens once.
# The dev profile is optimised (see Cargo.toml).
PINAX_BIN := $(CARGO_TARGET_DIR)/debug/pinax
# The daemon the side-by-side benchmarks run: the `perf` profile (Cargo.toml), the
# dev build without debug assertions and overflow checks.
PERF_BIN := $(CARGO_TARGET_DIR)/perf/pinax

build: deps
	$(CARGO) build --workspace --all-targets --locked

# The PostgreSQL extension (pg/ext) is its own Cargo workspace, built by cargo-pgrx
# with its own target directory (pgrx's flags differ from the main workspace's).
PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
EXT_TARGET_DIR ?= $(HOME)/.cache/pinax/target-ext
PGRX_VERSION := 0.18.1
PGRX_SUDO := $(shell [ "$$(id -u)" = 0 ] || echo --sudo)

## cargo-pgrx, pinned to the pgrx crate's version, configured for PostgreSQL 15.
pgrx: deps
	@if [ "$$($(CARGO) pgrx --version 2>/dev/null | awk '{print $$2}')" != "$(PGRX_VERSION)" ]; then \
	  $(CARGO) install --locked cargo-pgrx --version =$(PGRX_VERSION); fi
	@[ -f $(HOME)/.pgrx/config.toml ] && grep -q pg15 $(HOME)/.pgrx/config.toml || $(CARGO) pgrx init --pg15 $(PG_CONFIG)

## Build the extension and install it into PostgreSQL 15's directories.
ext: pgrx
	cd pg/ext && CARGO_TARGET_DIR=$(EXT_TARGET_DIR) $(CARGO) pgrx install --pg-config $(PG_CONFIG) $(PGRX_SUDO)

## Build and start a single-node cluster (node daemon + PostgreSQL on port 5433).
start: build ext
	$(PINAX_BIN) start --data-dir $(PINAX_DATA_DIR)

stop:
	@if [ -x $(PINAX_BIN) ]; then $(PINAX_BIN) stop --data-dir $(PINAX_DATA_DIR); else echo "pinax is not built"; fi

status:
	$(PINAX_BIN) status --data-dir $(PINAX_DATA_DIR)

## Every test tier: unit, golden, conformance, MVCC/transaction, process-level, and
## the SQL regression tests against a started node, a 3-node cluster, schema
## changes on one node of a 3-node cluster while the other two write, a 4-node
## cluster of network namespaces (root only: nodes as separate hosts, killed and
## cut off), and a node of 16,000 tablets (2,000 tables with an index each;
## restarted and read back).
test: build ext fmt-check
	$(CARGO) test --workspace --all-targets --locked --no-fail-fast
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	cd pg/ext && CARGO_TARGET_DIR=$(EXT_TARGET_DIR) $(CARGO) clippy --locked -- -D warnings
	PINAX_BIN=$(PINAX_BIN) pg/ext/test/run.sh
	PINAX_BIN=$(PINAX_BIN) pg/ext/test/cluster.sh
	PINAX_BIN=$(PINAX_BIN) pg/ext/test/online_ddl.sh
	PINAX_BIN=$(PINAX_BIN) pg/ext/test/netns.sh
	PINAX_BIN=$(PINAX_BIN) pg/ext/test/tablets.sh

## The bank test, long version (8 clients, 60 s per isolation level, 1000 accounts).
bank: build ext
	PINAX_BANK_ONLY=1 PINAX_BANK="60 8 1000" PINAX_BIN=$(PINAX_BIN) pg/ext/test/run.sh

## Soak: the bank test on a 3-node cluster (RF 3) for 5 minutes per isolation level,
## a node killed and restarted every 3 s.
soak: build ext
	PINAX_BIN=$(PINAX_BIN) pg/ext/test/cluster.sh 300

## Only the SQL regression tests (after `make ext`).
sqltest: build ext
	PINAX_BIN=$(PINAX_BIN) pg/ext/test/run.sh

check: deps fmt-check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

## Formatting (rustfmt.toml at the root serves both workspaces): `make fmt` applies
## it, `make fmt-check` (part of `make test`) fails on any difference.
fmt:
	$(CARGO) fmt --all
	cd pg/ext && $(CARGO) fmt

fmt-check:
	$(CARGO) fmt --all -- --check
	cd pg/ext && $(CARGO) fmt -- --check

## Benchmarks (not tests): see bench/README.md.
perf: deps
	$(CARGO) build --profile perf --locked -p pinax

## The extension as benchmarks run it: release profile (opt-level 3, thin LTO), as
## PostgreSQL itself is built; `make ext` (tests, `make start`) builds the dev one.
ext-perf: pgrx
	cd pg/ext && CARGO_TARGET_DIR=$(EXT_TARGET_DIR) $(CARGO) pgrx install --release --pg-config $(PG_CONFIG) $(PGRX_SUDO)

bench: build ext-perf perf
	PINAX_BIN=$(PERF_BIN) bash bench/all.sh

clean-cache:
	rm -rf $(CARGO_TARGET_DIR)

## Coverage-guided fuzzing of every decoder of bytes from the network or the disk:
## cargo-fuzz (libFuzzer) on the stable toolchain (`-s none`: no sanitizer, so no
## nightly flags), FUZZ_SECS seconds per target (default 60). Each target's corpus
## is kept in `crates/*/fuzz/corpus/<target>` (committed, minimised); a crash
## stops the run (its input is in `crates/*/fuzz/artifacts/<target>`) and
## becomes a regression test. Prints executions and coverage per target.
FUZZ_SECS ?= 60
FUZZ_TOOLS := $(HOME)/.cache/pinax/tools
CARGO_FUZZ := $(FUZZ_TOOLS)/bin/cargo-fuzz
FUZZ_TARGETS := proto:decode_frame codec:decode_key codec:decode_stored raft:decode_raft master:decode_catalog
fuzz: deps
	@test -x $(CARGO_FUZZ) || $(CARGO) install cargo-fuzz@0.13.2 --locked --root $(FUZZ_TOOLS)
	@set -eo pipefail; for t in $(FUZZ_TARGETS); do \
	  crate=$${t%%:*}; name=$${t##*:}; \
	  echo "== $$crate/$$name ($(FUZZ_SECS) s)"; \
	  (cd crates/$$crate && CARGO_TARGET_DIR=$(HOME)/.cache/pinax/target-fuzz $(CARGO_FUZZ) run -s none $$name -- \
	    -max_total_time=$(FUZZ_SECS) -print_final_stats=1 -rss_limit_mb=4096 2>&1 \
	    | grep -E "^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb)|^#[0-9]+[[:space:]]+DONE|ERROR|panicked|SUMMARY"); \
	  (cd crates/$$crate && CARGO_TARGET_DIR=$(HOME)/.cache/pinax/target-fuzz $(CARGO_FUZZ) cmin -s none $$name >/dev/null 2>&1) || true; \
	done
