#!/usr/bin/env bash
# The Dockerfile's runtime stage without a container engine: a Debian bookworm root
# made by debootstrap with the same packages as the image (ca-certificates, libssl3),
# the release binary at /usr/local/bin/flotilla, and then the controller run as
# deploy/flotilla.yaml runs it: user 65532, read-only root, a tmpfs for the fetch cache,
# the member kubeconfig mounted read-only, MALLOC_ARENA_MAX=2. It must become ready and
# apply a ConfigMap to a real member cluster (hack/local-up.sh 1) from a git-daemon.
#
# Usage: hack/image-smoke.sh      (as root: chroot and mount namespaces; needs debootstrap,
#                                  what hack/local-up.sh needs, and cargo)
#        FLOTILLA_BIN=/path/to/flotilla hack/image-smoke.sh   (that binary, no build)
# The root is cached under ~/.cache/flotilla/rootfs-bookworm (rebuilt when this
# script's package list changes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
packages=ca-certificates,libssl3
rootfs=$HOME/.cache/flotilla/rootfs-bookworm
. "$root/hack/lib/scratch.sh"
scratch image

if [ "$(cat "$rootfs/.packages" 2>/dev/null)" != "$packages" ]; then
  command -v debootstrap >/dev/null || {
    echo "debootstrap is missing: install Debian's debootstrap package (hack/test.sh installs it)" >&2; exit 1; }
  say "debootstrap bookworm with $packages"
  rm -rf "$rootfs"
  debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" http://deb.debian.org/debian >"$tmp/debootstrap.log" 2>&1 \
    || { tail "$tmp/debootstrap.log" >&2; exit 1; }
  echo "$packages" >"$rootfs/.packages"
fi

if [ -z "${FLOTILLA_BIN:-}" ]; then
  say "building flotilla"
  (cd "$root" && cargo build --release -q --bin flotilla)
fi
binary=${FLOTILLA_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/flotilla}
install -D -m 0755 "$binary" "$rootfs/usr/local/bin/flotilla"
mkdir -p "$rootfs/etc/flotilla/members" "$rootfs/var/cache/flotilla"
: >"$rootfs/etc/flotilla/members/kubeconfig"   # a mount point for the member Secret
missing=$(chroot "$rootfs" ldd /usr/local/bin/flotilla | grep 'not found' || true)
[ -z "$missing" ] || { echo "libraries missing in the image: $missing" >&2; exit 1; }

say "one member cluster"
FLOTILLA_OWNER_PID=$$ "$root/hack/local-up.sh" 1 | tail -1

say "a fleet served by git-daemon"
mkdir "$tmp/work"
cat >"$tmp/work/fleet.yaml" <<'EOF'
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member1}
spec: {syncMode: Push}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: from-the-image, namespace: default}
data: {built: "debootstrap"}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: everything, namespace: default}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: from-the-image}]
EOF
serve_work fleet
http_port=$(free_port)

say "flotilla run in the image root: uid 65532, read-only root, tmpfs cache"
chmod 0644 "$KUBECONFIG_OUT"
unshare --mount sh -c '
  set -e
  rootfs=$1 kubeconfig=$2; shift 2
  mount --make-rprivate /
  mount --bind "$rootfs" "$rootfs"
  mount --bind -o ro "$kubeconfig" "$rootfs/etc/flotilla/members/kubeconfig"
  mount -t tmpfs -o uid=65532,gid=65532 tmpfs "$rootfs/var/cache/flotilla"
  mount -o remount,bind,ro "$rootfs"
  exec chroot --userspec=65532:65532 "$rootfs" env -i MALLOC_ARENA_MAX=2 RUST_LOG=info "$@"
' sh "$rootfs" "$KUBECONFIG_OUT" /usr/local/bin/flotilla run \
  --insecure-allow-http --repo "git://127.0.0.1:$git_port/fleet.git" --kubeconfig /etc/flotilla/members/kubeconfig \
  --listen "127.0.0.1:$http_port" --cache-dir /var/cache/flotilla --log-format json >"$tmp/controller.log" 2>&1 &
pids+=($!)
wait_ready "$http_port" "the controller in the image root"
pki=$FLOTILLA_CLUSTERS_DIR/member1/pki
value=$(curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
  "https://127.0.0.1:$(cat "$FLOTILLA_CLUSTERS_DIR/member1/port")/api/v1/namespaces/default/configmaps/from-the-image" \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["data"]["built"])')
[ "$value" = debootstrap ] || { echo "the ConfigMap did not arrive: $value" >&2; exit 1; }
say "ok: the image's runtime root runs the controller as deploy/ does, and it applied to member1"
