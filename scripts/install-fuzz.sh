#!/usr/bin/env bash
# Installs what coverage-guided fuzzing of the decoders needs (fuzz/README.md): the nightly
# toolchain and cargo-fuzz, which builds libFuzzer (needs a C++ compiler). Neither the build nor
# CI needs them: `cargo test` runs the seeded campaign's slice on stable.
set -euo pipefail
rustup toolchain install nightly --profile minimal
cargo install cargo-fuzz --locked
cargo +nightly fuzz --version
