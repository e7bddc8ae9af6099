#!/usr/bin/env bash
# The Dockerfile's runtime stage without a container engine: a Debian bookworm root
# made by debootstrap with the same packages as the image (ca-certificates, libssl3),
# the release binary at /usr/local/bin/flotilla with helm and kustomize beside it (built
# by hack/build-tools.sh from the modules the Dockerfile builds), and then the
# controller run as deploy/flotilla.yaml runs it: user 65532, read-only root, tmpfs for
# the fetch cache and /tmp, the member kubeconfig mounted read-only, MALLOC_ARENA_MAX=2
# and FLOTILLA_SOURCE_CACHE. It must become ready and apply to a real member cluster
# (hack/local-up.sh 1), from a git-daemon, a plain ConfigMap, one a kustomization builds
# and one a HelmChart renders.
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
tools=$(bash "$root/hack/build-tools.sh")
for tool in helm kustomize; do install -m 0755 "$tools/$tool" "$rootfs/usr/local/bin/$tool"; done
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
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
---
apiVersion: flotilla.dev/v1alpha1
kind: HelmChart
metadata: {name: smoke, namespace: default}
spec: {chart: chart, values: {built: helm}}
EOF
mkdir -p "$tmp/work/chart/templates" "$tmp/work/overlay"
printf 'apiVersion: v2\nname: smoke\nversion: 0.1.0\n' >"$tmp/work/chart/Chart.yaml"
cat >"$tmp/work/chart/templates/cm.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata: {name: from-a-chart, namespace: {{ .Release.Namespace }}}
data: {built: {{ .Values.built | quote }}}
EOF
printf 'resources: [cm.yaml]\nnamespace: default\n' >"$tmp/work/overlay/kustomization.yaml"
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-an-overlay}\ndata: {built: kustomize}\n' >"$tmp/work/overlay/cm.yaml"
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
  mount -t tmpfs -o mode=1777 tmpfs "$rootfs/tmp"
  mount -o remount,bind,ro "$rootfs"
  exec chroot --userspec=65532:65532 "$rootfs" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    MALLOC_ARENA_MAX=2 FLOTILLA_SOURCE_CACHE=/var/cache/flotilla/sources RUST_LOG=info "$@"
' sh "$rootfs" "$KUBECONFIG_OUT" /usr/local/bin/flotilla run \
  --insecure-allow-http --repo "git://127.0.0.1:$git_port/fleet.git" --kubeconfig /etc/flotilla/members/kubeconfig \
  --listen "127.0.0.1:$http_port" --cache-dir /var/cache/flotilla --log-format json >"$tmp/controller.log" 2>&1 &
pids+=($!)
wait_ready "$http_port" "the controller in the image root"
pki=$FLOTILLA_CLUSTERS_DIR/member1/pki
built() {
  curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    "https://127.0.0.1:$(cat "$FLOTILLA_CLUSTERS_DIR/member1/port")/api/v1/namespaces/default/configmaps/$1" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["data"]["built"])'
}
for pair in from-the-image=debootstrap from-a-chart=helm from-an-overlay=kustomize; do
  value=$(built "${pair%%=*}") || true
  [ "$value" = "${pair#*=}" ] || { echo "ConfigMap ${pair%%=*} did not arrive: $value" >&2; tail -20 "$tmp/controller.log" >&2; exit 1; }
done
say "ok: the image's runtime root runs the controller as deploy/ does, and it applied to member1"
