use super::*;
use crate::model::Limits;

fn repo(files: &[(&str, &str)]) -> RepoFiles {
    let mut repo = RepoFiles::default();
    for (path, text) in files {
        repo.files.insert(path.to_string(), text.as_bytes().to_vec());
    }
    repo
}

const CHART: &str = "apiVersion: v2\nname: shop\nversion: 1.0.0\n";
const HELM_CHART: &str = "apiVersion: flotilla.dev/v1alpha1\nkind: HelmChart\nmetadata: {name: shop, namespace: shop}\nspec:\n  chart: charts/shop\n  valuesFiles: [envs/prod.yaml]\n  values: {replicaCount: 6}\n";

fn shop() -> RepoFiles {
    repo(&[
        ("charts/shop/Chart.yaml", CHART),
        ("charts/shop/values.yaml", "replicaCount: 1\n"),
        (
            "charts/shop/templates/deployment.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n",
        ),
        ("charts/shop/charts/db/Chart.yaml", "apiVersion: v2\nname: db\nversion: 1.0.0\n"),
        ("envs/prod.yaml", "replicaCount: 3\n"),
        ("fleet/shop.yaml", HELM_CHART),
        ("fleet/policy.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\n"),
    ])
}

#[test]
fn a_chart_directory_is_one_unit_with_its_subcharts() {
    let files = shop();
    let units = units(&files, &Limits::default()).unwrap();
    assert_eq!(units.charts, BTreeSet::from(["charts/shop".to_string()]));
    assert!(units.owns("charts/shop/templates/deployment.yaml"));
    assert!(units.owns("charts/shop/charts/db/Chart.yaml"));
    assert!(!units.owns("charts/shopping/x.yaml"), "a sibling with a longer name is not the chart's");
    assert!(!units.owns("fleet/shop.yaml"));
}

#[test]
fn a_helm_chart_renders_its_directory_and_values_files() {
    let files = shop();
    let limits = Limits::default();
    let units = units(&files, &limits).unwrap();
    let charts = declared_charts(&files, &units, &ParseCache::default(), &limits).unwrap();
    assert_eq!(charts.len(), 1);
    let expansions = expansions(&files, &units, &charts).unwrap();
    let [expansion] = expansions.as_slice() else { panic!("{expansions:?}") };
    assert_eq!(expansion.name, "HelmChart shop/shop");
    assert_eq!(
        expansion.inputs,
        [
            "charts/shop/Chart.yaml",
            "charts/shop/charts/db/Chart.yaml",
            "charts/shop/templates/deployment.yaml",
            "charts/shop/values.yaml",
            "envs/prod.yaml"
        ]
    );
    let Job::Helm { release, namespace, values_files, values, .. } = &expansion.job else { panic!() };
    assert_eq!((release.as_str(), namespace.as_str()), ("shop", "shop"));
    assert_eq!(values_files, &["envs/prod.yaml"]);
    assert_eq!(values, &Some(serde_json::json!({"replicaCount": 6})));
}

#[test]
fn assembled_files_hold_loose_manifests_and_outputs_only() {
    let files = shop();
    let limits = Limits::default();
    let units = units(&files, &limits).unwrap();
    let charts = declared_charts(&files, &units, &ParseCache::default(), &limits).unwrap();
    let assembled = assemble(&files, &units, &charts, [("helm:shop/shop:x.yaml".into(), "k".into(), "a: b\n".into())]);
    assert_eq!(
        assembled.files.keys().collect::<Vec<_>>(),
        ["fleet/policy.yaml", "fleet/shop.yaml", "helm:shop/shop:x.yaml"],
        "the chart's files and the values file are gone"
    );
    assert_eq!(assembled.ids["helm:shop/shop:x.yaml"], "k");
}

#[test]
fn helm_output_is_split_by_the_template_it_came_from() {
    let files = shop();
    let limits = Limits::default();
    let units = units(&files, &limits).unwrap();
    let charts = declared_charts(&files, &units, &ParseCache::default(), &limits).unwrap();
    let expansion = &expansions(&files, &units, &charts).unwrap()[0];
    let output = "---\n# Source: shop/templates/svc.yaml\nkind: Service\n---\n# Source: shop/templates/deploy.yaml\nkind: Deployment\n---\n# Source: shop/templates/svc.yaml\nkind: Service\nmetadata: {name: b}\n";
    let out = output_files(expansion, output);
    assert_eq!(
        out.keys().collect::<Vec<_>>(),
        ["helm:shop/shop:shop/templates/deploy.yaml", "helm:shop/shop:shop/templates/svc.yaml"]
    );
    assert_eq!(
        out["helm:shop/shop:shop/templates/svc.yaml"],
        "# Source: shop/templates/svc.yaml\nkind: Service\n---\n# Source: shop/templates/svc.yaml\nkind: Service\nmetadata: {name: b}\n"
    );
}

#[test]
fn a_chart_that_is_not_in_the_repository_or_a_missing_values_file_is_refused() {
    let limits = Limits::default();
    for (text, want) in [
        (
            HELM_CHART.replace("charts/shop", "charts/none"),
            "spec.chart: charts/none is not a chart directory of the repository",
        ),
        (HELM_CHART.replace("envs/prod.yaml", "envs/none.yaml"), "spec.valuesFiles[0]: envs/none.yaml is not a file"),
    ] {
        let mut files = shop();
        files.files.insert("fleet/shop.yaml".into(), text.into_bytes());
        let units = units(&files, &limits).unwrap();
        let charts = declared_charts(&files, &units, &ParseCache::default(), &limits).unwrap();
        let err = expansions(&files, &units, &charts).unwrap_err().to_string();
        assert!(err.starts_with("fleet/shop.yaml: document 1 (line 1): "), "{err}");
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn a_helm_chart_reaching_outside_the_repository_does_not_load() {
    for (field, value) in [("chart", "../outside"), ("chart", "/etc"), ("valuesFiles", "[../../etc/passwd]")] {
        let text = format!(
            "apiVersion: flotilla.dev/v1alpha1\nkind: HelmChart\nmetadata: {{name: x, namespace: x}}\nspec:\n  chart: {}\n  {}\n",
            if field == "chart" { value } else { "charts/shop" },
            if field == "valuesFiles" { format!("valuesFiles: {value}") } else { String::new() },
        );
        let err = crate::load::load(&repo(&[("a.yaml", &text)]), &Limits::default()).unwrap_err().to_string();
        assert!(err.contains("leaves the repository") || err.contains("must be a path inside"), "{err}");
    }
}

#[test]
fn overlays_are_built_and_their_bases_through_them() {
    let files = repo(&[
        ("app/base/kustomization.yaml", "resources: [deployment.yaml]\n"),
        ("app/base/deployment.yaml", "kind: Deployment\n"),
        (
            "app/components/monitoring/kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n",
        ),
        (
            "app/overlays/prod/kustomization.yaml",
            "resources:\n- ../../base\ncomponents:\n- ../../components/monitoring\npatches:\n- path: patch.yaml\n",
        ),
        ("app/overlays/prod/patch.yaml", "kind: Deployment\n"),
        ("app/overlays/staging/kustomization.yaml", "resources: [../../base]\n"),
        ("loose.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"),
    ]);
    let units = units(&files, &Limits::default()).unwrap();
    let built: Vec<&String> = units.built_kustomizations().map(|(dir, _)| dir).collect();
    assert_eq!(built, ["app/overlays/prod", "app/overlays/staging"]);
    let expansions = expansions(&files, &units, &[]).unwrap();
    assert_eq!(expansions[0].name, "kustomization app/overlays/prod");
    assert_eq!(
        expansions[0].inputs,
        [
            "app/base/deployment.yaml",
            "app/base/kustomization.yaml",
            "app/components/monitoring/kustomization.yaml",
            "app/overlays/prod/kustomization.yaml",
            "app/overlays/prod/patch.yaml"
        ]
    );
    assert_eq!(
        expansions[1].inputs,
        ["app/base/deployment.yaml", "app/base/kustomization.yaml", "app/overlays/staging/kustomization.yaml"]
    );
    assert!(!units.owns("loose.yaml"));
}

#[test]
fn remote_bases_escapes_and_helm_in_a_kustomization_are_refused_with_their_line() {
    for (text, line, want) in [
        (
            "resources:\n- ok.yaml\n- github.com/org/repo//base?ref=v1\n",
            3,
            "resources[1]: a remote base is not fetched",
        ),
        ("resources:\n- https://example.com/all.yaml\n", 2, "a remote base is not fetched"),
        ("bases:\n- ../../../outside\n", 2, "bases[0]: leaves the repository"),
        ("helmCharts:\n- name: x\n", 1, "helmCharts: kustomize's Helm support is not run"),
        ("resources: deployment.yaml\n", 1, "resources: must be a list of paths"),
    ] {
        let files = repo(&[("a/b/kustomization.yaml", text)]);
        let err = units(&files, &Limits::default()).unwrap_err().to_string();
        let at = format!("a/b/kustomization.yaml: document 1 (line {line}): ");
        assert!(err.starts_with(&at), "{err}");
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn two_kustomization_files_in_one_directory_are_refused() {
    let files = repo(&[("k/kustomization.yaml", "resources: []\n"), ("k/kustomization.yml", "resources: []\n")]);
    let err = units(&files, &Limits::default()).unwrap_err().to_string();
    assert!(err.contains("kustomize reads only one"), "{err}");
}

#[test]
fn charts_held_by_the_parse_cache_are_declared_without_reading_their_file() {
    let limits = Limits::default();
    let mut files = shop();
    files.ids.insert("fleet/shop.yaml".into(), "id-1".into());
    let mut cache = ParseCache::default();
    let mut alone = RepoFiles::default();
    alone.files.insert("fleet/shop.yaml".into(), HELM_CHART.as_bytes().to_vec());
    alone.ids.insert("fleet/shop.yaml".into(), "id-1".into());
    crate::load::load_cached(&alone, &mut cache, &limits).unwrap();
    files.files.remove("fleet/shop.yaml");
    let units = units(&files, &limits).unwrap();
    let charts = declared_charts(&files, &units, &cache, &limits).unwrap();
    assert_eq!(charts.len(), 1);
    assert_eq!(charts[0].name, "shop");
}

/// `HELM_CHART` with its `chart:` line replaced by `repository: REPOSITORY`.
fn remote(repository: &str) -> String {
    HELM_CHART.replace("  chart: charts/shop\n", &format!("  repository: {repository}\n"))
}

/// Why `text`, as `fleet/shop.yaml` of the shop repository (without its values file),
/// does not load.
fn load_error(text: String) -> String {
    let limits = Limits::default();
    let mut files = shop();
    files.files.insert("fleet/shop.yaml".into(), text.into_bytes());
    files.files.remove("envs/prod.yaml");
    let loose = assemble(&files, &units(&files, &limits).unwrap(), &[], []);
    crate::load::load(&loose, &limits).unwrap_err().to_string()
}

#[test]
fn a_remote_chart_is_pinned_exactly() {
    let limits = Limits::default();
    let digest = format!("sha256:{}", "ab".repeat(32));
    let mut files = shop();
    let pinned = format!("{{url: \"https://charts.example.com/\", name: shop, version: 1.2.3, digest: \"{digest}\"}}");
    files.files.insert("fleet/shop.yaml".into(), remote(&pinned).into_bytes());
    let units = units(&files, &limits).unwrap();
    let charts = declared_charts(&files, &units, &ParseCache::default(), &limits).unwrap();
    let good = expansions(&files, &units, &charts).unwrap();
    let expansion = good.iter().find(|e| e.name == "HelmChart shop/shop").unwrap();
    let Job::Helm { chart: Chart::Remote(remote), .. } = &expansion.job else { panic!("{:?}", expansion.job) };
    assert_eq!(
        (remote.url.as_str(), remote.name.as_str(), remote.version.as_str()),
        ("https://charts.example.com", "shop", "1.2.3")
    );
    assert_eq!(remote.hex(), "ab".repeat(32));
    assert_eq!(expansion.inputs, ["envs/prod.yaml"], "only the values files are read from the repository");
    // An OCI registry: the URL names the chart.
    let oci = format!("{{url: \"oci://ghcr.io/acme/charts/shop\", version: 1.2.3, digest: \"{digest}\"}}");
    files.files.insert("fleet/shop.yaml".into(), self::remote(&oci).into_bytes());
    let charts = declared_charts(&files, &units, &ParseCache::default(), &limits).unwrap();
    let expansion = expansions(&files, &units, &charts).unwrap().into_iter().find(|e| e.name == "HelmChart shop/shop");
    let Some(Job::Helm { chart: Chart::Remote(pulled), .. }) = expansion.map(|e| e.job) else { panic!("no OCI chart") };
    assert_eq!((pulled.url.as_str(), pulled.name.as_str()), ("oci://ghcr.io/acme/charts/shop", "shop"));
}

#[test]
fn a_remote_chart_not_pinned_exactly_is_refused() {
    let digest = format!("sha256:{}", "ab".repeat(32));
    for (repository, want) in [
        (
            format!("{{url: \"oci://ghcr.io/x/shop\", name: other, version: 1.2.3, digest: \"{digest}\"}}"),
            "the oci:// URL names the chart shop",
        ),
        (format!("{{url: \"oci://ghcr.io\", version: 1.2.3, digest: \"{digest}\"}}"), "names the chart"),
        (
            format!("{{url: \"oci://ghcr.io/x/shop@sha256:abc\", version: 1.2.3, digest: \"{digest}\"}}"),
            "no credentials, query, fragment or digest",
        ),
        (
            format!("{{url: \"http://charts.example.com\", name: shop, version: 1.2.3, digest: \"{digest}\"}}"),
            "must be an https://",
        ),
        (
            format!(
                "{{url: \"https://user:pw@charts.example.com\", name: shop, version: 1.2.3, digest: \"{digest}\"}}"
            ),
            "no credentials",
        ),
        (
            format!("{{url: \"https://charts.example.com\", version: 1.2.3, digest: \"{digest}\"}}"),
            "spec.repository.name: required",
        ),
        (
            format!("{{url: \"https://charts.example.com\", name: shop, version: \"^1.2\", digest: \"{digest}\"}}"),
            "one exact version",
        ),
        (
            format!("{{url: \"https://charts.example.com\", name: shop, version: \">=1.0 <2\", digest: \"{digest}\"}}"),
            "one exact version",
        ),
        (
            "{url: \"https://charts.example.com\", name: shop, version: 1.2.3, digest: \"sha256:abc\"}".into(),
            "64 hex digits",
        ),
    ] {
        let err = load_error(remote(&repository));
        assert!(err.starts_with("fleet/shop.yaml: document 1 (line 1): spec.repository"), "{err}");
        assert!(err.contains(want), "{repository}: {err}");
    }
    let both = HELM_CHART.replace(
        "  chart: charts/shop\n",
        &format!("  chart: charts/shop\n  repository: {{url: \"https://c.example\", name: shop, version: 1.0.0, digest: \"{digest}\"}}\n"),
    );
    let neither = HELM_CHART.replace("  chart: charts/shop\n", "");
    for (text, want) in [(both, "spec: set chart or repository, not both"), (neither, "spec.chart: required")] {
        assert!(load_error(text).contains(want));
    }
}

/// The shop revision with `chart` as its HelmChart, a Deployment `shop` as the chart's
/// output and a FederatedHPA on it: what loading it says.
fn scaled(chart: &str, output: &str) -> Result<crate::model::Loaded, String> {
    let limits = Limits::default();
    let mut files = shop();
    files.files.insert("fleet/shop.yaml".into(), chart.as_bytes().to_vec());
    let hpa = "apiVersion: autoscaling.karmada.io/v1alpha1\nkind: FederatedHPA\nmetadata: {name: shop, namespace: shop}\n\
               spec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: shop}\n  maxReplicas: 10\n";
    files.files.insert("fleet/hpa.yaml".into(), hpa.as_bytes().to_vec());
    let units = units(&files, &limits).unwrap();
    let charts = declared_charts(&files, &units, &ParseCache::default(), &limits).unwrap();
    let deployment =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: shop, namespace: shop}\nspec: {replicas: 6}\n";
    let outputs = [(output.to_owned(), "id".to_owned(), deployment.to_owned())];
    crate::load::load(&assemble(&files, &units, &charts, outputs), &limits).map_err(|e| e.to_string())
}

#[test]
fn an_autoscaled_chart_workload_needs_the_values_key_that_sets_its_replicas() {
    let output = "helm:shop/shop:shop/templates/deployment.yaml";
    let err = scaled(HELM_CHART, output).unwrap_err();
    assert!(err.starts_with("fleet/hpa.yaml: document 1 (line 1): spec.scaleTargetRef"), "{err}");
    assert!(err.contains("rendered by HelmChart shop/shop"), "{err}");
    assert!(err.contains("spec.replicaValues (- {kind: Deployment, name: shop, path: <values key>})"), "{err}");
    let named = format!("{HELM_CHART}  replicaValues: [{{kind: Deployment, name: shop, path: replicaCount}}]\n");
    let loaded = scaled(&named, output).unwrap();
    assert_eq!(loaded.helm_charts[0].spec.replica_values[0].path, "replicaCount");
    // An entry for another workload does not count, and a path that is no key is refused.
    let other = format!("{HELM_CHART}  replicaValues: [{{kind: Deployment, name: db, path: replicaCount}}]\n");
    assert!(scaled(&other, output).unwrap_err().contains("spec.replicaValues (- {kind: Deployment"));
    let bad = format!("{HELM_CHART}  replicaValues: [{{kind: Deployment, name: shop, path: \"a..b\"}}]\n");
    let err = load_error(bad);
    assert!(err.starts_with("fleet/shop.yaml: document 1 (line 1): spec.replicaValues[0].path"), "{err}");
    // A kustomization has no values: refused, with what to do.
    let err = scaled(HELM_CHART, "kustomize:shop/kustomization.yaml").unwrap_err();
    assert!(err.contains("is rendered by a kustomization (kustomize:shop/kustomization.yaml)"), "{err}");
}

#[test]
fn a_helm_chart_that_does_not_load_is_the_error_not_its_values_file() {
    let limits = Limits::default();
    let mut files = shop();
    files.files.insert("fleet/shop.yaml".into(), format!("{HELM_CHART}  releaseName: Bad_Name\n").into_bytes());
    let units = units(&files, &limits).unwrap();
    let err = declared_charts(&files, &units, &ParseCache::default(), &limits).unwrap_err().to_string();
    assert!(err.starts_with("fleet/shop.yaml: document 1 (line 1): spec.releaseName"), "{err}");
}
