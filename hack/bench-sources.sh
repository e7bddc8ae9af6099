#!/usr/bin/env bash
# HelmChart sources against plain manifests, for docs/performance.md: generates a
# repository of CHARTS charts (default 50; each a Deployment, Service, ConfigMap,
# ServiceAccount, HorizontalPodAutoscaler and PodDisruptionBudget from helpers and
# values, one values file per chart) placed on CLUSTERS members (default 20), and a
# second repository holding exactly what those charts render as plain files. Then times
# the release CLI's `render -o json` (median of RUNS rounds, default 5; each round runs
# every row once, so the machine's noise falls on all rows alike):
#   plain     the plain repository;
#   cold      the charts with an empty source cache (every chart rendered by helm);
#   warm      one chart's values file changed, the other outputs in the cache;
#   unchanged nothing changed, every output in the cache;
# cold and warm through flotilla-helm (what renders charts when it is found), then again
# through the helm CLI (`helm template`, what renders them without it).
# Usage: hack/bench-sources.sh [CHARTS] [CLUSTERS]     (both tools: hack/build-tools.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/target}
charts=${1:-50} clusters=${2:-20} runs=${RUNS:-5}
bin=${FLOTILLA_BIN:-}
if [ -z "$bin" ]; then cargo build --release -q --bin flotilla -p flotilla; bin=$CARGO_TARGET_DIR/release/flotilla; fi
tools=$(bash hack/build-tools.sh 2>/dev/null)
# flotilla-helm is found in the tools directory; FLOTILLA_HELM (the helm CLI) is set
# only for the CLI's rows.
unset FLOTILLA_HELM
export FLOTILLA_TOOLS_BIN=$tools
work=$(mktemp -d)
[ -n "${KEEP:-}" ] && echo "work: $work" >&2 || trap 'rm -rf "$work"' EXIT

python3 - "$work/charts" "$charts" "$clusters" <<'PY'
import os, sys
root, charts, clusters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def write(path, text):
    path = os.path.join(root, path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").write(text)
write("clusters.yaml", "---\n".join(
    f"apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: m{c:03}, labels: {{region: r{c % 4}}}}}\nspec: {{syncMode: Push}}\n"
    for c in range(clusters)))
write("policies.yaml", """apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: apps}
spec:
  resourceSelectors:
    - {apiVersion: apps/v1, kind: Deployment}
    - {apiVersion: v1, kind: Service}
    - {apiVersion: v1, kind: ConfigMap}
    - {apiVersion: v1, kind: ServiceAccount}
    - {apiVersion: autoscaling/v2, kind: HorizontalPodAutoscaler}
    - {apiVersion: policy/v1, kind: PodDisruptionBudget}
  placement:
    replicaScheduling: {replicaSchedulingType: Divided, replicaDivisionPreference: Weighted}
""")
helpers = """{{- define "app.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}
{{- define "app.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
"""
META = """metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
  labels: {{- include "app.labels" . | nindent 4 }}
"""
templates = {
"deployment.yaml": """apiVersion: apps/v1
kind: Deployment
""" + META + """spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels: {{- include "app.selector" . | nindent 6 }}
  template:
    metadata:
      labels: {{- include "app.selector" . | nindent 8 }}
      annotations: {checksum/config: {{ .Values.settings | toJson | sha256sum }}}
    spec:
      serviceAccountName: {{ .Release.Name }}
      containers:
        - name: app
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
          ports: [{containerPort: 8080, name: http}]
          envFrom: [{configMapRef: {name: {{ .Release.Name }}}}]
          resources: {{- toYaml .Values.resources | nindent 12 }}
          readinessProbe: {httpGet: {path: /ready, port: http}}
""",
"service.yaml": """apiVersion: v1
kind: Service
""" + META + """spec:
  selector: {{- include "app.selector" . | nindent 4 }}
  ports: [{port: 80, targetPort: http}]
""",
"configmap.yaml": """apiVersion: v1
kind: ConfigMap
""" + META + """data:
{{- range $k, $v := .Values.settings }}
  {{ $k }}: {{ $v | quote }}
{{- end }}
""",
"serviceaccount.yaml": """apiVersion: v1
kind: ServiceAccount
""" + META + """""",
"hpa.yaml": """apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
""" + META + """spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: {{ .Release.Name }}}
  minReplicas: {{ .Values.replicas }}
  maxReplicas: {{ mul .Values.replicas 4 }}
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}}]
""",
"pdb.yaml": """apiVersion: policy/v1
kind: PodDisruptionBudget
""" + META + """spec:
  maxUnavailable: 1
  selector:
    matchLabels: {{- include "app.selector" . | nindent 6 }}
""",
}
for i in range(charts):
    name = f"app{i:03}"
    write(f"charts/{name}/Chart.yaml", f"apiVersion: v2\nname: {name}\nversion: 1.{i}.0\nappVersion: \"2.{i}\"\n")
    write(f"charts/{name}/templates/_helpers.tpl", helpers)
    for file, text in templates.items():
        write(f"charts/{name}/templates/{file}", text)
    settings = "".join(f"  KEY_{k}: value-{i}-{k}\n" for k in range(20))
    write(f"charts/{name}/values.yaml", f"replicas: 2\nimage: {{repository: registry.example/{name}, tag: \"1.0\"}}\n"
          f"resources: {{requests: {{cpu: 100m, memory: 128Mi}}, limits: {{memory: 256Mi}}}}\nsettings:\n{settings}")
    write(f"values/{name}-prod.yaml", f"replicas: {clusters}\n")
    write(f"apps/{name}.yaml", f"apiVersion: flotilla.dev/v1alpha1\nkind: HelmChart\nmetadata: {{name: {name}, namespace: apps}}\n"
          f"spec: {{chart: charts/{name}, valuesFiles: [values/{name}-prod.yaml]}}\n")
PY

cache=$work/cache
export FLOTILLA_SOURCE_CACHE=$cache
# The plain twin: exactly the templates the charts render, one file per chart.
mkdir -p "$work/plain"
cp "$work/charts/clusters.yaml" "$work/charts/policies.yaml" "$work/plain/"
"$bin" render "$work/charts" --templates | python3 -c '
import re, sys, os
out = sys.argv[1]
for doc in sys.stdin.read().split("---\n")[1:]:
    m = re.match(r"# source: helm:apps/(\w+):", doc)
    with open(os.path.join(out, (m.group(1) if m else "other") + ".yaml"), "a") as f:
        f.write("---\n" + doc)
' "$work/plain"
rm -rf "$cache"

objects=$("$bin" render "$work/plain" --templates | grep -c '^kind:')
printf '%s charts, %s templates, %s clusters (median of %s rounds, release, %s cores)\n' "$charts" "$objects" "$clusters" "$runs" "$(nproc)"
printf '%-10s %10s %10s %12s\n' render seconds "peak MiB" "vs plain"
# The six renders, round-robin: each round runs every row once, in this order, so the
# machine's noise falls on all rows alike; each row's median and the largest process of
# its runs (Helm's, in the rows that start it). Each warm run first sets app000's
# values file to a count not rendered before.
python3 - "$runs" "$bin" "$work" "$clusters" "$tools/helm" <<'PY'
import os, shutil, statistics, subprocess, sys, time
runs, bin, work, clusters, helm = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
cache = os.environ["FLOTILLA_SOURCE_CACHE"]
bumped = [0]
def clear(): shutil.rmtree(cache, ignore_errors=True)
def bump():
    bumped[0] += 1
    with open(f"{work}/charts/values/app000-prod.yaml", "w") as f:
        f.write(f"replicas: {clusters + bumped[0]}\n")
plain, charts, cli = f"{work}/plain", f"{work}/charts", {"FLOTILLA_HELM": helm}
rows = [("plain", plain, None, {}), ("cold", charts, clear, {}), ("warm", charts, bump, {}),
        ("unchanged", charts, None, {}), ("cold-cli", charts, clear, cli), ("warm-cli", charts, bump, cli)]
times = {name: [] for name, *_ in rows}
peaks = {name: 0 for name, *_ in rows}
for _ in range(runs):
    for name, repo, before, extra in rows:
        if before:
            before()
        env = dict(os.environ, **extra)
        start = time.perf_counter()
        child = subprocess.Popen([bin, "render", repo, "-o", "json"], stdout=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        times[name].append(time.perf_counter() - start)
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            sys.exit(f"{name}: render exited {child.returncode}")
        peaks[name] = max(peaks[name], usage.ru_maxrss / 1024)
base = statistics.median(times["plain"])
for name, *_ in rows:
    t = statistics.median(times[name])
    print(f"{name:<10} {t:10.3f} {peaks[name]:10.0f} {t / base:12.2f}")
PY
