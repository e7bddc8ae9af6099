#!/usr/bin/env bash
# Starts N (default 3) real member clusters on 127.0.0.1, without Docker:
#   one etcd; per member a kube-apiserver (own --etcd-prefix, port, PKI and admin
#   client certificate, RBAC on), kube-controller-manager, kube-scheduler, and kwok
#   simulating two nodes whose pods become Running and Ready.
# Writes a kubeconfig with contexts member1..memberN to $KUBECONFIG_OUT
# (default $HOME/.kube/members.config). Running it again while up is harmless.
#
# Environment:
#   FLOTILLA_CLUSTERS_DIR  state directory (default $HOME/.flotilla/clusters)
#   KUBECONFIG_OUT         kubeconfig to write
#   FLOTILLA_TOOLS_BIN     where hack/build-tools.sh puts the binaries
#   FLOTILLA_OWNER_PID     if set, tear everything down when this process exits
#   FLOTILLA_AUDIT_POLICY  audit policy file (default hack/audit-policy.yaml: writes only)
#   FLOTILLA_MEMBERS_LEAN  if 1, API servers only: no controller-manager, scheduler,
#                          simulated nodes or metrics CRD (pods never run; for
#                          benchmarks of many members that apply ConfigMaps)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
n=${1:-3}
state=${FLOTILLA_CLUSTERS_DIR:-$HOME/.flotilla/clusters}
kubeconfig=${KUBECONFIG_OUT:-$HOME/.kube/members.config}
say() { printf 'local-up: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[[ "$n" =~ ^[1-9][0-9]?$ ]] || die "the number of members must be 1 to 99, got '$n'"
for tool in openssl curl python3; do
  command -v "$tool" >/dev/null || die "$tool is required (Debian: apt-get install $tool)"
done

# running PID: alive and not a zombie.
running() { [ -r "/proc/$1/stat" ] && ! awk '{ exit ($3 == "Z") ? 0 : 1 }' "/proc/$1/stat" 2>/dev/null; }
alive() { [ -s "$state/pids" ] && while read -r pid _; do running "$pid" || return 1; done <"$state/pids"; }
if alive; then
  say "already up ($(wc -l <"$state/pids") processes in $state); kubeconfig: $(cat "$state/kubeconfig-path")"
  exit 0
fi
if [ -d "$state" ]; then
  say "removing stale state in $state"
  FLOTILLA_CLUSTERS_DIR=$state "$here/local-down.sh" >/dev/null 2>&1 || true
fi

bin=$("$here/build-tools.sh")
mkdir -p "$state"
# A failed start leaves nothing behind.
trap 'status=$?; if [ $status != 0 ]; then FLOTILLA_CLUSTERS_DIR=$state "$here/local-down.sh" >/dev/null 2>&1; fi' EXIT
state=$(cd "$state" && pwd)
echo "$kubeconfig" >"$state/kubeconfig-path"
: >"$state/pids"
start_time=$(date +%s.%N)

# free_ports K: K distinct free TCP ports on 127.0.0.1.
free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# spawn NAME CMD...: starts a process in its own session, logs to $state/logs/NAME.log.
spawn() {
  local name=$1; shift
  mkdir -p "$state/logs"
  setsid "$@" >"$state/logs/$name.log" 2>&1 </dev/null &
  echo "$! $name" >>"$state/pids"
}

# wait_for DESCRIPTION SECONDS CMD...: polls CMD until it succeeds.
wait_for() {
  local what=$1 limit=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "$what not ready after ${limit}s; logs in $state/logs"
    check_alive
    sleep 0.2
  done
}

# check_alive: fails at once, with the end of its log, if a started process died.
check_alive() {
  local pid name
  while read -r pid name; do
    if ! running "$pid"; then
      say "$name exited; last lines of $state/logs/$name.log:"
      tail -n 15 "$state/logs/$name.log" >&2
      die "$name failed to start"
    fi
  done <"$state/pids"
}

# --- etcd -------------------------------------------------------------------------
read -r etcd_client etcd_peer <<<"$(free_ports 2)"
spawn etcd "$bin/etcd" --name flotilla-etcd --data-dir "$state/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_client" --advertise-client-urls "http://127.0.0.1:$etcd_client" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
  --initial-cluster "flotilla-etcd=http://127.0.0.1:$etcd_peer" --unsafe-no-fsync --log-level warn \
  --quota-backend-bytes 4294967296
wait_for etcd 30 curl -sf "http://127.0.0.1:$etcd_client/health"

# --- PKI --------------------------------------------------------------------------
# pki DIR: a CA, a serving certificate for 127.0.0.1/localhost, client certificates
# (O=system:masters) for the admin user and, under their own user names so audit logs
# tell them apart, the controller-manager, the scheduler and kwok; and a
# service-account key pair.
pki() {
  local d=$1
  mkdir -p "$d"
  (
    cd "$d"
    openssl ecparam -name prime256v1 -genkey -noout -out ca.key 2>/dev/null
    openssl req -x509 -new -key ca.key -subj "/CN=flotilla-member-ca" -days 3650 -out ca.crt 2>/dev/null
    openssl ecparam -name prime256v1 -genkey -noout -out serving.key 2>/dev/null
    openssl req -new -key serving.key -subj "/CN=kube-apiserver" -out serving.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' >serving.ext
    openssl x509 -req -in serving.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile serving.ext -out serving.crt 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    for user in admin:admin controller-manager:system:kube-controller-manager scheduler:system:kube-scheduler kwok:kwok; do
      file=${user%%:*} cn=${user#*:}
      openssl ecparam -name prime256v1 -genkey -noout -out "$file.key" 2>/dev/null
      openssl req -new -key "$file.key" -subj "/O=system:masters/CN=$cn" -out "$file.csr" 2>/dev/null
      openssl x509 -req -in "$file.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile client.ext -out "$file.crt" 2>/dev/null
    done
    openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out sa.key
    openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
    chmod 600 ./*.key
  )
}

b64() { base64 -w0 <"$1"; }

# write_kubeconfig OUT I...: a kubeconfig with the admin user of members I...;
# USER=<cert> picks another client certificate (single member).
write_kubeconfig() {
  local out=$1 cert=${USER_CERT:-admin}; shift
  {
    echo "apiVersion: v1"
    echo "kind: Config"
    echo "clusters:"
    for i in "$@"; do
      echo "- name: member$i"
      echo "  cluster:"
      echo "    server: https://127.0.0.1:$(cat "$state/member$i/port")"
      echo "    certificate-authority-data: $(b64 "$state/member$i/pki/ca.crt")"
    done
    echo "users:"
    for i in "$@"; do
      echo "- name: member$i-admin"
      echo "  user:"
      echo "    client-certificate-data: $(b64 "$state/member$i/pki/$cert.crt")"
      echo "    client-key-data: $(b64 "$state/member$i/pki/$cert.key")"
    done
    echo "contexts:"
    for i in "$@"; do
      echo "- name: member$i"
      echo "  context: {cluster: member$i, user: member$i-admin}"
    done
    echo "current-context: member$1"
  } >"$out.tmp"
  chmod 600 "$out.tmp"
  mv "$out.tmp" "$out"
}

# api I METHOD PATH [BODY]: calls member I's API server as admin.
api() {
  local d="$state/member$1" method=$2 path=$3 body=${4:-}
  curl -sf --cacert "$d/pki/ca.crt" --cert "$d/pki/admin.crt" --key "$d/pki/admin.key" \
    -X "$method" -H 'Content-Type: application/json' ${body:+--data "$body"} \
    "https://127.0.0.1:$(cat "$d/port")$path"
}

# --- API servers ------------------------------------------------------------------
for i in $(seq 1 "$n"); do
  d="$state/member$i"
  pki "$d/pki"
  read -r port <<<"$(free_ports 1)"
  echo "$port" >"$d/port"
  spawn "member$i-apiserver" "$bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_client" --etcd-prefix "/member$i/registry" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$port" \
    --tls-cert-file "$d/pki/serving.crt" --tls-private-key-file "$d/pki/serving.key" --cert-dir "$d/pki" \
    --client-ca-file "$d/pki/ca.crt" \
    --service-account-issuer "https://127.0.0.1:$port" \
    --service-account-key-file "$d/pki/sa.pub" --service-account-signing-key-file "$d/pki/sa.key" \
    --service-cluster-ip-range 10.96.0.0/16 --authorization-mode RBAC \
    --disable-admission-plugins ServiceAccount --allow-privileged=true \
    --endpoint-reconciler-type none --profiling=false \
    --audit-log-path "$d/audit.log" --audit-policy-file "${FLOTILLA_AUDIT_POLICY:-$here/audit-policy.yaml}" --audit-log-maxsize 100
  for cert in admin controller-manager scheduler kwok; do
    USER_CERT=$cert write_kubeconfig "$d/$cert.kubeconfig" "$i"
  done
done
for i in $(seq 1 "$n"); do
  wait_for "member$i API server" 90 api "$i" GET /readyz
  wait_for "member$i default namespace" 30 api "$i" GET /api/v1/namespaces/default
done

# Lean members stop at their API servers (the rest of this section is skipped).
if [ "${FLOTILLA_MEMBERS_LEAN:-}" != 1 ]; then
# --- controllers, scheduler, simulated nodes ---------------------------------------
# kwok's own stages (from its module in the Go module cache, as build-tools.sh fetched
# it): nodes become Ready and renew leases like a kubelet; pods become Running and
# Ready, complete, and go away when deleted.
kwok_version=$(sed -nE 's|^[[:space:]]*(require[[:space:]]+)?sigs.k8s.io/kwok (v[^[:space:]]+).*|\2|p' "$here/tools/kwok/go.mod" | head -n1)
stages="$(cd "$here/tools/kwok" && GOFLAGS=-mod=mod go env GOMODCACHE)/sigs.k8s.io/kwok@$kwok_version/kustomize/stage"
[ -d "$stages" ] || (cd "$here/tools/kwok" && GOFLAGS=-mod=mod go mod download sigs.k8s.io/kwok)
for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
         pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
  cat "$stages/$f"; echo "---"
done >"$state/kwok-stages.yaml"
for i in $(seq 1 "$n"); do
  d="$state/member$i"
  spawn "member$i-controller-manager" "$bin/kube-controller-manager" \
    --kubeconfig "$d/controller-manager.kubeconfig" --authentication-kubeconfig "$d/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$d/controller-manager.kubeconfig" --leader-elect=false --secure-port 0 \
    --service-account-private-key-file "$d/pki/sa.key" --root-ca-file "$d/pki/ca.crt" \
    --use-service-account-credentials=false --cluster-name "member$i" \
    --controllers '*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller,-persistentvolume-attach-detach-controller'
  spawn "member$i-scheduler" "$bin/kube-scheduler" \
    --kubeconfig "$d/scheduler.kubeconfig" --authentication-kubeconfig "$d/scheduler.kubeconfig" \
    --authorization-kubeconfig "$d/scheduler.kubeconfig" --leader-elect=false --secure-port 0
  spawn "member$i-kwok" "$bin/kwok" --kubeconfig "$d/kwok.kubeconfig" --config "$state/kwok-stages.yaml" \
    --node-lease-duration-seconds 40 \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
    --cidr "10.$((100 + i)).0.0/16" --node-ip 127.0.0.1
  for node in 1 2; do
    name="member$i-node$node"
    body=$(cat <<EOF
{"apiVersion":"v1","kind":"Node","metadata":{"name":"$name",
 "annotations":{"kwok.x-k8s.io/node":"fake","node.alpha.kubernetes.io/ttl":"0"},
 "labels":{"kubernetes.io/hostname":"$name","kubernetes.io/os":"linux","kubernetes.io/arch":"amd64","type":"kwok",
           "topology.kubernetes.io/zone":"member$i-zone$node"}},
 "spec":{},
 "status":{"allocatable":{"cpu":"32","memory":"256Gi","pods":"110"},
           "capacity":{"cpu":"32","memory":"256Gi","pods":"110"},
           "nodeInfo":{"kubeletVersion":"fake","kubeProxyVersion":"fake","operatingSystem":"linux","architecture":"amd64"},
           "phase":"Running"}}
EOF
)
    api "$i" GET "/api/v1/nodes/$name" >/dev/null 2>&1 || api "$i" POST /api/v1/nodes "$body" >/dev/null
  done
done

node_ready() {
  # The API server pretty-prints for curl; squeeze the whitespace out first.
  api "$1" GET "/api/v1/nodes/member$1-node$2" | tr -d ' \n' | grep -q '"type":"Ready","status":"True"'
}
for i in $(seq 1 "$n"); do
  for node in 1 2; do wait_for "member$i node $node" 60 node_ready "$i" "$node"; done
done

# metrics.k8s.io PodMetrics, as metrics-server serves them, from a CRD of the same group,
# version and shape (there are no kubelets for metrics-server to scrape); tests and
# hack/demo-fhpa.sh write the samples.
crd_established() {
  api "$1" GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/pods.metrics.k8s.io | tr -d ' \n' \
    | grep -q '"type":"Established","status":"True"'
}
for i in $(seq 1 "$n"); do
  api "$i" GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/pods.metrics.k8s.io >/dev/null 2>&1 \
    || api "$i" POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$(cat "$here/metrics-api-crd.json")" >/dev/null
done
for i in $(seq 1 "$n"); do wait_for "member$i metrics.k8s.io" 30 crd_established "$i"; done
fi

mkdir -p "$(dirname "$kubeconfig")"
write_kubeconfig "$kubeconfig" $(seq 1 "$n")

if [ -n "${FLOTILLA_OWNER_PID:-}" ]; then
  # Tear down when the owner exits, however it exits (a test binary that panics or is killed).
  setsid bash -c "while [ -d /proc/$FLOTILLA_OWNER_PID ] && ! awk '{ exit (\$3 == \"Z\") ? 0 : 1 }' /proc/$FLOTILLA_OWNER_PID/stat; do sleep 0.5; done; FLOTILLA_CLUSTERS_DIR='$state' '$here/local-down.sh'" \
    >"$state/logs/watchdog.log" 2>&1 </dev/null &
fi
elapsed=$(python3 -c "import time; print(f'{time.time() - $start_time:.1f}')")
say "$n member clusters up in ${elapsed}s; kubeconfig $kubeconfig (contexts member1..member$n)"
