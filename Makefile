# Pinax — see README.md. Two commands matter: `make start` and `make test`.
SHELL := /bin/bash
export CARGO_TARGET_DIR ?= $(HOME)/.cache/pinax/target
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo
PINAX_DATA_DIR ?= $(HOME)/.pinax
APT_PACKAGES := build-essential clang libclang-dev pkg-config postgresql-15 postgresql-server-dev-15 postgresql-contrib
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: start stop status test deps build check bench clean-cache

## Install what is missing (Debian 12): apt packages and a Rust toolchain check.
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@command -v $(CARGO) >/dev/null || { echo "error: cargo not found; install Rust (https://rustup.rs)"; exit 1; }

# One build serves start, test and bench: `--all-targets` unifies features exactly as
# `cargo test` does, so the RocksDB C++ build (the slow part) happens once.
# The dev profile is optimised (see Cargo.toml).
PINAX_BIN := $(CARGO_TARGET_DIR)/debug/pinax

build: deps
	$(CARGO) build --workspace --all-targets --locked

## Build and start a single-node cluster in the background.
start: build
	$(PINAX_BIN) start --data-dir $(PINAX_DATA_DIR)

stop:
	@if [ -x $(PINAX_BIN) ]; then $(PINAX_BIN) stop --data-dir $(PINAX_DATA_DIR); else echo "pinax is not built"; fi

status:
	$(PINAX_BIN) status --data-dir $(PINAX_DATA_DIR)

## Every test tier: unit, golden, conformance, MVCC/transaction, process-level.
test: build
	$(CARGO) test --workspace --all-targets --locked --no-fail-fast
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

check: deps
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

## Benchmarks (not tests): see bench/README.md.
bench: build
	bash bench/client_writes.sh

clean-cache:
	rm -rf $(CARGO_TARGET_DIR)
