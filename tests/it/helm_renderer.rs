//! flotilla-helm, the chart renderer hack/tools/helm/flotilla-helm builds from the pinned
//! Helm packages, prints what `helm template` prints, byte for byte, with every flag
//! flotilla passes, on charts that use what charts use: subcharts and their values,
//! CRDs, hooks and test hooks, NOTES, a values schema, a kubeVersion constraint,
//! capabilities, `lookup` and files; and it refuses what helm refuses.

use std::path::Path;
use std::process::{Command, Output};

use crate::sources::built;
use crate::support::{root, write};

/// A chart of everything above, beside the fixture's charts.
fn chart(dir: &Path) {
    write(
        dir,
        "Chart.yaml",
        b"apiVersion: v2\nname: kitchen\nversion: 0.3.0\nappVersion: \"1.2\"\nkubeVersion: \">=1.20.0-0\"\n",
    );
    write(dir, "values.yaml", b"replicas: 2\nname: kitchen\nsettings: {a: \"1\", b: \"2\"}\n");
    write(
        dir,
        "values.schema.json",
        br#"{"type": "object", "properties": {"replicas": {"type": "integer", "minimum": 1}}, "required": ["replicas"]}"#,
    );
    write(dir, "files/greeting.txt", b"hello from a file\n");
    write(
        dir,
        "crds/things.yaml",
        b"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: things.example.com}\n",
    );
    write(dir, "templates/NOTES.txt", b"Installed {{ .Release.Name }}.\n");
    write(dir, "templates/_helpers.tpl", b"{{- define \"kitchen.labels\" -}}\napp: {{ .Values.name }}\nchart: {{ .Chart.Name }}-{{ .Chart.Version }}\n{{- end }}\n");
    write(
        dir,
        "templates/deployment.yaml",
        br#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
  labels: {{- include "kitchen.labels" . | nindent 4 }}
  annotations:
    kube: {{ .Capabilities.KubeVersion.Version | quote }}
    install: {{ .Release.IsInstall | quote }}
    revision: {{ .Release.Revision | quote }}
    service: {{ .Release.Service }}
    found: {{ (lookup "v1" "Secret" "default" "x") | toJson | quote }}
    {{- if .Capabilities.APIVersions.Has "example.com/v1" }}
    api: present
    {{- end }}
spec:
  replicas: {{ .Values.replicas }}
  template:
    metadata:
      annotations: {checksum: {{ .Values.settings | toJson | sha256sum }}}
    spec:
      containers: [{name: app, image: "app:{{ .Chart.AppVersion }}"}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-files}
data:
  greeting: {{ .Files.Get "files/greeting.txt" | quote }}
"#,
    );
    write(dir, "templates/hook.yaml", b"apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations: {\"helm.sh/hook\": pre-install, \"helm.sh/hook-weight\": \"-1\"}\n");
    write(
        dir,
        "templates/tests/smoke.yaml",
        b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: smoke\n  annotations: {\"helm.sh/hook\": test}\n",
    );
    write(dir, "templates/empty.yaml", b"{{- if .Values.never }}\nkind: Never\n{{- end }}\n");
}

fn both(dir: &Path, args: &[&str]) -> (Output, Output) {
    let run = |tool: &str| {
        Command::new(built(tool)).args(args).current_dir(dir).env("GOGC", "off").output().expect("the tool runs")
    };
    (run("helm"), run("flotilla-helm"))
}

/// The line a tool's error message starts on (helm may log before it).
fn error_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.lines().find(|l| l.starts_with("Error: ")).unwrap_or_else(|| panic!("no error in {text}")).to_owned()
}

#[test]
fn flotilla_helm_prints_what_helm_template_prints() {
    let work = crate::support::copy_tree(&root().join("tests/fixtures/sources/charts"));
    chart(&work.path().join("kitchen"));
    write(work.path(), "prod.yaml", b"replicas: 5\nsettings: {c: \"3\"}\n");
    write(work.path(), "values.json", br#"{"image": {"tag": "2.4.1"}, "cache": {"size": 3}}"#);
    let flag_sets: [&[&str]; 4] = [
        &[],
        &["--include-crds", "--skip-tests"],
        &["--values", "prod.yaml", "--include-crds", "--kube-version", "1.29.3", "--api-versions", "example.com/v1"],
        &["--skip-tests", "--api-versions", "a/v1,example.com/v1", "--api-versions", "b/v2"],
    ];
    let charts = [("kitchen", "./kitchen"), ("bookinfo", "./bookinfo"), ("observer", "./observer")];
    for (release, path) in charts {
        for flags in flag_sets {
            let mut args = vec!["template", release, path, "--namespace", "shop", "--values", "values.json"];
            args.extend_from_slice(flags);
            let (helm, ours) = both(work.path(), &args);
            assert!(helm.status.success(), "helm {args:?}: {}", String::from_utf8_lossy(&helm.stderr));
            assert!(ours.status.success(), "flotilla-helm {args:?}: {}", String::from_utf8_lossy(&ours.stderr));
            assert!(!helm.stdout.is_empty());
            assert_eq!(String::from_utf8_lossy(&ours.stdout), String::from_utf8_lossy(&helm.stdout), "{args:?}");
        }
    }

    // What helm refuses, flotilla-helm refuses with the same message.
    write(work.path(), "bad-schema.yaml", b"replicas: 0\n");
    write(work.path(), "bad-yaml.yaml", b"replicas: [\n");
    let refusals: [&[&str]; 4] = [
        &["template", "kitchen", "./kitchen", "--values", "bad-schema.yaml"],
        &["template", "kitchen", "./kitchen", "--values", "bad-yaml.yaml"],
        &["template", "kitchen", "./kitchen", "--kube-version", "1.19.0"],
        &["template", "Not_A_Name", "./kitchen"],
    ];
    for args in refusals {
        let (helm, ours) = both(work.path(), args);
        assert!(!helm.status.success() && !ours.status.success(), "{args:?} is refused by both");
        assert_eq!(error_line(&ours.stderr), error_line(&helm.stderr), "{args:?}");
    }
    write(work.path(), "kitchen/templates/broken.yaml", b"{{ .Values.nope }\n");
    let (helm, ours) = both(work.path(), &["template", "kitchen", "./kitchen"]);
    assert!(!helm.status.success() && !ours.status.success());
    assert_eq!(error_line(&ours.stderr), error_line(&helm.stderr));
}
