#!/usr/bin/env bash
# Builds the binaries the member clusters need from the Go module proxy:
# kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes), etcd
# (go.etcd.io/etcd/server/v3) and kwok (sigs.k8s.io/kwok), into $FLOTILLA_TOOLS_BIN
# (default: <repo>/.tools/bin, git-ignored). Each module is rebuilt only when its
# go.mod/go.sum change: a stamp file holds their hash. Nothing prebuilt is downloaded.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=${FLOTILLA_TOOLS_BIN:-$root/.tools/bin}
mkdir -p "$bin"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

command -v go >/dev/null || { echo "build-tools: Go is required (>= 1.26) and was not found on PATH" >&2; exit 1; }

# build MODULE_DIR VERSION_LDFLAGS PACKAGE...
build() {
  local dir=$1 ldflags=$2; shift 2
  local stamp="$bin/.stamp-$(basename "$dir")"
  local want; want=$(cat "$dir/go.mod" "$dir/go.sum" $(ls "$dir"/*.go 2>/dev/null) | sha256sum | cut -c1-16)
  local missing=0
  for pkg in "$@"; do [ -x "$bin/$(basename "$pkg")" ] || missing=1; done
  if [ "$missing" = 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  echo "build-tools: building $* (module $(basename "$dir"))" >&2
  local start=$SECONDS
  (cd "$dir" && go build -trimpath -ldflags "-s -w $ldflags" -o "$bin/" "$@")
  echo "$want" > "$stamp"
  echo "build-tools: $(basename "$dir") built in $((SECONDS - start)) s" >&2
}

k8s_version=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$here/tools/kubernetes/go.mod")
minor=$(echo "$k8s_version" | cut -d. -f2)
build "$here/tools/etcd" "" flotilla.invalid/hack/tools/etcd
build "$here/tools/kubernetes" \
  "-X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
build "$here/tools/kwok" "" sigs.k8s.io/kwok/cmd/kwok
echo "$bin"
