# Sourced by hack/test.sh and .ci/run: checks the toolchains, installs the Debian
# packages the tests need when missing, and builds the member clusters' binaries.
# Expects `say` and to run from the repository root.
say "toolchains"
command -v cargo >/dev/null || {
  echo "cargo (Rust >= 1.89) is required and was not found: install it with rustup (https://rustup.rs)" >&2; exit 2; }
command -v go >/dev/null || {
  echo "go (>= 1.26) is required to build the member clusters and was not found: install it from https://go.dev/doc/install (Debian's golang-go is too old)" >&2
  exit 2
}
cargo --version >&2
go version >&2

say "Debian packages"
declare -A package=([openssl]=openssl [curl]=curl [python3]=python3 [git]=git [cc]=gcc [unshare]=util-linux
  [mount]=mount [pkg-config]=pkg-config [ssh-keygen]=openssh-client [/usr/sbin/sshd]=openssh-server
  [/usr/sbin/debootstrap]=debootstrap [gpg]=gnupg [/usr/bin/prometheus]=prometheus
  [chromium]=chromium [chromedriver]=chromium-driver [/usr/bin/docker-registry]=docker-registry)
missing=()
for cmd in "${!package[@]}"; do
  command -v "$cmd" >/dev/null || missing+=("${package[$cmd]}")
done
# OpenSSL headers for libgit2's https and ssh transports.
dpkg -s libssl-dev >/dev/null 2>&1 || missing+=(libssl-dev)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}" >&2
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  command -v apt-get >/dev/null || {
    echo "missing: ${missing[*]} (Debian package names); install them with your package manager" >&2; exit 2; }
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >&2
else
  echo "all present" >&2
fi

say "member-cluster binaries (kube-apiserver, controller-manager, scheduler, etcd, kwok)"
time hack/build-tools.sh >&2

