//! An explanation as text, for a terminal or a golden file. Every piece that comes from
//! the repository or the cluster state is made visible (control characters written
//! out): a name cannot move the cursor or forge a line.

use std::fmt::Write;

use super::Explanation;
use crate::escape::visible as v;

/// The explanation, limited to `only` members when that is not empty.
pub fn text(e: &Explanation, only: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}\n  declared at {}", v(&e.object), v(&e.origin));
    let _ = writeln!(out, "claimed by {}", v(&e.claim));
    for p in &e.policies {
        let _ = writeln!(out, "  {} (by {}, priority {}): {}", v(&p.policy), p.selects_by, p.priority, v(&p.why));
    }
    if let Some(strategy) = &e.strategy {
        match e.replicas {
            Some(replicas) => {
                let _ = writeln!(out, "placement: {}, {}", v(strategy), super::placement::plural(replicas, "replica"));
            }
            None => {
                let _ = writeln!(out, "placement: {}", v(strategy));
            }
        }
    }
    for line in &e.arithmetic {
        let _ = writeln!(out, "  {}", v(line));
    }
    let _ = writeln!(out, "members:");
    let width = e.members.keys().map(|m| m.chars().count()).max().unwrap_or(0);
    for (name, m) in e.members.iter().filter(|(name, _)| only.is_empty() || only.contains(name)) {
        let _ = writeln!(out, "  {:<width$}  {}", v(name), v(&m.why));
        if let Some(wave) = &m.wave {
            let _ = writeln!(out, "  {:<width$}    rollout: {}", "", v(wave));
        }
        for step in &m.overrides {
            let _ = writeln!(out, "  {:<width$}    {} rule {}", "", v(&step.policy), step.rule);
            for field in &step.fields {
                let _ = writeln!(out, "  {:<width$}      {}", "", v(field));
            }
            if step.fields.is_empty() {
                let _ = writeln!(out, "  {:<width$}      (changes nothing)", "");
            }
        }
    }
    if let Some(rollout) = &e.rollout {
        let _ = writeln!(out, "rollout: {}", v(rollout));
    }
    if !e.problems.is_empty() {
        let _ = writeln!(out, "problems:");
        for problem in &e.problems {
            let _ = writeln!(out, "  {}", v(problem));
        }
    }
    out
}
