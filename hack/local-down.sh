#!/usr/bin/env bash
# Stops everything hack/local-up.sh started and removes its state and kubeconfig.
# Running it with nothing up is harmless.
set -uo pipefail
state=${FLOTILLA_CLUSTERS_DIR:-$HOME/.flotilla/clusters}
say() { printf 'local-down: %s\n' "$*" >&2; }
if [ ! -d "$state" ]; then
  say "nothing to stop ($state does not exist)"
  exit 0
fi
# running PID: alive and not a zombie (an orphan whose reaper is slow or absent).
running() { [ -r "/proc/$1/stat" ] && ! awk '{ exit ($3 == "Z") ? 0 : 1 }' "/proc/$1/stat" 2>/dev/null; }
if [ -f "$state/pids" ]; then
  # Each process leads its own session (setsid): signal the whole group.
  while read -r pid _; do kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null; done <"$state/pids"
  for _ in $(seq 1 15); do
    running=0
    while read -r pid _; do running "$pid" && running=1; done <"$state/pids"
    [ $running = 0 ] && break
    sleep 0.2
  done
  while read -r pid _; do kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null; done <"$state/pids"
fi
if [ -f "$state/kubeconfig-path" ]; then
  rm -f "$(cat "$state/kubeconfig-path")"
fi
rm -rf "$state"
say "stopped; removed $state"
