# Pinax — see README.md. Two commands matter: `make start` and `make test`.
SHELL := /bin/bash
export CARGO_TARGET_DIR ?= $(HOME)/.cache/pinax/target
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo
PINAX_DATA_DIR ?= $(HOME)/.pinax
APT_PACKAGES := build-essential clang libclang-dev pkg-config postgresql-15 postgresql-server-dev-15 postgresql-contrib
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: start stop status test deps build build-release check bench clean-cache

## Install what is missing (Debian 12): apt packages and a Rust toolchain check.
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@command -v $(CARGO) >/dev/null || { echo "error: cargo not found; install Rust (https://rustup.rs)"; exit 1; }

build: deps
	$(CARGO) build --workspace --locked

build-release: deps
	$(CARGO) build --release --locked -p pinax

## Build and start a single-node cluster in the background.
start: build-release
	$(CARGO_TARGET_DIR)/release/pinax start --data-dir $(PINAX_DATA_DIR)

stop:
	@if [ -x $(CARGO_TARGET_DIR)/release/pinax ]; then $(CARGO_TARGET_DIR)/release/pinax stop --data-dir $(PINAX_DATA_DIR); else echo "pinax is not built"; fi

status:
	$(CARGO_TARGET_DIR)/release/pinax status --data-dir $(PINAX_DATA_DIR)

## Every test tier: unit, golden, conformance, MVCC/transaction, process-level.
test: build
	$(CARGO) test --workspace --locked --no-fail-fast

check: deps
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

## Benchmarks (not tests): see bench/README.md.
bench: build-release
	bash bench/client_writes.sh

clean-cache:
	rm -rf $(CARGO_TARGET_DIR)
