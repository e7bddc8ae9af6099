#!/usr/bin/env bash
# Peak memory of `flotilla validate` against hostile repositories, for
# docs/performance.md: each must fail cleanly (exit 2) in bounded memory.
#   spread    24 million YAML nodes over 240 documents in 6 files, every document and
#             file under its own budget (the per-revision node budget stops it)
#   spread5x  the same, five times over (120 million nodes): the peak must not grow
#             with the repository beyond the bytes read
#   alias   the CVE-2019-11253 alias bomb in one document
# Usage: hack/bench-hostile.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# The target directory the other scripts and CI share (a cold release build takes ten minutes).
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/target}
cargo build --release -q --bin flotilla -p flotilla
target=$CARGO_TARGET_DIR
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$work" <<'PY'
import os, sys
root = sys.argv[1]
doc = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: spread}\nbomb: [" + ",".join(["0"] * 100_000) + "]\n"
for name, files in (("spread", 6), ("spread5x", 30)):
    out = os.path.join(root, name); os.makedirs(out, exist_ok=True)
    for i in range(files):
        with open(os.path.join(out, f"spread-{i}.yaml"), "w") as f:
            f.write(doc * 40)
alias = os.path.join(root, "alias"); os.makedirs(alias)
rows = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
for prev, name in zip("abcdefgh", "bcdefghi"):
    rows.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
with open(os.path.join(alias, "bomb.yaml"), "w") as f:
    f.write("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\ndata:\n" + "".join(f"  {r}\n" for r in rows))
PY

printf '%-8s %10s %10s %14s %6s\n' repo "repo MiB" seconds "peak RSS MiB" exit
for repo in spread spread5x alias; do
  mib=$(du -sm "$work/$repo" | cut -f1)
  read -r s m code <<<"$(python3 - "$target/release/flotilla" validate "$work/$repo" <<'PY'
import resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
elapsed = time.perf_counter() - start
print(f"{elapsed:.2f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} {code}")
PY
)"
  printf '%-8s %10s %10s %14s %6s\n' "$repo" "$mib" "$s" "$m" "$code"
done
