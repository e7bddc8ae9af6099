//! Preview environments in the members: applied from a pull request's render, found
//! again after a restart from their labels, and removed.

use std::collections::BTreeSet;

use flotilla_core::escape;
use flotilla_core::finish::INSTANCE_ANNOTATION;
use flotilla_core::model::{ObjectKey, Plan};
use flotilla_core::preview::{self, EXPIRES_LABEL, HEAD_LABEL, PREVIEW_LABEL, Stamp};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use tracing::{error, warn};

use super::step::Found;
use super::{Previews, instance, list};
use crate::clusters::{self, Options};

impl Previews {
    /// The previews the members hold (read from their labelled Namespaces), and the
    /// members that could not be read (tried again later).
    pub(super) async fn restore(&self, members: &[String]) -> (Vec<Found>, Vec<String>) {
        let (mut found, mut missed) = (Vec::new(), Vec::new());
        let kubeconfig = match self.credentials.read(&self.host).await {
            Ok(k) => k,
            Err(e) => {
                warn!(error = format!("{e:#}"), "cannot read the member credentials to restore previews");
                return (found, members.to_vec());
            }
        };
        for member in members {
            match self.restore_one(&kubeconfig, member).await {
                Ok(more) => {
                    for f in more {
                        if !found.iter().any(|g: &Found| g.number == f.number) {
                            found.push(f);
                        }
                    }
                }
                Err(e) => {
                    warn!(cluster = %member, error = format!("{e:#}"), "cannot list the previews in this member; trying again later");
                    missed.push(member.clone());
                }
            }
        }
        (found, missed)
    }

    /// The previews one member holds.
    async fn restore_one(&self, kubeconfig: &kube::config::Kubeconfig, member: &str) -> anyhow::Result<Vec<Found>> {
        let apply = &self.settings.apply;
        let mut found = Vec::new();
        let client = self.pool.client(kubeconfig, member, apply.trust, apply.request_timeout, None).await?;
        let namespaces: Api<Namespace> = Api::all(client);
        let params = ListParams::default().labels(PREVIEW_LABEL);
        let listed = tokio::time::timeout(apply.request_timeout, namespaces.list(&params));
        for ns in listed.await.map_err(|_| anyhow::anyhow!("no answer in {:?}", apply.request_timeout))??.items {
            let labels = ns.metadata.labels.unwrap_or_default();
            let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
            let (Ok(number), Ok(expires)) = (label(PREVIEW_LABEL).parse(), label(EXPIRES_LABEL).parse()) else {
                continue;
            };
            // Another instance's preview of the same pull request is not ours to restore.
            let owner = ns.metadata.annotations.as_ref().and_then(|a| a.get(INSTANCE_ANNOTATION));
            if owner.is_some_and(|owner| *owner != instance(&apply.instance, number)) {
                continue;
            }
            if !found.iter().any(|f: &Found| f.number == number) {
                found.push(Found { number, head: label(HEAD_LABEL), expires });
            }
        }
        Ok(found)
    }

    /// Applies the preview to the members the head places objects on; the comment's
    /// paragraph about it, and whether every member took it.
    pub(super) async fn deploy(&self, plan: Plan, stamp: &Stamp) -> (String, bool) {
        let mut relocated = preview::relocate(plan, stamp);
        // The scope is checked again where the objects now go: a scope that allows
        // `team-a-*` does not allow `pr-3-team-a-web` unless it says so.
        let checked = relocated.plan.problems.len();
        if let Some(project) = &self.renderer.scope {
            relocated.plan = flotilla_core::project::restrict(relocated.plan, project);
        }
        let outside: BTreeSet<String> = relocated.plan.problems[checked..].iter().map(|p| p.object.spelled()).collect();
        let (push, _pull) = clusters::by_sync_mode(&relocated.plan);
        let targets: Vec<String> = push
            .into_iter()
            .filter(|c| relocated.plan.clusters.get(c).is_some_and(|items| !items.is_empty()))
            .collect();
        let instance = instance(&self.settings.apply.instance, stamp.number);
        let (contacted, mut outcomes) = self.contactable(&targets);
        outcomes.extend(match self.credentials.read(&self.host).await {
            Ok(kubeconfig) => {
                clusters::reconcile_all(&relocated.plan, &kubeconfig, &contacted, self.options(&instance)).await
            }
            Err(e) => contacted.iter().map(|t| (t.clone(), Err(format!("{e:#}")))).collect(),
        });
        let failures: Vec<(&String, &String)> =
            outcomes.iter().filter_map(|(c, o)| o.as_ref().err().map(|e| (c, e))).collect();
        let note = note(&relocated, stamp, &targets, &outside, &failures);
        (note, failures.is_empty())
    }

    /// Removes pull request `number`'s preview from every member.
    pub(super) async fn teardown(&self, number: u64, members: &[String]) -> anyhow::Result<()> {
        let kubeconfig = self.credentials.read(&self.host).await?;
        let instance = instance(&self.settings.apply.instance, number);
        let (contacted, mut outcomes) = self.contactable(members);
        outcomes.extend(clusters::teardown_all(&kubeconfig, &contacted, self.options(&instance)).await);
        let failed: Vec<String> =
            outcomes.into_iter().filter_map(|(c, o)| o.err().map(|e| format!("{c}: {e}"))).collect();
        anyhow::ensure!(failed.is_empty(), "{}", failed.join("; "));
        Ok(())
    }

    /// The members that may be contacted, and a failed outcome for each that the
    /// failover loop holds not Ready: it is not contacted until it is Ready again, and
    /// one attempt per member (no retries) bounds what a member that is still called
    /// Ready but does not answer costs the loop.
    fn contactable(&self, members: &[String]) -> (Vec<String>, Vec<(String, clusters::Outcome)>) {
        let overlay = self.health.as_ref().map(|h| h.borrow());
        let away = |m: &String| overlay.as_ref().is_some_and(|o| flotilla_core::failover::held_not_ready(o, m));
        let (away, contacted): (Vec<String>, Vec<String>) = members.iter().cloned().partition(away);
        let not_contacted = "not contacted: the member is not Ready".to_owned();
        (contacted, away.into_iter().map(|m| (m, Err(not_contacted.clone()))).collect())
    }

    fn options<'a>(&'a self, instance: &'a str) -> Options<'a> {
        self.settings.apply.options(instance, &self.pool, &self.fence, self.renderer.scope.as_deref())
    }
}

/// The comment's paragraph about a preview: where it runs, until when, what was left out
/// and where it could not be applied (every name and error escaped).
fn note(
    relocated: &preview::Relocated,
    stamp: &Stamp,
    targets: &[String],
    outside: &BTreeSet<String>,
    failures: &[(&String, &String)],
) -> String {
    let namespaces: BTreeSet<&str> = relocated
        .plan
        .clusters
        .values()
        .flatten()
        .filter_map(|i| relocated.plan.loaded.templates[i.template].key.namespace.as_deref())
        .collect();
    let mut note = format!(
        "**Preview** of {} in {} ({}), until {} unless pushed again.",
        escape::code(&stamp.head[..stamp.head.len().min(12)], escape::Place::Flow),
        list(targets),
        list(&namespaces.into_iter().map(str::to_owned).collect::<Vec<_>>()),
        preview::expiry_text(stamp.expires)
    );
    if !outside.is_empty() {
        let outside: Vec<String> = outside.iter().cloned().collect();
        note +=
            &format!(" Outside this instance's scope in their preview namespaces, not applied: {}.", list(&outside));
    }
    if !relocated.left_out.is_empty() {
        let left: Vec<String> = relocated.left_out.iter().map(ObjectKey::spelled).collect();
        note += &format!(" Cluster-scoped objects are left out of previews: {}.", list(&left));
    }
    if !failures.is_empty() {
        let logged: Vec<String> = failures.iter().map(|(c, e)| format!("{c}: {e}")).collect();
        error!(pull = stamp.number, failures = logged.join("; "), "the preview was not applied everywhere");
        // A member's error text is untrusted too: running text in the comment.
        let shown: Vec<String> =
            failures.iter().map(|(c, e)| format!("{}: {}", list(std::slice::from_ref(*c)), escape::text(e))).collect();
        note += &format!(" **Not applied** in {}.", shown.join("; "));
    }
    note
}
