//! Times each pipeline stage on a generated repo:
//! `cargo run --release -p flotilla-core --example stage-times -- 50000x100`, or the
//! plan against the parse floor, round by round: `… -- 50000x100 ratio 8 [detail]`.

#[path = "../benches/support/generate.rs"]
mod generate;

use std::time::Instant;

use flotilla_core::model::{ClusterState, Limits, RepoFiles};

fn main() {
    let arg = std::env::args().nth(1).unwrap_or_else(|| "5000x20".into());
    let (t, c) = arg.split_once('x').expect("<templates>x<clusters>");
    let files = generate::generate(t.parse().unwrap(), c.parse().unwrap());
    let files = RepoFiles {
        revision: "x".into(),
        files: files.into_iter().map(|(p, c)| (p, c.into_bytes())).collect(),
        ..Default::default()
    };
    if std::env::args().nth(2).as_deref() == Some("cached") {
        return cached(&files);
    }
    if std::env::args().nth(2).as_deref() == Some("ratio") {
        return ratio(&files, std::env::args().nth(3).and_then(|n| n.parse().ok()).unwrap_or(8));
    }
    let limits = Limits::default();
    let clock = Instant::now();
    flotilla_core::load::parse_only(&files, &limits).unwrap();
    println!("parse-only   {:>8.0} ms", clock.elapsed().as_secs_f64() * 1e3);
    let clock = Instant::now();
    let loaded = flotilla_core::load::load(&files, &limits).unwrap();
    println!("load         {:>8.0} ms", clock.elapsed().as_secs_f64() * 1e3);
    let clock = Instant::now();
    let (bindings, _) = flotilla_core::matching::bind(&loaded);
    println!("bind         {:>8.0} ms ({} bindings)", clock.elapsed().as_secs_f64() * 1e3, bindings.len());
    let clock = Instant::now();
    let state = ClusterState::default();
    let placers: Vec<_> = loaded
        .propagation_policies
        .iter()
        .map(|p| flotilla_core::schedule::Placer::new(&p.spec.placement, &loaded.clusters))
        .collect();
    println!("placers      {:>8.0} ms", clock.elapsed().as_secs_f64() * 1e3);
    let placed: Vec<_> = bindings
        .iter()
        .map(|b| match b.claim {
            flotilla_core::matching::Claim::Policy(p) => {
                placers[p].place(&loaded.templates[b.template], &state).is_ok()
            }
            _ => true,
        })
        .collect();
    println!(
        "place (1 core) {:>8.0} ms ({} ok)",
        clock.elapsed().as_secs_f64() * 1e3,
        placed.iter().filter(|p| **p).count()
    );
    // The stages of `plan_loaded` one by one, on both cores as it runs them (its
    // dependent-overrides check, not timed here, is a scan of the bindings).
    let clock = Instant::now();
    let placed: Vec<_> = {
        use rayon::prelude::*;
        bindings
            .into_par_iter()
            .map(|b| {
                let result = match b.claim {
                    flotilla_core::matching::Claim::Policy(p) => {
                        placers[p].place(&loaded.templates[b.template], &state)
                    }
                    _ => Ok(Default::default()),
                };
                (b, result)
            })
            .collect()
    };
    println!("place (2 cores) {:>6.0} ms", clock.elapsed().as_secs_f64() * 1e3);
    let clock = Instant::now();
    let plan = flotilla_core::render::render(loaded, "x".into(), placed, Vec::new(), Vec::new());
    println!("render       {:>8.0} ms", clock.elapsed().as_secs_f64() * 1e3);
    drop(plan);
    let loaded = flotilla_core::load::load(&files, &limits).unwrap();
    let clock = Instant::now();
    let plan = flotilla_core::plan_loaded(loaded, "x".into(), &ClusterState::default());
    println!("bind+place+render {:>8.0} ms ({} problems)", clock.elapsed().as_secs_f64() * 1e3, plan.problems.len());
    let clock = Instant::now();
    drop(plan);
    println!("drop         {:>8.0} ms", clock.elapsed().as_secs_f64() * 1e3);
}

/// The same stages for a one-file commit with the parse cache warm (see the
/// `one-file-commit-M` benchmark): `stage-times 5000x20 cached`.
#[allow(dead_code)]
fn cached(files: &RepoFiles) {
    let limits = Limits::default();
    let mut full = files.clone();
    full.ids = files.files.keys().map(|p| (p.clone(), format!("{p}@0"))).collect();
    let mut cache = flotilla_core::load::ParseCache::default();
    flotilla_core::load::load_cached(&full, &mut cache, &limits).unwrap();
    let changed = "apps/batch-00007.yaml";
    for i in 1..=std::env::args().nth(3).and_then(|n| n.parse().ok()).unwrap_or(5) {
        let mut files = RepoFiles { revision: format!("{i}"), ids: full.ids.clone(), ..Default::default() };
        files.ids.insert(changed.into(), format!("{i}"));
        let text =
            String::from_utf8(full.files[changed].clone()).unwrap().replace("level: info", &format!("level: {i}"));
        files.files.insert(changed.into(), text.into_bytes());
        let clock = Instant::now();
        let loaded = flotilla_core::load::load_cached(&files, &mut cache, &limits).unwrap();
        let load = clock.elapsed();
        let clock = Instant::now();
        let (bindings, _) = flotilla_core::matching::bind(&loaded);
        let bind = clock.elapsed();
        drop(bindings);
        let clock = Instant::now();
        let plan = flotilla_core::plan_loaded(loaded, "x".into(), &ClusterState::default());
        let rest = clock.elapsed();
        println!(
            "cached: load {:.1} ms, bind {:.1} ms, bind+place+render {:.1} ms",
            load.as_secs_f64() * 1e3,
            bind.as_secs_f64() * 1e3,
            rest.as_secs_f64() * 1e3
        );
        drop(plan);
    }
}

/// The plan against the parse floor, run alternately so that both see the same machine
/// (on a shared machine the speed drifts between two benchmarks run one after the
/// other): `stage-times 50000x100 ratio 8`.
fn ratio(files: &RepoFiles, rounds: usize) {
    let limits = Limits::default();
    let (mut floor, mut plan) = (Vec::new(), Vec::new());
    let detail = std::env::args().nth(4).as_deref() == Some("detail");
    let mut stages = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..rounds {
        let clock = Instant::now();
        std::hint::black_box(flotilla_core::load::parse_only(files, &limits).unwrap());
        floor.push(clock.elapsed().as_secs_f64());
        let clock = Instant::now();
        drop(std::hint::black_box(flotilla_core::plan(files, &ClusterState::default(), &limits).unwrap()));
        plan.push(clock.elapsed().as_secs_f64());
        if detail {
            let clock = Instant::now();
            let loaded = flotilla_core::load::load(files, &limits).unwrap();
            stages[0].push(clock.elapsed().as_secs_f64());
            let clock = Instant::now();
            let plan = flotilla_core::plan_loaded(loaded, "x".into(), &ClusterState::default());
            stages[1].push(clock.elapsed().as_secs_f64());
            let clock = Instant::now();
            drop(plan);
            stages[2].push(clock.elapsed().as_secs_f64());
        }
    }
    let ratios: Vec<f64> = plan.iter().zip(&floor).map(|(p, f)| p / f).collect();
    let min = |v: &[f64]| v.iter().copied().fold(f64::MAX, f64::min);
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "parse floor median {:.3} s, plan median {:.3} s; per-round ratio median {:.2}x (min {:.2}x, max {:.2}x)",
        median(&floor),
        median(&plan),
        median(&ratios),
        min(&ratios),
        max(&ratios)
    );
    if detail {
        println!(
            "median (min): load {:.3} ({:.3}) s, bind+place+render {:.3} ({:.3}) s, drop {:.3} ({:.3}) s",
            median(&stages[0]),
            min(&stages[0]),
            median(&stages[1]),
            min(&stages[1]),
            median(&stages[2]),
            min(&stages[2])
        );
    }
}
