//! The benchmark repos as a Flux user would write them with kustomize, for comparing
//! `flotilla render` with `kustomize build` (hack/bench-peers.sh render):
//!
//! `kustomize-overlays write SIZE DIR` writes `DIR/repo` (the generated flotilla repo,
//! as `generate-repo SIZE` writes it) and `DIR/kustomize`: a base per team
//! (`teams/team-P/base`, its ten templates as the repo has them), a variant per override
//! combination a team meets (`teams/team-P/<variant>`: kustomize's `images` for the
//! regional registry, a JSON 6902 patch for the tier label), and an overlay per cluster
//! (`clusters/cN`) listing the bases and variants that land there, with `replicas` where
//! a Divided policy splits them and a `$patch: delete` for a Deployment given none.
//! Placement, division and which overrides apply are taken from flotilla's own plan.
//!
//! `kustomize-overlays check RENDER_JSON BUILT_DIR` compares, per cluster, the objects
//! of `flotilla render -o json` with `BUILT_DIR/<cluster>.yaml` (`kustomize build`):
//! kind, namespace, name, replicas, image and tier label. It exits 1 on a difference.

#[path = "../benches/support/generate.rs"]
mod generate;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::Path;

use flotilla_core::model::{ClusterState, Limits, RepoFiles};
use serde_json::Value;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("write") if args.len() == 4 => write(&args[2], Path::new(&args[3])),
        Some("check") if args.len() == 4 => check(Path::new(&args[2]), Path::new(&args[3])),
        _ => {
            eprintln!("usage: kustomize-overlays write S|M|L DIR | check RENDER_JSON BUILT_DIR");
            std::process::exit(2);
        }
    }
}

/// What lands on one cluster from one team: which override rules, and per Deployment
/// its replicas (None where the team's template is not placed there).
#[derive(Default)]
struct Share {
    rules: BTreeSet<usize>,
    placed: BTreeMap<usize, Option<i64>>,
}

fn write(size: &str, out: &Path) {
    let (_, templates, clusters) = generate::SIZES.iter().find(|(name, ..)| *name == size).expect("size S, M or L");
    let files = generate::generate(*templates, *clusters);
    for (path, text) in &files {
        put(&out.join("repo").join(path), text);
    }
    let repo = RepoFiles {
        revision: size.into(),
        files: files.into_iter().map(|(p, c)| (p, c.into_bytes())).collect(),
        ..Default::default()
    };
    let plan =
        flotilla_core::plan(&repo, &ClusterState::default(), &Limits::default()).expect("the generated repo loads");
    assert!(plan.problems.is_empty(), "{:?}", plan.problems);
    let kustomize = out.join("kustomize");
    let teams = templates.div_ceil(generate::PER_POLICY);
    for team in 0..teams {
        base(&kustomize, team, *templates);
    }
    let mut variants = BTreeSet::new();
    for (cluster, rendered) in &plan.clusters {
        let mut shares: BTreeMap<usize, Share> = BTreeMap::new();
        for entry in rendered {
            let template = &plan.loaded.templates[entry.template];
            let t: usize = template.key.name.trim_start_matches("app-").parse().expect("app-<t>");
            let share = shares.entry(t / generate::PER_POLICY).or_default();
            share.rules.extend(entry.overrides.iter().map(|r| r.rule));
            share.placed.insert(t, entry.replicas);
        }
        overlay(&kustomize, cluster, &shares, &mut variants);
    }
    for (team, rules) in variants {
        variant(&kustomize, team, &rules);
    }
    eprintln!("wrote {} and {}", out.join("repo").display(), kustomize.display());
}

fn put(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn base(kustomize: &Path, team: usize, templates: usize) {
    let dir = kustomize.join(format!("teams/team-{team}/base"));
    let mut text = String::new();
    let first = team * generate::PER_POLICY;
    for t in first..(first + generate::PER_POLICY).min(templates) {
        generate::template(&mut text, t);
    }
    put(&dir.join("resources.yaml"), &text);
    put(
        &dir.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- resources.yaml\n",
    );
}

fn variant_name(rules: &BTreeSet<usize>) -> String {
    rules.iter().map(|r| if *r == 0 { "mirror" } else { "tier" }).collect::<Vec<_>>().join("-")
}

/// A team's templates with override rules applied: rule 0 replaces the registry of its
/// Deployments' images in region r0, rule 1 labels its Deployments and ConfigMaps
/// `tier: t1` (the generator's OverridePolicies).
fn variant(kustomize: &Path, team: usize, rules: &BTreeSet<usize>) {
    let mut text =
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../base\n".to_owned();
    let first = team * generate::PER_POLICY;
    if rules.contains(&0) {
        text.push_str("images:\n");
        for t in (first..first + generate::PER_POLICY).filter(|t| t % 4 < 2) {
            let _ = writeln!(
                text,
                "- name: registry.example.com/team-{team}/app-{t}\n  newName: mirror.r0.example.com/team-{team}/app-{t}"
            );
        }
    }
    if rules.contains(&1) {
        text.push_str("patches:\n");
        for kind in ["Deployment", "ConfigMap"] {
            let _ = writeln!(
                text,
                "- target: {{kind: {kind}, labelSelector: team=team-{team}}}\n  patch: |-\n    - op: add\n      path: /metadata/labels/tier\n      value: t1"
            );
        }
    }
    put(&kustomize.join(format!("teams/team-{team}/{}/kustomization.yaml", variant_name(rules))), &text);
}

fn overlay(
    kustomize: &Path,
    cluster: &str,
    shares: &BTreeMap<usize, Share>,
    variants: &mut BTreeSet<(usize, BTreeSet<usize>)>,
) {
    let mut resources = String::new();
    let mut replicas = String::new();
    let mut deletes = String::new();
    for (team, share) in shares {
        if share.rules.is_empty() {
            let _ = writeln!(resources, "- ../../teams/team-{team}/base");
        } else {
            let _ = writeln!(resources, "- ../../teams/team-{team}/{}", variant_name(&share.rules));
            variants.insert((*team, share.rules.clone()));
        }
        let first = team * generate::PER_POLICY;
        for t in first..first + generate::PER_POLICY {
            match share.placed.get(&t) {
                Some(Some(n)) if *n != generate_replicas(t) => {
                    let _ = writeln!(replicas, "- name: app-{t}\n  count: {n}");
                }
                Some(_) => {}
                None => {
                    let kind = match t % 4 {
                        0 | 1 => ("apps/v1", "Deployment"),
                        2 => ("v1", "Service"),
                        _ => ("v1", "ConfigMap"),
                    };
                    let _ = writeln!(
                        deletes,
                        "- patch: |-\n    $patch: delete\n    apiVersion: {}\n    kind: {}\n    metadata: {{name: app-{t}, namespace: ns-{}}}",
                        kind.0,
                        kind.1,
                        (t / generate::PER_POLICY) % 10
                    );
                }
            }
        }
    }
    let mut text = format!("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n{resources}");
    if !replicas.is_empty() {
        let _ = write!(text, "replicas:\n{replicas}");
    }
    if !deletes.is_empty() {
        let _ = write!(text, "patches:\n{deletes}");
    }
    put(&kustomize.join(format!("clusters/{cluster}/kustomization.yaml")), &text);
}

/// The replicas the generator writes into Deployment `t`.
fn generate_replicas(t: usize) -> i64 {
    1 + (t % 7) as i64
}

/// kind, namespace, name, replicas, image and tier label of an object.
fn summary(object: &Value) -> String {
    format!(
        "{} {} {} {} {} {}",
        object["kind"].as_str().unwrap_or(""),
        object["metadata"]["namespace"].as_str().unwrap_or(""),
        object["metadata"]["name"].as_str().unwrap_or(""),
        object["spec"]["replicas"],
        object["spec"]["template"]["spec"]["containers"][0]["image"],
        object["metadata"]["labels"]["tier"]
    )
}

fn check(render: &Path, built: &Path) {
    let rendered: Value = serde_json::from_slice(&std::fs::read(render).unwrap()).unwrap();
    let limits = Limits::default();
    let (mut objects, mut differences) = (0, 0);
    for (cluster, manifests) in rendered["clusters"].as_object().unwrap() {
        let want: BTreeSet<String> = manifests.as_array().unwrap().iter().map(summary).collect();
        let text = std::fs::read_to_string(built.join(format!("{cluster}.yaml"))).unwrap_or_default();
        let got: BTreeSet<String> = flotilla_core::load::split(&text)
            .iter()
            .map(|chunk| summary(&flotilla_core::load::parse_embedded(chunk.text, &limits).unwrap()))
            .collect();
        objects += want.len();
        for line in want.symmetric_difference(&got) {
            differences += 1;
            if differences <= 10 {
                eprintln!(
                    "{cluster}: {} {line}",
                    if want.contains(line) { "only flotilla:" } else { "only kustomize:" }
                );
            }
        }
    }
    println!("{objects} objects compared, {differences} differences");
    if differences > 0 {
        std::process::exit(1);
    }
}
