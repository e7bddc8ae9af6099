//! The workload page's live comparison (`?live=1`): in each member the object goes to,
//! the object as it is beside what applying this revision would make of it (a
//! server-side apply dry run, as `flotilla diff --live` does), limited to the fields the
//! manifest sets; drift shows as a field someone changed that applying would put back.
//! Asked for on request only (a dry run per member is not free), for at most
//! [`AT_MOST`] members at once (`member=` names one); a Secret's values are masked.

use std::sync::Arc;

use flotilla_core::model::{ObjectKey, Plan};
use flotilla_core::plan_diff::{self, ClusterDiff};
use maud::{Markup, html};

use super::pages::{member_url, t};
use crate::clusters::connect::Access;
use crate::clusters::{self, Applying};

/// Members compared at once.
pub const AT_MOST: usize = 20;

/// How the page reaches the members to compare.
pub struct Live {
    /// Member credentials and clients.
    pub access: Access,
    /// The instance whose objects these are, and how it writes.
    pub applying: Applying,
    /// What the instance may touch.
    pub scope: Option<Arc<flotilla_core::project::Project>>,
}

/// One member's comparison: what applying would change, or why it could not be read.
pub type Compared = Vec<(String, Result<ClusterDiff, String>)>;

impl Live {
    /// Compares `key` of `plan` in `members` (those of them the plan sends it to, and
    /// that this instance applies: Pull members are their agents').
    pub async fn compare(&self, plan: &Plan, key: &ObjectKey, members: &[String]) -> Compared {
        let push = clusters::by_sync_mode(plan).0;
        let members: Vec<String> = members.iter().filter(|m| push.contains(m)).cloned().collect();
        let one = plan.only_object(key, &members);
        let names: Vec<String> = one.clusters.keys().cloned().collect();
        let kubeconfig = match self.access.kubeconfig().await {
            Ok(k) => k,
            Err(e) => return names.into_iter().map(|n| (n, Err(format!("{e:#}")))).collect(),
        };
        let fence = Default::default();
        let options = self.applying.options(&self.applying.instance, &self.access.pool, &fence, self.scope.as_deref());
        // Read-only: the inventory is read whichever source recorded it.
        let options = clusters::Options { adopt: true, ..options };
        let observed = clusters::observe_all(&one, &kubeconfig, &names, options).await;
        observed.into_iter().map(|(c, o)| (c, o.map(|found| plan_diff::live::cluster(&found.observed, &[])))).collect()
    }
}

/// The members a comparison covers: `member` alone when given, else the first
/// [`AT_MOST`] of `placed`; and how many were left out.
pub fn chosen(placed: &[String], member: Option<&str>) -> (Vec<String>, usize) {
    match member {
        Some(m) => (placed.iter().filter(|p| *p == m).cloned().collect(), 0),
        None => (placed.iter().take(AT_MOST).cloned().collect(), placed.len().saturating_sub(AT_MOST)),
    }
}

/// The comparison as a section of the workload page.
pub fn section(compared: &Compared, left_out: usize) -> Markup {
    let value = |v: &Option<serde_json::Value>| v.as_ref().map_or("(absent)".to_owned(), |v| t(&v.to_string()));
    html! {
        h2 id="live" { "Live" }
        p { "Each member's object beside what applying this revision would make of it (a server-side dry run), in the fields the manifest sets." }
        table.live {
            thead { tr { th scope="col" { "Member" } th scope="col" { "Live" } } }
            tbody { @for (member, outcome) in compared {
                tr data-member=(member) data-live=(state(outcome)) {
                    th scope="row" { a href=(member_url(member)) { (t(member)) } }
                    @match outcome {
                        Err(e) => td.unhealthy { "cannot compare: " (t(e)) },
                        Ok(d) => td class=(if state(outcome) == "synced" { "healthy" } else { "progressing" }) {
                            @if state(outcome) == "synced" { "in sync" }
                            @for _ in &d.added { "not there: applying creates it" }
                            @for f in &d.failed { span.unhealthy { "the member would refuse it: " (t(&f.reason)) } }
                            @for c in &d.changed {
                                "differs:"
                                ul { @for f in &c.fields { li { code { (t(&f.path)) } ": " (value(&f.from)) " → " (value(&f.to)) } } }
                            }
                        },
                    }
                }
            } }
        }
        @if left_out > 0 { p { (left_out) " more members not compared: choose one with " code { "member=NAME" } "." } }
    }
}

/// `synced`, `missing`, `drifted`, `refused` or `unreadable`.
fn state(outcome: &Result<ClusterDiff, String>) -> &'static str {
    match outcome {
        Err(_) => "unreadable",
        Ok(d) if !d.failed.is_empty() => "refused",
        Ok(d) if !d.added.is_empty() => "missing",
        Ok(d) if !d.changed.is_empty() => "drifted",
        Ok(_) => "synced",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comparison_covers_one_named_member_or_the_first_few() {
        let placed: Vec<String> = (0..25).map(|i| format!("m{i:02}")).collect();
        let (all, left) = chosen(&placed, None);
        assert_eq!((all.len(), left), (AT_MOST, 5));
        assert_eq!(chosen(&placed, Some("m24")), (vec!["m24".to_owned()], 0));
        assert_eq!(chosen(&placed, Some("elsewhere")).0, Vec::<String>::new(), "only members it is placed on");
    }

    #[test]
    fn each_outcome_reads_as_one_state() {
        let changed = plan_diff::Changed {
            object: plan_diff::Entry::from(&ObjectKey::new("apps", "Deployment", Some("ns"), "web")),
            fields: vec![plan_diff::FieldChange { path: "spec.replicas".into(), from: None, to: None }],
            overrides_added: Vec::new(),
            overrides_removed: Vec::new(),
        };
        let drifted = ClusterDiff { changed: vec![changed], ..Default::default() };
        assert_eq!(state(&Ok(drifted.clone())), "drifted");
        assert_eq!(state(&Ok(ClusterDiff::default())), "synced");
        assert_eq!(state(&Err("no route".into())), "unreadable");
        let html = section(&vec![("m<1>".into(), Ok(drifted))], 3).into_string();
        assert!(
            html.contains("m&lt;1&gt;") && html.contains("spec.replicas") && html.contains("3 more members"),
            "{html}"
        );
    }
}
