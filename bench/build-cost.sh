#!/usr/bin/env bash
# What librdkafka's TLS, curl (OIDC) and zstd support cost to build: builds a binary
# that only links rdkafka twice from a clean target dir, once with the features the
# workspace used before (tokio, libz) and once with the workspace's current ones,
# and prints the CPU and wall time of each. CPU seconds are the figure to compare:
# wall time depends on what else the machine is doing.
#   bench/build-cost.sh            # about 5-15 minutes on 2 cores
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
features_now=$(grep -E '^rdkafka = ' "$root/Cargo.toml" | sed -E 's/.*features = (\[[^]]*\]).*/\1/')
for side in before now; do
  case $side in
    before) features='["tokio", "libz"]' ;;
    now) features=$features_now ;;
  esac
  mkdir -p "$work/$side/src"
  echo 'fn main() {}' > "$work/$side/src/main.rs"
  cat > "$work/$side/Cargo.toml" <<TOML
[package]
name = "build-cost-$side"
version = "0.0.0"
edition = "2024"
[dependencies]
rdkafka = { version = "0.39", default-features = false, features = $features }
[profile.dev.package.rdkafka-sys]
opt-level = 2
TOML
  cp "$root/Cargo.lock" "$work/$side/"
  echo "== $side: rdkafka features $features"
  ( cd "$work/$side" && /usr/bin/time -f "$side: user %U s, sys %S s, wall %e s" cargo build -q 2>&1 | tail -1 )
done
