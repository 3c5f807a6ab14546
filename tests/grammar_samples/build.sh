#!/usr/bin/env bash
set -euo pipefail

# Builds the release archive.
build_release() {
  cargo build --release
}

build_release "$@"
