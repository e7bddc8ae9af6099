//! Times each pipeline stage on a generated repo:
//! `cargo run --release -p flotilla-core --example stage-times -- 50000x100`.

#[path = "../benches/support/generate.rs"]
mod generate;

use std::time::Instant;

use flotilla_core::model::{ClusterState, Limits, RepoFiles};

fn main() {
    let arg = std::env::args().nth(1).unwrap_or_else(|| "5000x20".into());
    let (t, c) = arg.split_once('x').expect("<templates>x<clusters>");
    let files = generate::generate(t.parse().unwrap(), c.parse().unwrap());
    let files =
        RepoFiles { revision: "x".into(), files: files.into_iter().map(|(p, c)| (p, c.into_bytes())).collect() };
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
    let placed: Vec<_> = bindings
        .iter()
        .map(|b| match b.claim {
            flotilla_core::matching::Claim::Policy(p) => flotilla_core::schedule::place(
                &loaded.templates[b.template],
                &loaded.propagation_policies[p].spec.placement,
                &loaded.clusters,
                &state,
            )
            .is_ok(),
            _ => true,
        })
        .collect();
    println!(
        "place (1 core) {:>8.0} ms ({} ok)",
        clock.elapsed().as_secs_f64() * 1e3,
        placed.iter().filter(|p| **p).count()
    );
    let clock = Instant::now();
    let plan = flotilla_core::plan_loaded(loaded, "x".into(), &ClusterState::default());
    println!("bind+place+render {:>8.0} ms ({} problems)", clock.elapsed().as_secs_f64() * 1e3, plan.problems.len());
    let clock = Instant::now();
    drop(plan);
    println!("drop         {:>8.0} ms", clock.elapsed().as_secs_f64() * 1e3);
}
