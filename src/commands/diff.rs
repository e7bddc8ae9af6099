//! `flotilla diff`: what changes in every cluster between two revisions, offline.

use std::io::Write;

use anyhow::Context;
use flotilla_core::plan_diff::{self, PlanDiff, markdown};

use super::Outcome;
use crate::cli::{DiffArgs, DiffFormat, SourceArgs};

pub fn diff(args: DiffArgs) -> anyhow::Result<Outcome> {
    let source = SourceArgs { repo: args.repo.clone(), rev: None, cluster_state: None, scope: args.scope.clone() };
    let scope = super::scope(&source)?;
    let mut cache = flotilla_core::load::ParseCache::default();
    let mut render = |rev: &str| {
        super::plan_revision(&args.repo, rev, scope.as_ref(), &mut cache).with_context(|| format!("revision {rev}"))
    };
    let from = render(&args.from)?;
    let to = render(&args.to)?;
    let diff = plan_diff::diff(&from, &to, &args.clusters);
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
                None => format!("`flotilla diff --from {} --to {} -o json`", args.from, args.to),
            };
            let comment = markdown::Comment { full_plan: &full_plan, ..Default::default() };
            stdout.write_all(markdown::markdown(&diff, &comment).as_bytes())?;
        }
    }
    Ok(if args.exit_code && !diff.is_empty() { Outcome::Problems } else { Outcome::Clean })
}

/// Per cluster: `+` added, `~` changed (then one line per field), `-` removed.
fn text(diff: &PlanDiff) -> String {
    let mut out = String::new();
    let show = |v: &Option<serde_json::Value>| v.as_ref().map_or("(absent)".to_owned(), |v| v.to_string());
    let object = |e: &plan_diff::Entry| {
        let at = if e.namespace.is_empty() { e.name.clone() } else { format!("{}/{}", e.namespace, e.name) };
        let replicas = e.replicas.map(|r| format!(" (replicas {r})")).unwrap_or_default();
        format!("{} {} {at}{replicas}", e.api_version, e.kind)
    };
    for (cluster, changes) in &diff.clusters {
        out += &format!("{cluster}\n");
        for e in &changes.added {
            out += &format!("  + {}\n", object(e));
            for rule in &e.overrides {
                out += &format!("      override {rule}\n");
            }
        }
        for c in &changes.changed {
            out += &format!("  ~ {}\n", object(&c.object));
            for f in &c.fields {
                out += &format!("      {}: {} → {}\n", f.path, show(&f.from), show(&f.to));
            }
            for rule in &c.overrides_added {
                out += &format!("      override now applies: {rule}\n");
            }
            for rule in &c.overrides_removed {
                out += &format!("      override no longer applies: {rule}\n");
            }
        }
        for e in &changes.removed {
            out += &format!("  - {}\n", object(e));
        }
    }
    for p in &diff.problems {
        let at = p.cluster.as_deref().map(|c| format!(" in cluster {c}")).unwrap_or_default();
        out += &format!("new problem: {}{at} ({}:{}): {}\n", p.object, p.origin.file, p.origin.line, p.message);
    }
    if diff.is_empty() {
        out += &format!("no changes between {} and {}\n", diff.from, diff.to);
    }
    out
}
