//! A seeded fault-injection soak (`hack/chaos.sh`): faults drawn from a seeded
//! schedule while commits keep coming, and invariants read from the members, their
//! audit logs and the served repository. Ignored in `cargo test`; hack/chaos.sh runs
//! it with `FLOTILLA_CHAOS_DURATION` (seconds) and `FLOTILLA_CHAOS_SEED`, and writes
//! `FLOTILLA_CHAOS_REPORT` (JSON) when set.

mod checks;
mod faults;
mod invariants;
mod model;
mod report;
mod settle;
mod world;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use proptest::test_runner::{RngAlgorithm, TestRng};
use rand::RngExt;

use faults::{Fault, Undo};
use model::Model;
use report::Report;
use world::World;

/// After a fault ends, every member holds the last good revision within this bound.
const CONVERGE_WITHIN: Duration = Duration::from_secs(90);
/// While a fault stalls one member, the others converge within this of the last commit.
const ISOLATED_WITHIN: Duration = Duration::from_secs(30);
/// After the last fault: the autoscaler, the workload and its endpoints settle within this.
const SETTLE_WITHIN: Duration = Duration::from_secs(180);
/// No controller process grows past this (a replica peaks near 40 MiB in a 40 s run).
const MEMORY_BOUND: u64 = 160 << 20;
/// CPU (milli) per web pod: high load drives the FederatedHPA to its maximum.
const HIGH: i64 = 25;
const IDLE: i64 = 1;

struct Soak {
    world: World,
    rng: TestRng,
    /// The last good revision, as the test decided it.
    model: Model,
    /// Every good revision and when its push began (rewinds included).
    history: Vec<(SystemTime, Model)>,
    /// Good commits the branch may be rewound to.
    good: Vec<(String, Model)>,
    broken: bool,
    report: Report,
    load: Arc<AtomicI64>,
}

#[tokio::test(flavor = "multi_thread")]
async fn soak() {
    let env = |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let (duration, seed) = (Duration::from_secs(env("FLOTILLA_CHAOS_DURATION", 40)), env("FLOTILLA_CHAOS_SEED", 7));
    let dir = match std::env::var_os("FLOTILLA_CHAOS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => tempfile::Builder::new().prefix("flotilla-chaos-").tempdir().unwrap().keep(),
    };
    std::fs::create_dir_all(&dir).unwrap();
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes);
    let model = Model::initial(&mut rng);
    say(&format!("seed {seed}, {duration:?} of faults; processes' logs in {}", dir.display()));
    let world = World::start(&model.render(), include_str!("web.yaml"), dir);
    let first = world::head(world.work());
    let mut soak = Soak {
        world,
        rng,
        history: vec![(SystemTime::now(), model.clone())],
        good: vec![(first, model.clone())],
        model,
        broken: false,
        report: Report::new(seed, duration),
        load: Arc::new(AtomicI64::new(HIGH)),
    };
    soak.run(duration).await;
    let summary = soak.report.finish();
    if let Some(path) = std::env::var_os("FLOTILLA_CHAOS_REPORT") {
        std::fs::write(path, serde_json::to_vec_pretty(&summary).unwrap()).unwrap();
    }
    let (faults, violations) = (soak.report.faults(), soak.report.violations.len());
    println!("faults: {faults}, violations: {violations}");
    let least = (duration.as_secs() / 20).max(1) as usize;
    assert!(violations == 0 && faults >= least, "{violations} violations, {faults} faults (at least {least} expected)");
}

fn say(line: &str) {
    println!(
        "chaos: {} {line}",
        k8s_openapi::jiff::Timestamp::now().round(k8s_openapi::jiff::Unit::Millisecond).unwrap()
    );
}

impl Soak {
    async fn run(&mut self, duration: Duration) {
        self.settle("the first revision", SETTLE_WITHIN).await;
        let driver = crate::autoscale::drive_load_of(
            self.world.members().kubeconfig().to_owned(),
            self.load.clone(),
            (model::NS, "web"),
            &["member1", "member2"],
        );
        let (stop, memory) = self.watch_memory();
        let start = Instant::now();
        let mut round = vec![];
        while start.elapsed() < duration {
            let mut fault = Fault::draw(&mut self.rng, &mut round);
            self.fault(&mut fault).await;
            if self.rng.random_bool(0.3) {
                let level = if self.load.load(Ordering::Relaxed) == HIGH { IDLE } else { HIGH };
                self.load.store(level, Ordering::Relaxed);
            }
        }
        self.load.store(HIGH, Ordering::Relaxed);
        self.repair();
        self.settle_workload().await;
        driver.abort();
        stop.store(true, Ordering::Relaxed);
        self.report.memory = memory.lock().unwrap().clone();
        self.check_history();
    }

    /// One fault: injected, commits while it lasts, undone, then the time until every
    /// member holds the last good revision again.
    async fn fault(&mut self, fault: &mut Fault) {
        let undo = faults::inject(&mut self.world, fault);
        if matches!(undo, Undo::Nothing) {
            say(&format!("{}: nobody leads; skipped", fault.kind.name()));
            tokio::time::sleep(Duration::from_secs(2)).await;
            return;
        }
        let began = Instant::now();
        let what = format!("{} {} for {:.1?}", fault.kind.name(), fault.describe(&self.world), fault.lasts);
        let mut commits = vec![];
        while began.elapsed() < fault.lasts {
            commits.push(self.commit());
            let pause = Duration::from_millis(self.rng.random_range(1_000..3_000));
            tokio::time::sleep(pause.min(fault.lasts.saturating_sub(began.elapsed()))).await;
        }
        if let Some(stalled) = fault.stalls() {
            self.isolated(fault, stalled, &what).await;
        }
        faults::undo(&mut self.world, undo);
        // A process stopped while good commits came and went, that finds the head
        // broken, keeps what it last applied until the head renders again (as Argo CD
        // and Flux do; no older commit is searched for): recovery is measured against a
        // head that renders.
        self.repair();
        let healed = Instant::now();
        let recovered = self.converge(CONVERGE_WITHIN, None).await;
        match recovered {
            Ok(()) => {
                let took = healed.elapsed();
                say(&format!(
                    "fault {}: {what}; commits {commits:?}; converged {took:.1?} after",
                    self.report.faults() + 1
                ));
                self.report.recovered(fault.kind, took);
            }
            Err(e) => {
                self.report.violation(format!("after {what}: not converged within {CONVERGE_WITHIN:?}: {e}"));
                self.report.recovered(fault.kind, CONVERGE_WITHIN);
            }
        }
    }

    /// While a fault stalls one member, every other member holds the last good
    /// revision within [`ISOLATED_WITHIN`] of the last commit: one member's trouble
    /// never holds another's deploys.
    async fn isolated(&mut self, fault: &Fault, stalled: usize, what: &str) {
        let start = Instant::now();
        match self.converge(ISOLATED_WITHIN, Some(stalled)).await {
            Ok(()) => self.report.isolated(fault.kind, start.elapsed()),
            Err(e) => self.report.violation(format!(
                "during {what}: the other members did not converge within {ISOLATED_WITHIN:?}: {e}"
            )),
        }
    }

    /// Waits until every member (but `but`) holds the model; the last difference otherwise.
    async fn converge(&self, within: Duration, but: Option<usize>) -> Result<(), String> {
        let start = Instant::now();
        loop {
            let result = invariants::converged_but(self.world.members(), &self.model, but).await;
            if result.is_ok() || start.elapsed() > within {
                return result;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn settle(&mut self, what: &str, within: Duration) {
        if let Err(e) = self.converge(within, None).await {
            self.report.violation(format!("{what}: not converged within {within:?}: {e}"));
        }
    }

    /// One commit of the seeded kinds: a change of the model, a broken revision, or a
    /// rewind to an earlier good one.
    fn commit(&mut self) -> String {
        let roll = self.rng.random_range(0..12u32);
        let pushed = SystemTime::now();
        if roll == 0 && self.good.len() > 2 {
            let back = self.rng.random_range(1..self.good.len().min(6));
            let (id, model) = self.good[self.good.len() - 1 - back].clone();
            self.world.rewind(&id);
            self.broken = false;
            self.model = model;
            self.history.push((pushed, self.model.clone()));
            self.good.push((id.clone(), self.model.clone()));
            return format!("rewind to {}", &id[..8]);
        }
        if roll == 1 && !self.broken {
            crate::support::write(
                self.world.work(),
                "broken.yaml",
                b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [\n",
            );
            self.world.publish("broken");
            self.broken = true;
            return "broken".into();
        }
        if self.broken {
            std::fs::remove_file(self.world.work().join("broken.yaml")).unwrap();
            self.broken = false;
        }
        let said = self.model.change(&mut self.rng);
        crate::support::write(self.world.work(), "fleet.yaml", self.model.render().as_bytes());
        let id = self.world.publish(&said);
        self.history.push((pushed, self.model.clone()));
        self.good.push((id, self.model.clone()));
        said
    }

    /// Removes a broken file the last commit left, after a fault and before settling:
    /// the autoscaler does not edit a head that does not load (docs/autoscaling.md).
    fn repair(&mut self) {
        if std::mem::take(&mut self.broken) {
            std::fs::remove_file(self.world.work().join("broken.yaml")).unwrap();
            let id = self.world.publish("repair the broken revision");
            self.history.push((SystemTime::now(), self.model.clone()));
            self.good.push((id, self.model.clone()));
            say("the head did not load; repaired it");
        }
    }

    /// Samples every controller process's resident memory each second (the pids of
    /// restarted processes too, from the world's `pids` file).
    fn watch_memory(&self) -> (Arc<AtomicBool>, Arc<Mutex<BTreeMap<String, u64>>>) {
        let (stop, peaks) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(BTreeMap::new())));
        let pids = self.world.dir.join("pids");
        let (stop_, peaks_) = (stop.clone(), peaks.clone());
        std::thread::spawn(move || {
            while !stop_.load(Ordering::Relaxed) {
                let text = std::fs::read_to_string(&pids).unwrap_or_default();
                for (pid, name) in text.lines().filter_map(|l| l.split_once(' ')) {
                    if let Some(bytes) = pid.parse().ok().and_then(invariants::rss) {
                        let mut peaks = peaks_.lock().unwrap();
                        let peak = peaks.entry(name.to_owned()).or_insert(0);
                        *peak = (*peak).max(bytes);
                    }
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        (stop, peaks)
    }
}
