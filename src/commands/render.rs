//! `flotilla render` and `flotilla validate`: the pure pipeline, offline.

use std::io::Write;

use anyhow::{Context, bail};
use tracing::info;

use super::{Outcome, plan, report};
use crate::cli::{Format, RenderArgs, SourceArgs};
use crate::output;

pub fn render(args: RenderArgs) -> anyhow::Result<Outcome> {
    let plan = plan(&args.source)?;
    if let Some(unknown) = args.clusters.iter().find(|c| !plan.clusters.contains_key(*c)) {
        bail!("cluster {unknown} is not declared in the repository (no cluster.karmada.io/v1alpha1 Cluster named so)");
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
