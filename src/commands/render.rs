//! `flotilla render` and `flotilla validate`: the pure pipeline, offline.

use std::io::Write;

use anyhow::Context;
use tracing::info;

use super::{Outcome, plan, report};
use crate::cli::{Format, RenderArgs, SourceArgs};
use crate::output;

pub fn render(args: RenderArgs) -> anyhow::Result<Outcome> {
    let mut plan = plan(&args.source)?;
    super::require_declared(args.clusters.iter().chain(&args.simulate_failure), &[&plan])?;
    if !args.simulate_failure.is_empty() {
        plan = simulate(&args, plan)?;
    }
    let view = plan.view(&args.clusters);
    match (&args.out_dir, args.format) {
        (Some(dir), _) => output::write_dir(&plan, &view, dir)?,
        (None, Format::Json) => {
            let mut stdout = std::io::stdout().lock();
            serde_json::to_writer(&mut stdout, &view).context("cannot write the plan")?;
            writeln!(stdout)?;
        }
        (None, Format::Yaml) => output::write_yaml(&plan, &view, &mut std::io::stdout().lock())?,
    }
    Ok(report(&plan))
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
