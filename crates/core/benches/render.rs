//! Render cost against the YAML-parse floor, at the sizes of docs/performance.md and
//! along two axes (templates, clusters). `cargo bench -p flotilla-core --bench render`.

#[path = "support/generate.rs"]
mod generate;

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use flotilla_core::model::{ClusterState, Limits, RepoFiles};

fn repo(templates: usize, clusters: usize) -> RepoFiles {
    let files = generate::generate(templates, clusters).into_iter().map(|(p, c)| (p, c.into_bytes())).collect();
    RepoFiles { revision: format!("bench-{templates}x{clusters}"), files, ..Default::default() }
}

/// A one-file commit to the M repo (5,000 templates, 20 clusters), as the controller
/// renders it: unchanged files come from the parse cache (listed by blob id, not read);
/// the changed file (100 templates) is parsed; then bind, place and render run for the
/// whole repo. Successive iterations alternate between two versions of the file.
fn one_file_commit(c: &mut Criterion) {
    let limits = Limits::default();
    let state = ClusterState::default();
    let base = repo(5_000, 20);
    let changed = "apps/batch-00007.yaml";
    let versions: Vec<Vec<u8>> = (0..2)
        .map(|v| {
            String::from_utf8(base.files[changed].clone()).unwrap().replace("level: info", &format!("level: v{v}"))
        })
        .map(String::into_bytes)
        .collect();
    let mut full = base.clone();
    full.ids = base.files.keys().map(|p| (p.clone(), format!("{p}@0"))).collect();
    let mut cache = flotilla_core::load::ParseCache::default();
    flotilla_core::load::load_cached(&full, &mut cache, &limits).unwrap();
    let revision = |i: usize| {
        let mut files = RepoFiles { revision: format!("commit-{i}"), ids: full.ids.clone(), ..Default::default() };
        files.ids.insert(changed.to_owned(), format!("{changed}@{}", 1 + i % 2));
        files.files.insert(changed.to_owned(), versions[i % 2].clone());
        files
    };
    let mut group = c.benchmark_group("one-file-commit-M");
    let mut i = 0;
    group.bench_function("cached", |b| {
        b.iter_with_large_drop(|| {
            i += 1;
            let files = revision(i);
            let loaded = flotilla_core::load::load_cached(&files, &mut cache, &limits).unwrap();
            flotilla_core::plan_loaded(loaded, files.revision, &state)
        })
    });
    group.finish();
}

fn bytes(files: &RepoFiles) -> u64 {
    files.files.values().map(|f| f.len() as u64).sum()
}

fn sizes(c: &mut Criterion) {
    let limits = Limits::default();
    let state = ClusterState::default();
    for (name, templates, clusters) in generate::SIZES {
        let files = repo(templates, clusters);
        let mut group = c.benchmark_group(format!("size-{name}"));
        group.throughput(Throughput::Bytes(bytes(&files)));
        if templates > 10_000 {
            group.sample_size(10).measurement_time(Duration::from_secs(20));
        }
        group.bench_function("parse-only", |b| {
            b.iter(|| black_box(flotilla_core::load::parse_only(&files, &limits).unwrap()))
        });
        group.bench_function("parse-only-serde-saphyr", |b| {
            b.iter(|| black_box(flotilla_core::load::parse_only_general(&files, &limits).unwrap()))
        });
        group.bench_function("plan", |b| b.iter(|| black_box(flotilla_core::plan(&files, &state, &limits).unwrap())));
        group.finish();
    }
}

fn scaling(c: &mut Criterion) {
    let limits = Limits::default();
    let state = ClusterState::default();
    let mut group = c.benchmark_group("templates-at-20-clusters");
    for templates in [1_000, 2_000, 4_000, 8_000] {
        let files = repo(templates, 20);
        group.throughput(Throughput::Elements(templates as u64));
        group.bench_with_input(BenchmarkId::from_parameter(templates), &files, |b, f| {
            b.iter(|| black_box(flotilla_core::plan(f, &state, &limits).unwrap()))
        });
    }
    group.finish();
    let mut group = c.benchmark_group("clusters-at-2000-templates");
    for clusters in [5, 20, 80, 320] {
        let files = repo(2_000, clusters);
        group.bench_with_input(BenchmarkId::from_parameter(clusters), &files, |b, f| {
            b.iter(|| black_box(flotilla_core::plan(f, &state, &limits).unwrap()))
        });
    }
    group.finish();
}

/// Every document of a repo, split as flotilla splits them.
fn documents(files: &RepoFiles) -> Vec<&str> {
    files
        .files
        .values()
        .flat_map(|f| flotilla_core::load::split(std::str::from_utf8(f).unwrap()))
        .map(|c| c.text)
        .collect()
}

/// The same documents (the M corpus, split by flotilla) parsed into a JSON tree on one
/// core by each maintained YAML crate, and by flotilla's reader (the common subset
/// straight from serde-saphyr's parser, serde-saphyr for the rest): the comparison
/// behind choosing serde-saphyr, and what the subset reader saves.
fn yaml_crates(c: &mut Criterion) {
    let files = repo(5_000, 20);
    let docs = documents(&files);
    let mut group = c.benchmark_group("yaml-crates-M");
    group.throughput(Throughput::Bytes(bytes(&files)));
    let limits = Limits::default();
    for d in &docs {
        let general = serde_saphyr::from_str::<serde_json::Value>(d).unwrap();
        assert_eq!(flotilla_core::load::parse_embedded(d, &limits).unwrap(), general, "{d}");
    }
    group.bench_function("flotilla", |b| {
        b.iter(|| {
            for d in &docs {
                black_box(flotilla_core::load::parse_embedded(d, &limits).unwrap());
            }
        })
    });
    group.bench_function("serde-saphyr", |b| {
        b.iter(|| {
            for d in &docs {
                black_box(serde_saphyr::from_str::<serde_json::Value>(d).unwrap());
            }
        })
    });
    group.bench_function("serde_yaml_ng", |b| {
        b.iter(|| {
            for d in &docs {
                black_box(serde_yaml_ng::from_str::<serde_json::Value>(d).unwrap());
            }
        })
    });
    group.bench_function("yaml_serde", |b| {
        b.iter(|| {
            for d in &docs {
                black_box(yaml_serde::from_str::<serde_json::Value>(d).unwrap());
            }
        })
    });
    group.finish();
}

/// The parsers' event streams alone on the M corpus, one core: the ceiling of a tree
/// builder over each. granit-parser is serde-saphyr's parser, which flotilla's subset
/// reader builds on; libyaml-safer is a safe Rust port of libyaml (which go-yaml, and so
/// Kubernetes, is a port of too), studied and not adopted (docs/performance.md).
fn yaml_events(c: &mut Criterion) {
    let files = repo(5_000, 20);
    let docs = documents(&files);
    let mut group = c.benchmark_group("yaml-events-M");
    group.throughput(Throughput::Bytes(bytes(&files)));
    group.bench_function("granit-parser", |b| {
        b.iter(|| {
            for d in &docs {
                for event in granit_parser::Parser::new_from_str(d) {
                    black_box(event.unwrap());
                }
            }
        })
    });
    group.bench_function("libyaml-safer", |b| {
        b.iter(|| {
            for d in &docs {
                let mut input = d.as_bytes();
                let mut parser = libyaml_safer::Parser::new();
                parser.set_input_string(&mut input);
                loop {
                    let event = parser.parse().unwrap();
                    if matches!(event.data, libyaml_safer::EventData::StreamEnd) {
                        break;
                    }
                    black_box(event);
                }
            }
        })
    });
    group.finish();
}

/// The Deployment customization of the interpreter bench: replicas read and revised
/// by Lua (over the native rule). Services and ConfigMaps get [`no_dependencies`].
const CUSTOMIZATIONS: &str = r#"apiVersion: config.karmada.io/v1alpha1
kind: ResourceInterpreterCustomization
metadata: {name: deployment}
spec:
  target: {apiVersion: apps/v1, kind: Deployment}
  customizations:
    replicaResource:
      luaScript: |
        local kube = require("kube")
        function GetReplicas(obj)
          return obj.spec.replicas, kube.accuratePodRequirements(obj.spec.template)
        end
    replicaRevision:
      luaScript: |
        function ReviseReplica(obj, desired)
          obj.spec.replicas = desired
          return obj
        end
"#;

/// A `GetDependencies` customization finding none, for the core kind `kind`.
fn no_dependencies(kind: &str) -> String {
    format!(
        "---\napiVersion: config.karmada.io/v1alpha1\nkind: ResourceInterpreterCustomization\nmetadata: {{name: {}}}\nspec:\n  target: {{apiVersion: v1, kind: {kind}}}\n  customizations:\n    dependencyInterpretation:\n      luaScript: |\n        function GetDependencies(obj)\n          return {{}}\n        end\n",
        kind.to_lowercase()
    )
}

/// The M render with and without a customization per template kind, every manifest
/// built (the revisions run at render): docs/performance.md's interpreter figure.
fn interpreter(c: &mut Criterion) {
    let (limits, state) = (Limits::default(), ClusterState::default());
    let plain = repo(5_000, 20);
    let mut customized = plain.clone();
    let text = format!("{CUSTOMIZATIONS}{}{}", no_dependencies("Service"), no_dependencies("ConfigMap"));
    customized.files.insert("interpreters.yaml".into(), text.into_bytes());
    let mut group = c.benchmark_group("interpreter-M");
    for (name, files) in [("native", &plain), ("customized", &customized)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let plan = flotilla_core::plan(files, &state, &limits).unwrap();
                let built = plan.clusters.keys().flat_map(|c| plan.manifests(c)).filter(|m| m.is_ok()).count();
                black_box((plan, built))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, sizes, scaling, yaml_crates, yaml_events, one_file_commit, interpreter);
criterion_main!(benches);
