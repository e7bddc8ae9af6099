//! The autoscaler inside `flotilla run`: every sync period the leader evaluates each
//! FederatedHPA and CronFederatedHPA of the last rendered revision against the members
//! and writes the replica counts it decides back to Git (one commit per sync, pushed to
//! the watched branch), or, with `--writeback=state`, into a ConfigMap in the host
//! cluster that the render reads. Either way the next render applies it.

pub mod observe;
mod run;
mod values;
pub mod writeback;

pub use run::{Autoscaler, Writer};

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use flotilla_core::autoscale::{self, History, Timing, cron::Schedule};
use flotilla_core::model::autoscale::{CronFederatedHpaSpec, FederatedHpaSpec};
use flotilla_core::model::{Named, ObjectKey, Plan};
use tracing::warn;
use writeback::{Edit, Target};

use crate::status::AutoscalerStatus;

/// Where decisions go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Writeback {
    /// A commit to the watched branch.
    Git,
    /// A ConfigMap in the host cluster (for repos that forbid bot commits).
    State,
    /// Decide and report only.
    Off,
}

/// Autoscaler settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Sync period.
    pub interval: Duration,
    /// Where decisions go.
    pub writeback: Writeback,
    /// Commit author (name, email).
    pub author: (String, String),
    /// Tolerance and windows.
    pub timing: Timing,
}

/// What the autoscaler keeps between syncs (the leader's memory; a new leader starts
/// with empty windows).
#[derive(Default)]
pub struct State {
    histories: BTreeMap<String, History>,
    /// Per cron rule: the time it was last evaluated up to.
    cron_checked: BTreeMap<String, i64>,
    /// By the autoscaler's key, spelled.
    pub status: BTreeMap<String, AutoscalerStatus>,
}

impl State {
    /// Drops what is kept for autoscalers and cron rules the revision no longer
    /// declares, so status and memory follow the repository.
    fn forget_removed(&mut self, plan: &Plan) {
        let hpas = plan.loaded.federated_hpas.iter().map(|h| autoscaler_id("FederatedHPA", h));
        let crons = &plan.loaded.cron_federated_hpas;
        let ids: BTreeSet<String> = hpas.chain(crons.iter().map(|c| autoscaler_id("CronFederatedHPA", c))).collect();
        let rules: BTreeSet<String> = crons
            .iter()
            .flat_map(|c| {
                c.spec.rules.iter().map(move |r| format!("{}/{}", autoscaler_id("CronFederatedHPA", c), r.name))
            })
            .collect();
        self.status.retain(|id, _| ids.contains(id));
        self.histories.retain(|id, _| ids.contains(id));
        self.cron_checked.retain(|rule, _| rules.contains(rule));
        for (id, status) in &mut self.status {
            status.rules.retain(|name, _| rules.contains(&format!("{id}/{name}")));
        }
    }
}

/// How status, metrics and history name an autoscaler: its key, spelled.
fn autoscaler_id<S>(kind: &str, named: &Named<S>) -> String {
    let key = ObjectKey {
        api_version: "autoscaling.karmada.io/v1alpha1".into(),
        kind: kind.into(),
        namespace: Some(named.namespace.clone().unwrap_or_else(|| "default".into())),
        name: named.name.clone(),
    };
    key.spelled()
}

fn rfc3339(unix: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(unix).map(|t| t.to_string()).unwrap_or_default()
}

/// A decision to write, with what the commit message says about it.
struct Change<'p> {
    edit: Edit,
    line: String,
    source: Source<'p>,
}

/// What decided a change, and so which status and history record it.
enum Source<'p> {
    /// A FederatedHPA: its id, spec and decision (the write is a scale event).
    Hpa { id: String, spec: &'p FederatedHpaSpec, decision: autoscale::Decision },
    /// A CronFederatedHPA rule run: its autoscaler's id, the rule, and the rule's
    /// successful and failed history limits.
    Cron { id: String, rule: String, limits: (usize, usize) },
}

/// What one sync works from.
pub struct Round<'a> {
    /// Settings.
    pub settings: &'a Settings,
    /// The last rendered revision.
    pub plan: &'a Plan,
    /// How to reach the members.
    pub members: observe::Clients<'a>,
    /// Replicas from the state ConfigMap (`--writeback=state`), by state key.
    pub overrides: &'a BTreeMap<String, i64>,
    /// Now (unix seconds).
    pub now: i64,
}

/// The template replicas the autoscaler starts from: the state override, else Git's.
fn current_replicas(sync: &Round<'_>, key: &ObjectKey) -> Option<i64> {
    let template = sync.plan.loaded.template(key)?;
    let state = sync.overrides.get(&key.spelled()).copied();
    Some(state.unwrap_or_else(|| {
        template.object().pointer("/spec/replicas").and_then(serde_json::Value::as_i64).unwrap_or(1)
    }))
}

/// Evaluates every autoscaler; returns the edits to write.
async fn evaluate<'p>(sync: &Round<'p>, state: &mut State) -> Vec<Change<'p>> {
    let mut changes = Vec::new();
    let plan = sync.plan;
    state.forget_removed(plan);
    for hpa in &plan.loaded.federated_hpas {
        changes.extend(evaluate_hpa(sync, state, hpa).await);
    }
    for cron in &plan.loaded.cron_federated_hpas {
        changes.extend(evaluate_cron(sync, state, cron));
    }
    changes
}

/// One FederatedHPA: observe its target in the members and decide.
async fn evaluate_hpa<'p>(sync: &Round<'p>, state: &mut State, hpa: &'p Named<FederatedHpaSpec>) -> Option<Change<'p>> {
    let plan = sync.plan;
    {
        let namespace = hpa.namespace.clone().unwrap_or_else(|| "default".into());
        let id = autoscaler_id("FederatedHPA", hpa);
        let r = &hpa.spec.scale_target_ref;
        let key = r.key(&namespace);
        let status = state.status.entry(id.clone()).or_default();
        status.kind = "FederatedHPA".into();
        status.target = key.to_string();
        let Some(current) = current_replicas(sync, &key) else {
            status.message = Some(format!("the target {key} is not declared in the repository; not scaling"));
            status.conditions.clear();
            return None;
        };
        let index = plan.loaded.templates.binary_search_by(|t| t.key.cmp(&key)).expect("found above");
        let clusters: Vec<String> = plan
            .clusters
            .iter()
            .filter(|(_, items)| items.iter().any(|r| r.template == index))
            .map(|(c, _)| c.clone())
            .collect();
        let members = observe::observe(sync.members, &clusters, &key).await;
        for (cluster, why) in &members.failed {
            warn!(autoscaler = %id, cluster, error = %why, "member not read; left out of this sync");
        }
        let observed =
            autoscale::Observed { current, member_replicas: members.replicas, pods: &members.pods, now: sync.now };
        let history = state.histories.entry(id.clone()).or_default();
        let decision = autoscale::decide(&hpa.spec, &observed, history, &sync.settings.timing);
        status.current_replicas = Some(current);
        status.desired_replicas = Some(decision.desired);
        status.current_metrics = decision.metrics.clone();
        status.conditions = decision.conditions.iter().map(Into::into).collect();
        status.message = match decision.desired == current {
            true => Some(
                decision
                    .conditions
                    .iter()
                    .find(|c| c.status == "False" || c.reason.ends_with("Stabilized"))
                    .map_or_else(|| "within tolerance of the target".to_owned(), |c| c.message.clone()),
            ),
            false => None,
        };
        if decision.desired == current {
            return None;
        }
        let reason = decision.reason.clone().unwrap_or_default();
        Some(Change {
            edit: Edit::replicas(key.clone(), decision.desired, Some(current)),
            line: format!(
                "{key}: replicas {current} → {} (FederatedHPA {namespace}/{}: {reason})",
                decision.desired, hpa.name
            ),
            source: Source::Hpa { id, spec: &hpa.spec, decision },
        })
    }
}

/// One CronFederatedHPA: the rules due since the last sync.
fn evaluate_cron<'p>(sync: &Round<'p>, state: &mut State, cron: &'p Named<CronFederatedHpaSpec>) -> Vec<Change<'p>> {
    let plan = sync.plan;
    let mut changes = Vec::new();
    {
        let namespace = cron.namespace.clone().unwrap_or_else(|| "default".into());
        let id = autoscaler_id("CronFederatedHPA", cron);
        let r = &cron.spec.scale_target_ref;
        let status = state.status.entry(id.clone()).or_default();
        status.kind = "CronFederatedHPA".into();
        status.target = r.key(&namespace).to_string();
        for rule in &cron.spec.rules {
            let rule_id = format!("{id}/{}", rule.name);
            let since = *state.cron_checked.entry(rule_id.clone()).or_insert(sync.now);
            state.cron_checked.insert(rule_id, sync.now);
            let entry = status.rules.entry(rule.name.clone()).or_default();
            let suspended = rule.suspend.unwrap_or(false);
            let limits = (
                rule.successful_history_limit.unwrap_or(3).max(0) as usize,
                rule.failed_history_limit.unwrap_or(3).max(0) as usize,
            );
            let schedule = match Schedule::parse(&rule.schedule, rule.time_zone.as_deref()) {
                Ok(s) => s,
                Err(e) => {
                    // Loading validates schedules; kept bounded should one slip through.
                    remember(&mut entry.failed, format!("{}: {e}", rfc3339(sync.now)), limits.1);
                    continue;
                }
            };
            entry.next_execution_time = (!suspended).then(|| schedule.next_after(sync.now).map(rfc3339)).flatten();
            let Some(at) = schedule.due(since, sync.now).filter(|_| !suspended) else { continue };
            let edits = match rule_edits(plan, &namespace, rule, r) {
                Ok(edits) => edits,
                Err(why) => {
                    remember(&mut entry.failed, format!("{}: {why}", rfc3339(at)), limits.1);
                    continue;
                }
            };
            for edit in edits {
                changes.push(Change {
                    line: format!(
                        "{}: {}{} → {} (CronFederatedHPA {namespace}/{} rule {} at {})",
                        edit.target,
                        edit.field,
                        edit.from.map(|from| format!(" {from}")).unwrap_or_default(),
                        edit.value,
                        cron.name,
                        rule.name,
                        rfc3339(at)
                    ),
                    edit,
                    source: Source::Cron { id: id.clone(), rule: rule.name.clone(), limits },
                });
            }
        }
    }
    changes
}

/// What a due rule run sets, or why it cannot run (its target is not declared).
fn rule_edits(
    plan: &Plan,
    namespace: &str,
    rule: &flotilla_core::model::autoscale::CronRule,
    r: &flotilla_core::model::autoscale::ScaleTargetRef,
) -> Result<Vec<Edit>, String> {
    let mut edits = Vec::new();
    if r.kind == "FederatedHPA" {
        let target = Target::FederatedHpa { namespace: namespace.to_owned(), name: r.name.clone() };
        if let Some(min) = rule.target_min_replicas {
            edits.push(Edit { target: target.clone(), field: "minReplicas", value: i64::from(min), from: None });
        }
        if let Some(max) = rule.target_max_replicas {
            edits.push(Edit { target, field: "maxReplicas", value: i64::from(max), from: None });
        }
        let declared =
            plan.loaded.federated_hpas.iter().any(|h| h.namespace.as_deref() == Some(namespace) && h.name == r.name);
        if !declared {
            return Err(format!("FederatedHPA {namespace}/{} does not exist", r.name));
        }
    } else if let Some(replicas) = rule.target_replicas {
        let key = r.key(namespace);
        if plan.loaded.template(&key).is_none() {
            return Err(format!("{key} does not exist"));
        }
        // A cron rule sets a value whatever the count was.
        edits.push(Edit::replicas(key, i64::from(replicas), None));
    }
    Ok(edits)
}

/// The fields one cron rule run set, and the rule's history limits.
struct RuleRun {
    limits: (usize, usize),
    sets: Vec<String>,
}

/// One sync: evaluate, then write what changed. Returns whether anything was written.
pub async fn sync(
    sync: Round<'_>,
    state: &mut State,
    write: impl AsyncFnOnce(Vec<Edit>, String) -> Result<bool, String>,
) -> Result<bool, String> {
    let changes = evaluate(&sync, state).await;
    if changes.is_empty() || sync.settings.writeback == Writeback::Off {
        return Ok(false);
    }
    let subject = if changes.len() == 1 {
        format!("autoscale: {}", changes[0].line)
    } else {
        format!("autoscale: {} changes", changes.len())
    };
    let body: Vec<String> = changes.iter().map(|c| format!("- {}", c.line)).collect();
    let message = format!("{subject}\n\n{}\n", body.join("\n"));
    let edits = changes.iter().map(|c| c.edit.clone()).collect();
    let outcome = write(edits, message).await;
    let now = sync.now;
    // One history entry per cron rule run, however many fields it set.
    let mut runs: BTreeMap<(&str, &str), RuleRun> = BTreeMap::new();
    for change in &changes {
        match &change.source {
            Source::Cron { id, rule, limits } => {
                let set = format!("{} {} = {}", change_target(&change.edit), change.edit.field, change.edit.value);
                runs.entry((id, rule)).or_insert_with(|| RuleRun { limits: *limits, sets: Vec::new() }).sets.push(set);
            }
            Source::Hpa { id, spec, decision } => {
                if outcome == Ok(true) {
                    let history = state.histories.entry(id.clone()).or_default();
                    autoscale::written(spec, decision, history, &sync.settings.timing, now);
                    if let Some(status) = state.status.get_mut(id) {
                        status.last_scale_time = Some(rfc3339(now));
                    }
                }
            }
        }
    }
    for ((id, rule), RuleRun { limits: (successful, failed), sets }) in runs {
        let entry = state.status.entry(id.to_owned()).or_default().rules.entry(rule.to_owned()).or_default();
        match &outcome {
            Ok(_) => remember(&mut entry.successful, format!("{}: {}", rfc3339(now), sets.join(", ")), successful),
            Err(e) => remember(&mut entry.failed, format!("{}: {e}", rfc3339(now)), failed),
        }
    }
    outcome
}

/// Puts `record` first in a rule's history and keeps at most `limit` entries.
fn remember(history: &mut Vec<String>, record: String, limit: usize) {
    history.insert(0, record);
    history.truncate(limit);
}

fn change_target(target: &Edit) -> String {
    match &target.target {
        Target::Template(key) => key.to_string(),
        Target::FederatedHpa { namespace, name } => format!("FederatedHPA {namespace}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPO: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
---
# business hours: wider bounds
apiVersion: autoscaling.karmada.io/v1alpha1
kind: FederatedHPA
metadata: {name: web, namespace: shop}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 1   # night floor
  maxReplicas: 4
---
apiVersion: autoscaling.karmada.io/v1alpha1
kind: CronFederatedHPA
metadata: {name: web-bounds, namespace: shop}
spec:
  scaleTargetRef: {apiVersion: autoscaling.karmada.io/v1alpha1, kind: FederatedHPA, name: web}
  rules:
  - {name: morning, schedule: \"0 9 * * *\", timeZone: Europe/Paris, targetMinReplicas: 3, targetMaxReplicas: 12}
  - {name: paused, schedule: \"* * * * *\", suspend: true, targetMinReplicas: 7}
";

    fn unix(text: &str) -> i64 {
        text.parse::<k8s_openapi::jiff::Timestamp>().unwrap().as_second()
    }

    /// A CronFederatedHPA rule on a FederatedHPA's bounds fires once at 09:00 Paris
    /// time, edits `minReplicas` and `maxReplicas` in place (the comment stays), and
    /// records the run; the suspended rule never fires.
    fn plan_of(repo: &str) -> Plan {
        let files = flotilla_core::model::RepoFiles {
            files: [("web.yaml".to_owned(), repo.as_bytes().to_vec())].into(),
            ..Default::default()
        };
        flotilla_core::plan(&files, &Default::default(), &Default::default()).unwrap()
    }

    /// Syncs `plan` at each time (no members); what each sync wrote, by time.
    async fn sync_at<'t>(plan: &Plan, state: &mut State, times: &[&'t str]) -> Vec<(&'t str, Vec<Edit>, String)> {
        let settings = Settings {
            interval: Duration::from_secs(15),
            writeback: Writeback::Git,
            author: ("bot".into(), "bot@example.invalid".into()),
            timing: Timing::default(),
        };
        let kubeconfig = kube::config::Kubeconfig::default();
        let written = std::sync::Mutex::new(Vec::new());
        for &now in times {
            let sync = Round {
                settings: &settings,
                plan,
                members: observe::Clients {
                    pool: &Default::default(),
                    kubeconfig: &kubeconfig,
                    trust: Default::default(),
                    timeout: Duration::from_secs(1),
                },
                overrides: &BTreeMap::new(),
                now: unix(now),
            };
            let outcome = super::sync(sync, state, async |edits, message| {
                written.lock().unwrap().push((now, edits, message));
                Ok(true)
            })
            .await;
            assert!(outcome.is_ok(), "{outcome:?}");
        }
        written.into_inner().unwrap()
    }

    #[tokio::test]
    async fn a_cron_rule_moves_a_federated_hpas_bounds_at_its_time() {
        let plan = plan_of(REPO);
        let mut state = State::default();
        let times = ["2026-12-01T07:58:00Z", "2026-12-01T07:59:30Z", "2026-12-01T08:00:10Z", "2026-12-01T08:01:00Z"];
        let written = sync_at(&plan, &mut state, &times).await;
        assert_eq!(written.len(), 1, "{written:?}");
        let (at, edits, message) = &written[0];
        assert_eq!(*at, "2026-12-01T08:00:10Z", "09:00 in Paris is 08:00 UTC in winter");
        let fhpa = Target::FederatedHpa { namespace: "shop".into(), name: "web".into() };
        assert_eq!(
            edits,
            &[
                Edit { target: fhpa.clone(), field: "minReplicas", value: 3, from: None },
                Edit { target: fhpa, field: "maxReplicas", value: 12, from: None }
            ]
        );
        assert!(message.starts_with("autoscale: 2 changes\n"), "{message}");
        let rules = &state.status["autoscaling.karmada.io/v1alpha1/CronFederatedHPA/shop/web-bounds"].rules;
        assert_eq!(rules["morning"].successful.len(), 1);
        assert_eq!(rules["morning"].next_execution_time.as_deref(), Some("2026-12-02T08:00:00Z"));
        assert!(rules["paused"].successful.is_empty() && rules["paused"].next_execution_time.is_none());

        // The edit itself, on the file: only the two integers change.
        let mut text = REPO.to_owned();
        for edit in edits {
            text = flotilla_core::yaml_edit::set_int(&text, 2, &["spec", edit.field], edit.value).unwrap();
        }
        assert_eq!(
            text,
            REPO.replace("minReplicas: 1   #", "minReplicas: 3   #").replace("maxReplicas: 4\n", "maxReplicas: 12\n")
        );
    }

    /// A rule that fails every minute keeps only `failedHistoryLimit` failures, and
    /// what was kept for an autoscaler goes when the repository drops it.
    #[tokio::test]
    async fn rule_histories_are_bounded_and_removed_autoscalers_are_forgotten() {
        let failing = "\
apiVersion: autoscaling.karmada.io/v1alpha1
kind: CronFederatedHPA
metadata: {name: gone, namespace: shop}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: missing}
  rules:
  - {name: every-minute, schedule: \"* * * * *\", targetReplicas: 2, failedHistoryLimit: 2}
";
        let mut state = State::default();
        let times = ["2026-12-01T08:00:00Z", "2026-12-01T08:01:00Z", "2026-12-01T08:02:00Z", "2026-12-01T08:03:00Z"];
        assert!(sync_at(&plan_of(failing), &mut state, &times).await.is_empty());
        let failed =
            &state.status["autoscaling.karmada.io/v1alpha1/CronFederatedHPA/shop/gone"].rules["every-minute"].failed;
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert!(failed[0].starts_with("2026-12-01T08:03:00Z: apps/v1 Deployment shop/missing"), "{failed:?}");

        sync_at(&plan_of(REPO), &mut state, &["2026-12-01T08:04:00Z"]).await;
        assert_eq!(
            state.status.keys().collect::<Vec<_>>(),
            [
                "autoscaling.karmada.io/v1alpha1/CronFederatedHPA/shop/web-bounds",
                "autoscaling.karmada.io/v1alpha1/FederatedHPA/shop/web"
            ]
        );
        assert!(
            state
                .cron_checked
                .keys()
                .all(|rule| rule.starts_with("autoscaling.karmada.io/v1alpha1/CronFederatedHPA/shop/web-bounds/"))
        );
    }
}
