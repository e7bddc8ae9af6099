#!/usr/bin/env bash
# The README's test command: installs what the tests need, then runs them all.
#   - Debian packages (openssl, curl, git, gcc, util-linux, pkg-config, prometheus, OpenSSH's client and
#     server, debootstrap, libssl-dev), with apt-get, when missing (as root, or with sudo);
#   - the member clusters' binaries (kube-apiserver, controller-manager, scheduler, etcd,
#     kwok), built from their Go modules on first use (hack/build-tools.sh);
#   - then `cargo test --workspace`, whose end-to-end tests start real member clusters,
#     among them a 40-second fault-injection soak with seed 7 (chaos::soak; hack/chaos.sh
#     runs longer ones, and docs/reliability.md records them).
# Rust (cargo) and Go >= 1.26 must be there already; a missing one is named, with where
# to get it. Caches live outside the clone (~/.cache/flotilla), so a second run is fast.
# Arguments go to `cargo test` (for example a test name filter).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '\n== %s\n' "$*" >&2; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/target}

# shellcheck source=hack/lib/test-deps.sh
source hack/lib/test-deps.sh

say "tests"
cargo test --workspace "$@"
