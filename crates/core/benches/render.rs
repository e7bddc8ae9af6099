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
    RepoFiles { revision: format!("bench-{templates}x{clusters}"), files }
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

/// The same documents (the M corpus, split by flotilla) parsed into a JSON tree on one
/// core by each maintained YAML crate: the comparison behind choosing serde-saphyr.
fn yaml_crates(c: &mut Criterion) {
    let files = repo(5_000, 20);
    let docs: Vec<&str> = files
        .files
        .values()
        .flat_map(|f| flotilla_core::load::split(std::str::from_utf8(f).unwrap()))
        .map(|chunk| chunk.text)
        .collect();
    let mut group = c.benchmark_group("yaml-crates-M");
    group.throughput(Throughput::Bytes(bytes(&files)));
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

criterion_group!(benches, sizes, scaling, yaml_crates);
criterion_main!(benches);
