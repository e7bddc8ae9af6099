# Shared by the hack/ scripts that run a controller against scratch members (source it
# after `set -euo pipefail`, with $root set to the checkout):
#   scratch NAME           a temporary directory $tmp, members' state and kubeconfig in
#                          it, and an EXIT trap that stops whatever was added to $pids,
#                          takes the members down and removes $tmp
#   serve_work MESSAGE     commits $tmp/work, pushes it to $tmp/fleet.git and serves it
#                          with git-daemon (receive-pack on) on $git_port
#   wait_ready PORT WHAT   waits up to 90 s for /readyz, else prints $tmp/controller.log
#   free_port, say

say() { printf '\n== %s\n' "$*"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

scratch() {
  tmp=$(mktemp -d -t "flotilla-$1-XXXXXX")
  export FLOTILLA_CLUSTERS_DIR=$tmp/clusters KUBECONFIG_OUT=$tmp/members.config
  pids=()
  trap scratch_cleanup EXIT
}

scratch_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$root/hack/local-down.sh" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}

serve_work() {
  git init -q --bare -b main "$tmp/fleet.git"
  git -C "$tmp/work" init -q -b main
  git -C "$tmp/work" add -A
  git -C "$tmp/work" -c user.name=flotilla -c user.email=hack@example.invalid commit -qm "$1"
  git -C "$tmp/work" push -q "$tmp/fleet.git" HEAD:main
  git_port=$(free_port)
  "$(git --exec-path)/git-daemon" --reuseaddr --export-all --enable=receive-pack --listen=127.0.0.1 \
    --port="$git_port" --base-path="$tmp" "$tmp" 2>/dev/null &
  pids+=($!)
}

wait_ready() {
  for _ in $(seq 1 90); do
    curl -sf "http://127.0.0.1:$1/readyz" >/dev/null && return 0
    sleep 1
  done
  echo "$2 never became ready" >&2
  tail "$tmp/controller.log" >&2
  return 1
}
