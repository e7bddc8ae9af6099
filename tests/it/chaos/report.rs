//! What a soak saw: faults and recovery times by kind, violations, memory peaks.

use std::collections::BTreeMap;
use std::time::Duration;

use super::faults::Kind;

pub struct Report {
    seed: u64,
    duration: Duration,
    recoveries: BTreeMap<Kind, Vec<Duration>>,
    /// While a fault stalled one member: until the others held the last commit.
    others: BTreeMap<Kind, Vec<Duration>>,
    pub violations: Vec<String>,
    pub memory: BTreeMap<String, u64>,
    pub latest_write: Duration,
    pub autoscaler_commits: usize,
    pub commits: usize,
    /// Deletions and replica writes the audit checks looked at.
    pub checked: (usize, usize),
}

impl Report {
    pub fn new(seed: u64, duration: Duration) -> Self {
        Self {
            seed,
            duration,
            recoveries: BTreeMap::new(),
            others: BTreeMap::new(),
            violations: vec![],
            memory: BTreeMap::new(),
            latest_write: Duration::ZERO,
            autoscaler_commits: 0,
            commits: 0,
            checked: (0, 0),
        }
    }

    /// A violation, printed as it is found.
    pub fn violation(&mut self, what: String) {
        println!("chaos: {} VIOLATION: {what}", k8s_openapi::jiff::Timestamp::now());
        self.violations.push(what);
    }

    pub fn recovered(&mut self, kind: Kind, took: Duration) {
        self.recoveries.entry(kind).or_default().push(took);
    }

    pub fn isolated(&mut self, kind: Kind, took: Duration) {
        self.others.entry(kind).or_default().push(took);
    }

    pub fn faults(&self) -> usize {
        self.recoveries.values().map(Vec::len).sum()
    }

    /// Prints the figures and returns them as JSON.
    pub fn finish(&mut self) -> serde_json::Value {
        let mut kinds = serde_json::Map::new();
        for (kind, times) in &mut self.recoveries {
            let (n, p50, p99, max) = quantiles(times);
            println!("chaos: {:<14} {n:>3} faults; recovered p50 {p50:.1?}, p99 {p99:.1?}, max {max:.1?}", kind.name());
            let mut entry = serde_json::json!({"faults": n, "p50_s": p50.as_secs_f64(), "p99_s": p99.as_secs_f64(), "max_s": max.as_secs_f64()});
            if let Some(others) = self.others.get_mut(kind) {
                let (_, p50, p99, max) = quantiles(others);
                println!(
                    "chaos: {:<14}     the other members meanwhile: p50 {p50:.1?}, p99 {p99:.1?}, max {max:.1?}",
                    ""
                );
                entry["others_p50_s"] = p50.as_secs_f64().into();
                entry["others_p99_s"] = p99.as_secs_f64().into();
                entry["others_max_s"] = max.as_secs_f64().into();
            }
            kinds.insert(kind.name().into(), entry);
        }
        let memory: BTreeMap<&String, u64> = self.memory.iter().map(|(k, v)| (k, v >> 20)).collect();
        println!(
            "chaos: {} commits, {} by the autoscaler; peak memory MiB {memory:?}; {} deletions and {} replica writes audited, the latest {:.2?} after its sender's renewal",
            self.commits, self.autoscaler_commits, self.checked.0, self.checked.1, self.latest_write
        );
        serde_json::json!({
            "seed": self.seed, "duration_s": self.duration.as_secs(), "faults": self.faults(),
            "violations": self.violations, "recovery": kinds, "peak_memory_mib": memory,
            "commits": self.commits, "autoscaler_commits": self.autoscaler_commits,
            "latest_write_after_renewal_s": self.latest_write.as_secs_f64(),
            "audited": {"deletions": self.checked.0, "replica_writes": self.checked.1},
        })
    }
}

/// Count, p50, p99 and max (nearest rank) of some durations.
fn quantiles(times: &mut [Duration]) -> (usize, Duration, Duration, Duration) {
    times.sort();
    let at = |q: f64| times[((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1];
    (times.len(), at(0.5), at(0.99), times[times.len() - 1])
}
