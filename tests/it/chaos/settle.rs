//! The end of a soak: every fault undone, the fleet settles, and the whole history is
//! checked.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;

use super::invariants::{self, replicas_at};
use super::model::NS;
use super::{MEMORY_BOUND, SETTLE_WITHIN, Soak};
use crate::services::addresses;

/// The FederatedHPA's maximum, where high load drives it.
const MAX: i64 = 4;

impl Soak {
    /// Under high load, the autoscaler commits the maximum, the members run it divided
    /// 2:2, member1 imports member2's two endpoints, and every member holds the model.
    pub(super) async fn settle_workload(&mut self) {
        let start = Instant::now();
        let mut pending = self.pending().await;
        while !pending.is_empty() && start.elapsed() < SETTLE_WITHIN {
            tokio::time::sleep(Duration::from_millis(500)).await;
            pending = self.pending().await;
        }
        for what in pending {
            self.report.violation(format!("not settled within {SETTLE_WITHIN:?} after the last fault: {what}"));
        }
        super::say(&format!("settled {:.1?} after the last fault", start.elapsed()));
    }

    async fn pending(&self) -> Vec<String> {
        let members = self.world.members();
        let mut pending = vec![];
        if let Err(e) = invariants::converged(members, &self.model).await {
            pending.push(e);
        }
        let committed = replicas_at(&self.world.served(), "main");
        if committed != Some(MAX) {
            pending.push(format!("Git holds replicas {committed:?}, the autoscaler's maximum is {MAX}"));
        }
        let mut split = vec![];
        for member in ["member1", "member2"] {
            let api: Api<Deployment> = Api::namespaced(members.client(member).await, NS);
            let got = tokio::time::timeout(Duration::from_secs(3), api.get_opt("web")).await;
            split.push(got.ok().and_then(Result::ok).flatten().and_then(|d| d.spec?.replicas));
        }
        if split != [Some(2), Some(2)] {
            pending.push(format!("web runs {split:?} replicas in member1 and member2, expected 2 and 2"));
        }
        let provided = addresses(members, "member2", NS, "web", false).await;
        let imported = addresses(members, "member1", NS, "web", true).await;
        if provided.len() != 2 || imported != provided {
            pending.push(format!("member1 imports {imported:?} of web, member2 provides {provided:?}"));
        }
        pending
    }

    /// The history's invariants: deletions, fencing, the autoscaler's commits, memory.
    pub(super) fn check_history(&mut self) {
        let audits = invariants::audits(self.world.members());
        let (unasked, deletions) = invariants::unasked_deletions(&audits, &self.history);
        let (late, latest, writes) = invariants::late_writes(&audits, &self.world.replica_pids());
        self.report.latest_write = latest;
        self.report.checked = (deletions, writes);
        for v in unasked.into_iter().chain(late) {
            self.report.violation(v);
        }
        if deletions == 0 || writes == 0 {
            self.report.violation(format!(
                "the audit logs show {deletions} deletions and {writes} writes by the replicas: the checks saw nothing"
            ));
        }
        let (wrong, commits) = invariants::autoscaler_commits(&self.world.served());
        self.report.autoscaler_commits = commits;
        for v in wrong {
            self.report.violation(v);
        }
        self.report.commits = self.history.len();
        let over: Vec<String> = self
            .report
            .memory
            .iter()
            .filter(|(_, bytes)| **bytes > MEMORY_BOUND)
            .map(|(name, bytes)| format!("{name} reached {} MiB of resident memory", bytes >> 20))
            .collect();
        for v in over {
            self.report.violation(v);
        }
    }
}
