#!/usr/bin/env bash
# The pure decisions at 1,000 and 5,000 members from generated state (src/at_scale.rs):
# the members' workers, the failover loop, the sharding membership. Release build; each
# prints its median time a round. Usage: hack/bench-steps.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/target}
cargo test --release -q --bin flotilla --no-run
cargo test --release -q --bin flotilla at_scale -- --nocapture --test-threads 1 2>&1 \
  | sed 's/^\.*//' | grep -E '^(members|failover|shard):|test result|panicked'
