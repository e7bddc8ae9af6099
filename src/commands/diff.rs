//! `flotilla diff`: what changes in every cluster between two revisions, offline; or,
//! with `--live`, between the members as they are and applying a revision.

use std::io::Write;

use anyhow::Context;
use flotilla_core::escape::visible;
use flotilla_core::plan_diff::{self, PlanDiff, markdown};

use flotilla_core::model::{ClusterState, Plan};
use flotilla_core::project::Project;

use super::Outcome;
use crate::cli::{DiffArgs, DiffFormat, SourceArgs};
use crate::clusters;

pub fn diff(args: DiffArgs) -> anyhow::Result<Outcome> {
    let source = SourceArgs {
        repo: args.repo.clone(),
        rev: None,
        cluster_state: None,
        scope: args.scope.clone(),
        allow_no_execute_taint_policy: args.allow_no_execute_taint_policy,
    };
    let admission = source.admission();
    let scope = super::scope(&source)?;
    let mut cache = flotilla_core::load::ParseCache::default();
    let mut render = |rev: &str, state: &ClusterState| {
        super::plan_revision(&args.repo, rev, (scope.as_ref(), admission), &mut cache, state)
            .with_context(|| format!("revision {rev}"))
    };
    let normal = ClusterState::default();
    let to_plan;
    let diff = match &args.from {
        Some(from) => {
            let from = render(from, &normal)?;
            to_plan = render(&args.to, &normal)?;
            super::require_declared(args.clusters.iter().chain(&args.simulate_failure), &[&from, &to_plan])?;
            if args.simulate_failure.is_empty() {
                plan_diff::diff(&from, &to_plan, &args.clusters)
            } else {
                // `--to` as it would run with those members failed: the diff shows
                // what the revision changes and what the failure moves.
                let failed = flotilla_core::failover::simulate(&to_plan, &args.simulate_failure);
                plan_diff::diff(&from, &render(&args.to, &failed)?, &args.clusters)
            }
        }
        None => {
            to_plan = render(&args.to, &normal)?;
            super::require_declared(args.clusters.iter().chain(&args.simulate_failure), &[&to_plan])?;
            live(&args, &to_plan, scope.as_ref())?
        }
    };
    super::warn_not_acted_on(&to_plan);
    if let Some(file) = &args.plan_file {
        let json = serde_json::to_vec_pretty(&diff).context("cannot write the diff")?;
        std::fs::write(file, json).with_context(|| format!("cannot write {}", file.display()))?;
    }
    let mut stdout = std::io::stdout().lock();
    match args.format {
        DiffFormat::Json => {
            serde_json::to_writer(&mut stdout, &diff).context("cannot write the diff")?;
            writeln!(stdout)?;
        }
        DiffFormat::Text => stdout.write_all(text(&diff).as_bytes())?,
        DiffFormat::Markdown => {
            let full_plan = match &args.plan_file {
                Some(file) => format!("`{}`", file.display()),
                None => format!("`flotilla diff {} --to {} -o json`", diff.from, args.to),
            };
            let comment = markdown::Comment { full_plan: &full_plan, ..Default::default() };
            stdout.write_all(markdown::markdown(&diff, &comment).as_bytes())?;
        }
    }
    Ok(if args.exit_code && !diff.is_empty() { Outcome::Problems } else { Outcome::Clean })
}

/// What applying `plan` would change in its Push members (or `--cluster` ones) now.
/// Members that cannot be observed are errors, after the plan of the others is printed.
fn live(args: &DiffArgs, plan: &Plan, scope: Option<&Project>) -> anyhow::Result<PlanDiff> {
    let kubeconfig = args.kubeconfig.as_deref().expect("clap requires --kubeconfig with --live");
    let kubeconfig = clusters::connect::read(kubeconfig)?;
    let names = if args.clusters.is_empty() { clusters::by_sync_mode(plan).0 } else { args.clusters.clone() };
    let pool = clusters::connect::Pool::default();
    let source = crate::git::local_source(&args.repo, Some(&args.to));
    let reconcile = &args.reconcile;
    let options = clusters::Options {
        progress: false,
        pool: &pool,
        instance: &reconcile.instance,
        trust: reconcile.trust.trust(),
        budget: Default::default(),
        concurrency: reconcile.concurrency,
        request_timeout: reconcile.request_timeout,
        cluster_timeout: reconcile.cluster_timeout,
        retry: true,
        fence: &Default::default(),
        source: &source,
        // Read-only: the plan reads the instance's inventory whichever source recorded
        // it (the comparison matters to writes, and `apply` makes it).
        adopt: true,
        scope,
        acting_as: reconcile.service_account.as_deref(),
    };
    let observed = super::runtime()?.block_on(clusters::observe_all(plan, &kubeconfig, &names, options));
    let mut diff = PlanDiff {
        from: "live".into(),
        to: plan.revision.clone(),
        problems: plan.problems.clone(),
        ..Default::default()
    };
    let mut unreachable = Vec::new();
    for (cluster, outcome) in observed {
        match outcome {
            Ok(found) => {
                if let Some(refused) = &found.prune_refused {
                    eprintln!("warning: {}: {}", visible(&cluster), visible(refused));
                }
                let changes = plan_diff::live::cluster(&found.observed, &found.removed);
                if changes != plan_diff::ClusterDiff::default() {
                    diff.clusters.insert(cluster, changes);
                }
            }
            Err(e) => unreachable.push(format!("{cluster}: {e}")),
        }
    }
    anyhow::ensure!(unreachable.is_empty(), "cannot observe {}", unreachable.join("; "));
    Ok(diff)
}

/// Per cluster: `+` added, `~` changed (then one line per field), `-` removed. Names,
/// paths, rules and messages come from the repository or a member: their hidden
/// characters are written out, so none can forge a line or drive the terminal.
fn text(diff: &PlanDiff) -> String {
    let mut out = String::new();
    let show = |v: &Option<serde_json::Value>| v.as_ref().map_or("(absent)".to_owned(), |v| v.to_string());
    let object = |e: &plan_diff::Entry| {
        let at = if e.namespace.is_empty() { e.name.clone() } else { format!("{}/{}", e.namespace, e.name) };
        let replicas = e.replicas.map(|r| format!(" (replicas {r})")).unwrap_or_default();
        visible(&format!("{} {} {at}{replicas}", e.api_version, e.kind)).into_owned()
    };
    for (cluster, changes) in &diff.clusters {
        let cluster = visible(cluster);
        out += &format!("{cluster}\n");
        for e in &changes.added {
            out += &format!("  + {}\n", object(e));
            for rule in &e.overrides {
                out += &format!("      override {}\n", visible(rule));
            }
        }
        for c in &changes.changed {
            out += &format!("  ~ {}\n", object(&c.object));
            for f in &c.fields {
                out += &format!("      {}: {} → {}\n", visible(&f.path), show(&f.from), show(&f.to));
            }
            for rule in &c.overrides_added {
                out += &format!("      override now applies: {}\n", visible(rule));
            }
            for rule in &c.overrides_removed {
                out += &format!("      override no longer applies: {}\n", visible(rule));
            }
        }
        for e in &changes.removed {
            out += &format!("  - {}\n", object(e));
        }
        for f in &changes.failed {
            out += &format!("  ! {}: {}\n", object(&f.object), visible(&f.reason));
        }
    }
    for r in &diff.rollouts {
        out +=
            &format!("{} (soak {}, on failure {})\n", visible(&r.policy), visible(&r.min_success_time), r.on_failure);
        for (n, batch) in r.batches.iter().enumerate() {
            let wave = visible(&batch.wave);
            out += &format!("  wave {} {wave}: {}\n", n + 1, visible(&batch.clusters.join(", ")));
        }
    }
    for p in &diff.problems {
        let at = p.cluster.as_deref().map(|c| format!(" in cluster {c}")).unwrap_or_default();
        let line = format!("new problem: {}{at} ({}:{}): {}", p.object, p.origin.file, p.origin.line, p.message);
        out += &format!("{}\n", visible(&line));
    }
    if diff.is_empty() {
        out += &format!("no changes between {} and {}\n", diff.from, diff.to);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_characters_in_names_reach_the_terminal_written_out() {
        let entry = |name: &str| plan_diff::Entry {
            api_version: "rbac.authorization.k8s.io/v1".into(),
            kind: "ClusterRoleBinding".into(),
            namespace: String::new(),
            name: name.into(),
            replicas: None,
            overrides: Vec::new(),
        };
        let mut diff = PlanDiff { from: "a".into(), to: "b".into(), ..Default::default() };
        // Erase the line, move up, and print a harmless one in its place; an OSC-8 link.
        let hostile = "admin\u{1b}[2K\u{1b}[1A\r  ~ v1 ConfigMap default/harmless\n\u{1b}]8;;http://evil\u{7}x";
        let cluster = plan_diff::ClusterDiff { added: vec![entry(hostile)], ..Default::default() };
        diff.clusters.insert("member1".into(), cluster);
        let out = text(&diff);
        assert!(!out.contains('\u{1b}') && !out.contains('\r') && !out.contains('\u{7}'), "{out:?}");
        assert_eq!(out.lines().count(), 2, "the cluster and one object: {out:?}");
        assert!(out.contains("ClusterRoleBinding admin\\u{1b}[2K"), "{out:?}");
    }
}
