//! `flotilla render` and `flotilla validate`: the pure pipeline, offline.

use std::io::Write;

use anyhow::Context;
use tracing::info;

use super::{Outcome, plan, report};
use flotilla_core::model::Plan;

use crate::cli::{Format, RenderArgs, SourceArgs};
use crate::output;

pub fn render(args: RenderArgs) -> anyhow::Result<Outcome> {
    let (mut plan, from) = match args.wave {
        Some(_) => {
            let (from, to) = rollout_renders(&args)?;
            (to, Some(from))
        }
        None => (plan(&args.source)?, None),
    };
    if args.templates {
        let mut stdout = output::stdout();
        output::write_templates(&plan.loaded.templates, args.format, &mut stdout)?;
        stdout.flush()?;
        return Ok(report(&plan));
    }
    super::require_declared(args.clusters.iter().chain(&args.simulate_failure), &[&plan])?;
    if !args.simulate_failure.is_empty() {
        plan = simulate(&args, plan)?;
    }
    let mut view = plan.view(&args.clusters);
    if let (Some(moved), Some(from)) = (args.wave, &from) {
        view = view.holding(flotilla_core::rollout::held_after(from, &plan, moved));
    }
    let mut stdout = output::stdout();
    match (&args.out_dir, args.format) {
        (Some(dir), _) => output::write_dir(&plan, &view, dir)?,
        (None, Format::Json) => {
            serde_json::to_writer(&mut stdout, &view).context("cannot write the plan")?;
            writeln!(stdout)?;
        }
        (None, Format::Yaml) => output::write_yaml(&view, &mut stdout)?,
    }
    stdout.flush()?;
    Ok(report(&plan))
}

/// The renders `--wave` composes: `--from` (only what rollouts govern: nothing else of
/// it is shown) and the revision asked for, through one parse cache.
fn rollout_renders(args: &RenderArgs) -> anyhow::Result<(Plan, Plan)> {
    let source = &args.source;
    let (scope, admission) = (super::scope(source)?, source.admission());
    let state = source.cluster_state.as_deref().map(super::read_state).transpose()?.unwrap_or_default();
    let from = args.from.clone().unwrap_or_else(|| source.rev.as_ref().map_or("HEAD".into(), |r| format!("{r}^")));
    let mut cache = flotilla_core::load::ParseCache::default();
    let to = match &source.rev {
        Some(rev) => super::plan_revision(&source.repo, rev, (scope.as_ref(), admission), &mut cache, &state)?,
        None => super::plan_in_state(source, scope.as_ref(), |_| Ok(state.clone()))?,
    };
    let limits = flotilla_core::model::Limits::default();
    let files =
        crate::git::read_cached(&source.repo, &from, &limits, &cache).with_context(|| format!("--from {from}"))?;
    let loaded = crate::source::load(&files, &mut cache, &limits).with_context(|| format!("--from {from}"))?;
    admission.check(&loaded).with_context(|| format!("--from {from}"))?;
    let loaded = flotilla_core::rollout::governed_only(loaded, &to.loaded);
    let older = flotilla_core::plan_loaded(loaded, files.revision, &state);
    let older = match &scope {
        Some(project) => flotilla_core::project::restrict(older, project),
        None => older,
    };
    Ok((older, to))
}

/// The render after `--simulate-failure`'s members fail, with what moved on stderr.
fn simulate(args: &RenderArgs, before: flotilla_core::model::Plan) -> anyhow::Result<flotilla_core::model::Plan> {
    let failed = &args.simulate_failure;
    let simulated = flotilla_core::failover::simulate(&before, failed);
    let scope = super::scope(&args.source)?;
    let after = super::plan_in_state(&args.source, scope.as_ref(), |mut state| {
        state.previous = simulated.previous;
        state.taints.extend(simulated.taints);
        state.evictions.extend(simulated.evictions);
        Ok(state)
    })?;
    let moved = flotilla_core::failover::moves(&before, &after);
    eprintln!("simulated failure of {}: {} workload(s) move", failed.join(", "), moved.len());
    for m in &moved {
        eprintln!("  {m}");
    }
    Ok(after)
}

pub fn validate(args: SourceArgs) -> anyhow::Result<Outcome> {
    let plan = plan(&args)?;
    let l = &plan.loaded;
    info!(
        revision = %plan.revision,
        templates = l.templates.len(),
        propagation_policies = l.propagation_policies.len(),
        override_policies = l.override_policies.len(),
        clusters = l.clusters.len(),
        "repository is valid"
    );
    Ok(report(&plan))
}
