//! A plan as a pull-request comment: a hidden marker (so the one comment is found and
//! updated on every push), a summary table of every cluster, the new problems, then one
//! collapsible diff per cluster, within a character budget below the forges' limits.
//! What does not fit is named and summarised, never cut mid-line.
//!
//! Every piece of repository text (names, paths, values, messages) is escaped for the
//! place it lands ([`crate::escape`]): a name cannot end a table row, forge a line, hide
//! the rest of the comment, link, embed an image or mention anyone.

use std::fmt::Write;

use serde_json::Value;

use super::{Changed, ClusterDiff, Entry, PlanDiff};
use crate::escape::{self, Place, code, visible};

/// The hidden first line by which flotilla recognises its own comment.
pub const MARKER: &str = "<!-- flotilla:plan -->";

/// GitHub refuses comments over 65,536 characters (Gitea and GitLab allow more); the
/// default leaves room for a forge's own escaping.
pub const BUDGET: usize = 60_000;

/// Table rows and problems shown before the rest is counted instead.
const MAX_ROWS: usize = 200;
const MAX_PROBLEMS: usize = 50;
/// Replica changes named in one table cell.
const MAX_MOVES: usize = 3;

/// How to write the comment.
#[derive(Debug, Clone)]
pub struct Comment<'a> {
    /// Characters the whole comment may take.
    pub budget: usize,
    /// Where the full plan is, named when something had to be left out.
    pub full_plan: &'a str,
    /// Markdown paragraphs shown after the summary (the preview's state, for example).
    pub notes: &'a [String],
}

impl Default for Comment<'_> {
    fn default() -> Self {
        Comment { budget: BUDGET, full_plan: "`flotilla diff` between the two revisions", notes: &[] }
    }
}

/// The comment for `diff`, at most `options.budget` characters long (the budget must
/// leave room for the summary; a budget under 1,000 characters is raised to that).
pub fn markdown(diff: &PlanDiff, options: &Comment) -> String {
    let budget = options.budget.max(1_000);
    let (from, to) = (code(short(&diff.from), Place::Flow), code(short(&diff.to), Place::Flow));
    let mut out = format!("{MARKER}\n### flotilla plan {from} → {to}\n\n");
    if diff.is_empty() {
        out += "No changes in any cluster.\n";
    } else {
        out += &summary(diff);
    }
    out += &waves(diff);
    for note in options.notes {
        out += &format!("\n{note}\n");
    }
    out += &problems(diff);
    let mut left_out = Vec::new();
    for (name, cluster) in &diff.clusters {
        let section = details(name, cluster);
        // Keep room for the closing line naming what was left out (at most 20 names
        // of 63 characters, and where the full plan is).
        if left_out.is_empty() && out.len() + section.len() + 1_600 + options.full_plan.len() <= budget {
            out += &section;
        } else {
            left_out.push(name.as_str());
        }
    }
    if !left_out.is_empty() {
        let mut names = left_out.iter().take(20).map(|n| code(n, Place::Flow)).collect::<Vec<_>>().join(", ");
        if left_out.len() > 20 {
            names += &format!(" and {} more", left_out.len() - 20);
        }
        let line = format!("\nThe diffs of {names} do not fit in a comment; see {}.\n", options.full_plan);
        out += &line;
    }
    truncate(out, budget)
}

/// The abbreviated revision.
fn short(revision: &str) -> &str {
    revision.get(..12).unwrap_or(revision)
}

/// The comment for a head that does not render: the error in a code block, cut to fit
/// `budget` (the error may quote a name of any length), never a plan.
pub fn broken(head: &str, error: &str, budget: usize) -> String {
    const CUT: &str = "\n… (the error is longer than a comment allows)";
    let budget = budget.max(1_000);
    let head = code(short(head), Place::Flow);
    let intro = format!(
        "{MARKER}\n### flotilla plan: {head} does not render\n\nNothing is planned or applied for this head:\n\n"
    );
    let mut error = visible(error).into_owned();
    // The fence can be as long as the error's longest run of backticks, twice.
    let room = budget.saturating_sub(intro.len() + 2 * 6 + CUT.len() + 4) / 3;
    if error.len() > room {
        let mut end = room;
        while !error.is_char_boundary(end) {
            end -= 1;
        }
        error.truncate(end);
        error += CUT;
    }
    let fence = fence(&error);
    format!("{intro}{fence}\n{error}\n{fence}\n")
}

fn summary(diff: &PlanDiff) -> String {
    let count = |f: fn(&ClusterDiff) -> usize| diff.clusters.values().map(f).sum::<usize>();
    let (added, changed, removed) = (count(|c| c.added.len()), count(|c| c.changed.len()), count(|c| c.removed.len()));
    let mut out = format!(
        "{} cluster{} change: {added} added, {changed} changed, {removed} removed.\n\n",
        diff.clusters.len(),
        if diff.clusters.len() == 1 { "" } else { "s" }
    );
    if diff.clusters.is_empty() {
        return out;
    }
    out += "| Cluster | Added | Changed | Removed | Placement and replicas |\n|:--|--:|--:|--:|:--|\n";
    for (name, c) in diff.clusters.iter().take(MAX_ROWS) {
        let name = code(name, Place::Cell);
        let _ =
            writeln!(out, "| {name} | {} | {} | {} | {} |", c.added.len(), c.changed.len(), c.removed.len(), moves(c));
    }
    if diff.clusters.len() > MAX_ROWS {
        let _ = writeln!(out, "| … {} more clusters | | | | |", diff.clusters.len() - MAX_ROWS);
    }
    out
}

/// The placement and replica changes of one cluster, for a table cell: workloads that
/// arrive or leave with their replicas, and replica counts that change.
fn moves(cluster: &ClusterDiff) -> String {
    let arrive = cluster.added.iter().filter_map(|e| Some(format!("{} new ({})", object(e), e.replicas?)));
    let leave = cluster.removed.iter().filter_map(|e| Some(format!("{} gone (was {})", object(e), e.replicas?)));
    let scaled = cluster.changed.iter().filter_map(|c| {
        let field = c.fields.iter().find(|f| f.path == "spec.replicas")?;
        Some(format!("{} {} → {}", object(&c.object), count(&field.from), count(&field.to)))
    });
    let all: Vec<String> = arrive.chain(leave).chain(scaled).collect();
    let mut cell = all.iter().take(MAX_MOVES).cloned().collect::<Vec<_>>().join("<br>");
    if all.len() > MAX_MOVES {
        cell += &format!("<br>… {} more", all.len() - MAX_MOVES);
    }
    cell
}

/// `Kind ns/name`.
fn spelled(e: &Entry) -> String {
    let at = if e.namespace.is_empty() { e.name.clone() } else { format!("{}/{}", e.namespace, e.name) };
    format!("{} {at}", e.kind)
}

/// [`spelled`] as code in a table cell: whatever the name holds, the cell never breaks.
fn object(e: &Entry) -> String {
    code(&spelled(e), Place::Cell)
}

/// A replica count for a table cell: a number as it is, anything else (a repository
/// may write a string) as code.
fn count(value: &Option<Value>) -> String {
    match value {
        None => "(absent)".to_owned(),
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => code(&other.to_string(), Place::Cell),
    }
}

/// The waves the changes move in, per RolloutPolicy.
fn waves(diff: &PlanDiff) -> String {
    if diff.rollouts.is_empty() {
        return String::new();
    }
    let list = |items: &[String]| items.iter().map(|i| code(i, Place::Flow)).collect::<Vec<_>>().join(", ");
    let mut out = String::from("\n**Rollout waves**\n\n");
    for r in &diff.rollouts {
        let (soak, gates) = (code(&r.min_success_time, Place::Flow), list(&r.gates));
        let _ = write!(out, "- {}: soak {soak}", code(&r.policy, Place::Flow));
        if !r.gates.is_empty() {
            let _ = write!(out, ", gates {gates}");
        }
        if !r.windows.is_empty() {
            let _ = write!(out, ", windows {}", list(&r.windows));
        }
        let _ = writeln!(out, ", on failure {}", r.on_failure);
        for (n, batch) in r.batches.iter().enumerate() {
            let of = r.batches.iter().filter(|b| b.wave == batch.wave).count();
            let part = if of > 1 { format!(" (batch {} of {of})", batch.index + 1) } else { String::new() };
            let _ = writeln!(out, "  {}. {}{part}: {}", n + 1, code(&batch.wave, Place::Flow), list(&batch.clusters));
        }
    }
    out
}

fn problems(diff: &PlanDiff) -> String {
    if diff.problems.is_empty() {
        return String::new();
    }
    let mut out = format!("\n**New problems ({})**\n\n", diff.problems.len());
    for p in diff.problems.iter().take(MAX_PROBLEMS) {
        let at = p.cluster.as_deref().map(|c| format!(" in {}", code(c, Place::Flow))).unwrap_or_default();
        let (object, origin) =
            (code(&p.object.to_string(), Place::Flow), format!("{}:{}", p.origin.file, p.origin.line));
        let _ = writeln!(out, "- {object}{at} ({}): {}", code(&origin, Place::Flow), escape::text(&p.message));
    }
    if diff.problems.len() > MAX_PROBLEMS {
        let _ = writeln!(out, "- … {} more", diff.problems.len() - MAX_PROBLEMS);
    }
    out
}

/// One cluster's diff, collapsed.
fn details(name: &str, cluster: &ClusterDiff) -> String {
    let mut body = String::new();
    for e in &cluster.added {
        let _ = writeln!(body, "+ {}{}", full(e), e.replicas.map(|r| format!(" (replicas {r})")).unwrap_or_default());
        for rule in &e.overrides {
            let _ = writeln!(body, "+     override: {}", visible(rule));
        }
    }
    for c in &cluster.changed {
        body += &change(c);
    }
    for e in &cluster.removed {
        let _ = writeln!(body, "- {}", full(e));
    }
    let counts =
        [("added", cluster.added.len()), ("changed", cluster.changed.len()), ("removed", cluster.removed.len())];
    let label = counts.iter().filter(|(_, n)| *n > 0).map(|(w, n)| format!("{n} {w}")).collect::<Vec<_>>().join(", ");
    let fence = fence(&body);
    let name = escape::html(name);
    format!("\n<details><summary><b>{name}</b>: {label}</summary>\n\n{fence}diff\n{body}{fence}\n\n</details>\n")
}

fn change(c: &Changed) -> String {
    let mut out = format!("~ {}\n", full(&c.object));
    for f in &c.fields {
        let path = visible(&f.path);
        if let Some(from) = &f.from {
            out += &format!("-     {path}: {from}\n");
        }
        if let Some(to) = &f.to {
            out += &format!("+     {path}: {to}\n");
        }
    }
    for rule in &c.overrides_added {
        out += &format!("+     override: {}\n", visible(rule));
    }
    for rule in &c.overrides_removed {
        out += &format!("-     override: {}\n", visible(rule));
    }
    out
}

/// `apiVersion Kind ns/name`, for a line of the diff (a code block: only hidden
/// characters need writing out).
fn full(e: &Entry) -> String {
    visible(&format!("{} {}", e.api_version, spelled(e))).into_owned()
}

/// A code fence longer than any run of backticks in `body`, so no value closes it.
fn fence(body: &str) -> String {
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// Cuts at a line boundary so that the comment, plus a closing note, fits `budget`
/// (only reached when the summary alone is too long).
fn truncate(mut out: String, budget: usize) -> String {
    const CUT: &str = "\n… (the plan is longer than a comment allows)\n";
    if out.len() <= budget {
        return out;
    }
    let mut end = budget - CUT.len();
    while !out.is_char_boundary(end) {
        end -= 1;
    }
    end = out[..end].rfind('\n').unwrap_or(0);
    out.truncate(end);
    out + CUT
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::FieldChange;
    use super::*;

    fn entry(name: &str, replicas: Option<i64>) -> Entry {
        Entry {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: "default".into(),
            name: name.into(),
            replicas,
            overrides: vec![],
        }
    }

    fn scaled(name: &str, from: i64, to: i64) -> Changed {
        let field = FieldChange { path: "spec.replicas".into(), from: Some(json!(from)), to: Some(json!(to)) };
        Changed { object: entry(name, None), fields: vec![field], overrides_added: vec![], overrides_removed: vec![] }
    }

    fn nginx_to_ten() -> PlanDiff {
        let mut diff = PlanDiff { from: "a".repeat(40), to: "b".repeat(40), ..Default::default() };
        diff.clusters
            .insert("member1".into(), ClusterDiff { changed: vec![scaled("nginx", 1, 5)], ..Default::default() });
        diff.clusters
            .insert("member2".into(), ClusterDiff { added: vec![entry("nginx", Some(5))], ..Default::default() });
        diff
    }

    #[test]
    fn the_summary_names_every_cluster_with_its_replica_changes() {
        let text = markdown(&nginx_to_ten(), &Comment::default());
        assert!(text.starts_with(MARKER), "{text}");
        assert!(text.contains("` aaaaaaaaaaaa ` → ` bbbbbbbbbbbb `"), "{text}");
        assert!(text.contains("| ` member1 ` | 0 | 1 | 0 | ` Deployment default/nginx ` 1 → 5 |"), "{text}");
        assert!(text.contains("| ` member2 ` | 1 | 0 | 0 | ` Deployment default/nginx ` new (5) |"), "{text}");
        assert!(text.contains("-     spec.replicas: 1\n+     spec.replicas: 5\n"), "{text}");
        assert!(text.contains("<details><summary><b>member2</b>: 1 added</summary>"), "{text}");
    }

    #[test]
    fn no_changes_says_so() {
        let diff = PlanDiff { from: "a".into(), to: "b".into(), ..Default::default() };
        assert!(markdown(&diff, &Comment::default()).contains("No changes in any cluster."));
    }

    #[test]
    fn a_value_with_backticks_cannot_close_the_fence() {
        let mut diff = nginx_to_ten();
        let field = FieldChange { path: "data.x".into(), from: None, to: Some(json!("```\n</details>")) };
        diff.clusters.get_mut("member1").unwrap().changed[0].fields.push(field);
        let text = markdown(&diff, &Comment::default());
        assert!(text.contains("\n````diff\n"), "{text}");
    }

    #[test]
    fn what_does_not_fit_the_budget_is_named_and_the_comment_stays_within_it() {
        let mut diff = nginx_to_ten();
        for i in 0..400 {
            let changed = (0..50).map(|j| scaled(&format!("app-{j}"), 1, 2)).collect();
            diff.clusters.insert(format!("cluster-{i:03}"), ClusterDiff { changed, ..Default::default() });
        }
        let text = markdown(&diff, &Comment { full_plan: "the plan file", ..Comment::default() });
        assert!(text.len() <= BUDGET, "{}", text.len());
        assert!(text.contains("| … 202 more clusters |"), "{}", &text[..2000]);
        assert!(text.contains("do not fit in a comment; see the plan file."), "{}", &text[text.len() - 500..]);
        // The first clusters' diffs are there, whole.
        assert!(text.contains("<details><summary><b>cluster-000</b>: 50 changed</summary>"));
        assert_eq!(text.matches("<details>").count(), text.matches("</details>").count());
        // A tiny budget still holds the marker and closes cleanly.
        let small = markdown(&diff, &Comment { budget: 1_000, ..Comment::default() });
        assert!(small.len() <= 1_000 && small.starts_with(MARKER), "{small}");
        assert!(small.ends_with("(the plan is longer than a comment allows)\n"), "{small}");
    }
}
