//! Deterministic synthetic repos for benchmarks: `templates` resource templates over
//! `clusters` clusters, each template placed on about three clusters by a mix of
//! Duplicated and static-weight Divided policies selecting by label and by name, with
//! OverridePolicies touching a third of the templates.

use std::collections::BTreeMap;
use std::fmt::Write;

/// Sizes named in docs/performance.md.
#[allow(dead_code)] // used by the bench and generate-repo, not stage-times
pub const SIZES: [(&str, usize, usize); 3] = [("S", 300, 3), ("M", 5_000, 20), ("L", 50_000, 100)];

const NAMESPACES: usize = 10;
/// Templates per policy (and per team).
pub const PER_POLICY: usize = 10;

/// Path → file content.
pub fn generate(templates: usize, clusters: usize) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let groups = (clusters / 3).max(1);
    let mut text = String::new();
    for c in 0..clusters {
        let _ = write!(
            text,
            "---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: c{c}\n  labels:\n    group: g{}\n    tier: t{}\nspec:\n  syncMode: Push\n  provider: p{}\n  region: r{}\n",
            c % groups,
            c % 2,
            c % 3,
            c % 5
        );
    }
    files.insert("clusters/clusters.yaml".to_owned(), text);
    // One file per 100 templates, like an app directory.
    for start in (0..templates).step_by(100) {
        let mut text = String::new();
        for t in start..(start + 100).min(templates) {
            template(&mut text, t);
        }
        files.insert(format!("apps/batch-{:05}.yaml", start / 100), text);
    }
    let mut text = String::new();
    for p in 0..templates.div_ceil(PER_POLICY) {
        policy(&mut text, p, clusters, groups);
    }
    files.insert("policies/propagation.yaml".to_owned(), text);
    let mut text = String::new();
    for o in 0..templates.div_ceil(3 * PER_POLICY) {
        override_policy(&mut text, o);
    }
    files.insert("policies/overrides.yaml".to_owned(), text);
    files
}

fn namespace(t: usize) -> usize {
    (t / PER_POLICY) % NAMESPACES
}

/// Template `t` as YAML, appended to `out` (each template's team is `t / PER_POLICY`).
pub fn template(out: &mut String, t: usize) {
    let ns = namespace(t);
    let team = t / PER_POLICY;
    match t % 4 {
        0 | 1 => {
            let _ = write!(
                out,
                "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{t}\n  namespace: ns-{ns}\n  labels:\n    app: app-{t}\n    team: team-{team}\nspec:\n  replicas: {}\n  selector:\n    matchLabels:\n      app: app-{t}\n  template:\n    metadata:\n      labels:\n        app: app-{t}\n        team: team-{team}\n    spec:\n      containers:\n      - name: main\n        image: registry.example.com/team-{team}/app-{t}:1.{}.0\n        ports:\n        - containerPort: 8080\n        env:\n        - name: MODE\n          value: production\n        resources:\n          requests:\n            cpu: 100m\n            memory: 128Mi\n          limits:\n            cpu: 500m\n            memory: 256Mi\n        readinessProbe:\n          httpGet:\n            path: /healthz\n            port: 8080\n",
                1 + t % 7,
                t % 10
            );
        }
        2 => {
            let _ = write!(
                out,
                "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: app-{t}\n  namespace: ns-{ns}\n  labels:\n    app: app-{t}\n    team: team-{team}\nspec:\n  selector:\n    app: app-{t}\n  ports:\n  - name: http\n    port: 80\n    targetPort: 8080\n"
            );
        }
        _ => {
            let _ = write!(
                out,
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-{t}\n  namespace: ns-{ns}\n  labels:\n    app: app-{t}\n    team: team-{team}\ndata:\n  settings.yaml: |\n    log:\n      level: info\n    feature-{t}: true\n  owner: team-{team}\n"
            );
        }
    }
}

/// Even policies select a team by label and place by cluster label (Duplicated); odd
/// ones select their templates by name and divide over three named clusters.
fn policy(out: &mut String, p: usize, clusters: usize, groups: usize) {
    let ns = p % NAMESPACES;
    let _ = write!(
        out,
        "---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata:\n  name: policy-{p}\n  namespace: ns-{ns}\nspec:\n  resourceSelectors:\n"
    );
    if p.is_multiple_of(2) {
        for kind in [("apps/v1", "Deployment"), ("v1", "Service"), ("v1", "ConfigMap")] {
            let _ = write!(
                out,
                "  - apiVersion: {}\n    kind: {}\n    labelSelector:\n      matchLabels:\n        team: team-{p}\n",
                kind.0, kind.1
            );
        }
        let _ = write!(
            out,
            "  placement:\n    clusterAffinity:\n      labelSelector:\n        matchLabels:\n          group: g{}\n",
            p % groups
        );
    } else {
        for t in p * PER_POLICY..(p + 1) * PER_POLICY {
            let (api, kind) = match t % 4 {
                0 | 1 => ("apps/v1", "Deployment"),
                2 => ("v1", "Service"),
                _ => ("v1", "ConfigMap"),
            };
            let _ = write!(out, "  - apiVersion: {api}\n    kind: {kind}\n    name: app-{t}\n");
        }
        let names: Vec<String> = (0..3).map(|i| format!("c{}", (p + i * 7) % clusters)).collect();
        let _ = write!(
            out,
            "  placement:\n    clusterAffinity:\n      clusterNames: [{}]\n    replicaScheduling:\n      replicaSchedulingType: Divided\n      replicaDivisionPreference: Weighted\n      weightPreference:\n        staticWeightList:\n        - targetCluster:\n            clusterNames: [{}]\n          weight: 2\n        - targetCluster:\n            clusterNames: [{}, {}]\n          weight: 1\n",
            names.join(", "),
            names[0],
            names[1],
            names[2]
        );
    }
}

/// Every third team gets a regional registry and a label in region r0 and tier t1.
fn override_policy(out: &mut String, o: usize) {
    let team = o * 3;
    let ns = team % NAMESPACES;
    let _ = write!(
        out,
        "---\napiVersion: policy.karmada.io/v1alpha1\nkind: OverridePolicy\nmetadata:\n  name: override-{o}\n  namespace: ns-{ns}\nspec:\n  resourceSelectors:\n  - apiVersion: apps/v1\n    kind: Deployment\n    labelSelector:\n      matchLabels:\n        team: team-{team}\n  - apiVersion: v1\n    kind: ConfigMap\n    labelSelector:\n      matchLabels:\n        team: team-{team}\n  overrideRules:\n  - targetCluster:\n      fieldSelector:\n        matchExpressions:\n        - key: region\n          operator: In\n          values: [r0]\n    overriders:\n      imageOverrider:\n      - component: Registry\n        operator: replace\n        value: mirror.r0.example.com\n  - targetCluster:\n      labelSelector:\n        matchLabels:\n          tier: t1\n    overriders:\n      labelsOverrider:\n      - operator: add\n        value:\n          tier: t1\n"
    );
}
