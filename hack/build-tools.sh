#!/usr/bin/env bash
# Builds the binaries the member clusters need from the Go module proxy:
# kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes), etcd
# (go.etcd.io/etcd/server/v3), kwok (sigs.k8s.io/kwok), helm (helm.sh/helm/v4),
# flotilla-helm (hack/tools/helm/flotilla-helm, over helm.sh/helm/v4) and kustomize
# (sigs.k8s.io/kustomize/kustomize/v5), into $FLOTILLA_TOOLS_BIN
# (default: ~/.cache/flotilla/bin, outside any clone, so fresh clones and CI reuse it).
# Each module is rebuilt only when its go.mod/go.sum, build flags or Go version change:
# a stamp file holds their hash. Nothing prebuilt is downloaded. Prints the directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${FLOTILLA_TOOLS_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/bin}
mkdir -p "$bin"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

command -v go >/dev/null || { echo "build-tools: Go (>= 1.26, from go.dev or the machine image; Debian's golang-go is too old) is required and was not found on PATH" >&2; exit 1; }
go_minor=$(go env GOVERSION | sed -nE 's/^go1\.([0-9]+).*/\1/p')
[ "${go_minor:-0}" -ge 26 ] || { echo "build-tools: Go >= 1.26 is required, found $(go env GOVERSION)" >&2; exit 1; }

# build MODULE_DIR VERSION_LDFLAGS PACKAGE... (TAGS and CGO_ENABLED from the caller's
# environment, for the one module that needs them; STAMP names the stamp when one module
# is built in two parts)
build() {
  local dir=$1 ldflags=$2; shift 2
  local stamp="$bin/.stamp-${STAMP:-$(basename "$dir")}"
  # The module's own Go files, and those of a package of it named `./dir`.
  local sources; sources=$(ls "$dir"/*.go 2>/dev/null; for pkg in "$@"; do case $pkg in ./*) ls "$dir/$pkg"/*.go;; esac; done)
  local want; want=$( (cat "$dir/go.mod" "$dir/go.sum" $sources; echo "$ldflags ${TAGS:-} $CGO_ENABLED"; go version) | sha256sum | cut -c1-16)
  local missing=0
  for pkg in "$@"; do
    # Go names a binary after its package, skipping a major-version suffix (`/v5`).
    local name; name=$(basename "$pkg"); [[ "$name" =~ ^v[0-9]+$ ]] && name=$(basename "$(dirname "$pkg")")
    [ -x "$bin/$name" ] || missing=1
  done
  if [ "$missing" = 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  echo "build-tools: building $* (module $(basename "$dir"))" >&2
  local start=$SECONDS
  (cd "$dir" && go build -trimpath -tags "${TAGS:-}" -ldflags "-s -w $ldflags" -o "$bin/" "$@")
  echo "$want" > "$stamp"
  echo "build-tools: ${STAMP:-$(basename "$dir")} built in $((SECONDS - start)) s" >&2
}

k8s_version=$(sed -nE 's|^[[:space:]]*(require[[:space:]]+)?k8s.io/kubernetes (v[^[:space:]]+).*|\2|p' "$here/tools/kubernetes/go.mod" | head -n1)
[[ "$k8s_version" =~ ^v1\.[0-9]+\.[0-9]+$ ]] || { echo "build-tools: cannot read the k8s.io/kubernetes version from hack/tools/kubernetes/go.mod" >&2; exit 1; }
minor=$(echo "$k8s_version" | cut -d. -f2)
build "$here/tools/etcd" "" flotilla.invalid/hack/tools/etcd
build "$here/tools/kubernetes" \
  "-X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
build "$here/tools/kwok" "" sigs.k8s.io/kwok/cmd/kwok
if [ "${1:-}" = peers ]; then
  STAMP=kubectl build "$here/tools/kubernetes" \
    "-X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
    k8s.io/kubernetes/cmd/kubectl
  build "$here/tools/flux-source" "" github.com/fluxcd/source-controller
  build "$here/tools/flux-kustomize" "" github.com/fluxcd/kustomize-controller
  build "$here/tools/flux-notification" "" github.com/fluxcd/notification-controller
fi
# The renderers of HelmChart sources and kustomizations, pinned by their go.mod.
helm_version=$(sed -nE 's|^[[:space:]]*(require[[:space:]]+)?helm.sh/helm/v4 (v[^[:space:]]+).*|\2|p' "$here/tools/helm/go.mod" | head -n1)
build "$here/tools/helm" "-X helm.sh/helm/v4/internal/version.version=$helm_version" helm.sh/helm/v4/cmd/helm
# `helm template` from the same packages, without Helm's install machinery: what renders
# charts (the helm CLI still pulls remote ones).
STAMP=flotilla-helm build "$here/tools/helm" "" ./flotilla-helm
build "$here/tools/kustomize" "" sigs.k8s.io/kustomize/kustomize/v5
# Gitea, the forge of the preview tests: SQLite needs cgo (a C compiler). It reads its
# locales and templates from disk (no bindata), copied next to the binary.
command -v cc >/dev/null || { echo "build-tools: a C compiler (cc) is required to build Gitea with SQLite: apt-get install gcc" >&2; exit 1; }
CGO_ENABLED=1 TAGS="sqlite sqlite_unlock_notify" build "$here/tools/gitea" "" code.gitea.io/gitea
gitea_src=$(cd "$here/tools/gitea" && go list -m -f '{{.Dir}}' code.gitea.io/gitea)
if [ ! -f "$bin/gitea-static/.from" ] || [ "$(cat "$bin/gitea-static/.from")" != "$gitea_src" ]; then
  rm -rf "$bin/gitea-static" && mkdir -p "$bin/gitea-static"
  cp -r "$gitea_src/options" "$gitea_src/templates" "$bin/gitea-static/"
  chmod -R u+w "$bin/gitea-static" && echo "$gitea_src" > "$bin/gitea-static/.from"
fi
echo "$bin"
