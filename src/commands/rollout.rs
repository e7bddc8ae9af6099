//! `flotilla rollout`: where each rollout stands (the controller's `/status`), and
//! pause, resume and abort, recorded in the host cluster for the leader to carry out.

use std::sync::Arc;

use anyhow::Context;
use flotilla_core::escape::visible;
use flotilla_core::rollout::PolicyId;

use super::{Outcome, runtime};
use crate::cli::{RolloutAction, RolloutArgs, RolloutCommandArgs, RolloutStatusArgs, StatusFormat};
use crate::rollouts::step::Command;
use crate::rollouts::store::Store;
use crate::status::RolloutStatus;

pub fn rollout(args: RolloutArgs) -> anyhow::Result<Outcome> {
    match args.action {
        RolloutAction::Status(args) => status(&args),
        RolloutAction::Pause(args) => command(&args, Command::Pause),
        RolloutAction::Resume(args) => command(&args, Command::Resume),
        RolloutAction::Abort(args) => command(&args, Command::Abort),
    }
}

/// A policy as people write it: `NAMESPACE/NAME` or `NAME`.
fn policy(text: &str) -> anyhow::Result<PolicyId> {
    let (namespace, name) = match text.split_once('/') {
        Some((ns, name)) => (Some(ns.to_owned()), name.to_owned()),
        None => (None, text.to_owned()),
    };
    let ok =
        |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.".contains(c));
    anyhow::ensure!(
        ok(&name) && namespace.as_deref().is_none_or(ok),
        "{}: a policy is NAMESPACE/NAME (a RolloutPolicy) or NAME (a ClusterRolloutPolicy)",
        visible(text)
    );
    Ok(PolicyId { namespace, name })
}

fn status(args: &RolloutStatusArgs) -> anyhow::Result<Outcome> {
    let status = super::status::fetch(&args.controller, args.request_timeout)?;
    let only = args.policy.as_deref().map(policy).transpose()?.map(|p| p.to_string());
    let rollouts: std::collections::BTreeMap<&String, &RolloutStatus> =
        status.rollouts.iter().filter(|(name, _)| only.as_ref().is_none_or(|o| o == *name)).collect();
    if let Some(only) = &only {
        anyhow::ensure!(!rollouts.is_empty(), "the controller reports no rollout of {only}");
    }
    match args.output {
        StatusFormat::Json => println!("{}", serde_json::to_string_pretty(&rollouts)?),
        StatusFormat::Text => rollouts.iter().for_each(|(name, r)| print!("{}", show(name, r))),
    }
    let halted = rollouts.values().any(|r| r.state == "halted");
    Ok(if halted { Outcome::Problems } else { Outcome::Clean })
}

/// One rollout as text: its state, then each batch with its times.
fn show(name: &str, r: &RolloutStatus) -> String {
    let short = |rev: &Option<String>| rev.as_deref().map_or("-".to_owned(), |r| r.chars().take(12).collect());
    let mut out = format!("{}: {}", visible(name), r.state);
    if let (Some(batch), Some(wave)) = (r.batch, &r.wave) {
        out += &format!(" at batch {batch} ({})", visible(wave));
    }
    out += &format!(", {} over {}", short(&r.revision), short(&r.last_good));
    if r.paused {
        out += ", paused";
    }
    if !r.windows_open {
        out += ", windows closed";
    }
    if let Some(until) = &r.soak_until {
        out += &format!(", soak until {until}");
    }
    if let Some(reason) = &r.reason {
        out += &format!(": {}{}", visible(reason), if r.reverted { " (reverted)" } else { "" });
    }
    out += "\n";
    for (i, wave) in r.waves.iter().enumerate() {
        let when = [("started", &wave.started), ("soaking", &wave.soaking), ("done", &wave.done)]
            .iter()
            .filter_map(|(what, at)| Some(format!("{what} {}", at.as_deref()?)))
            .collect::<Vec<_>>();
        let clusters = wave.clusters.join(", ");
        let clusters = visible(&clusters);
        out += &format!("  {}. {}: {clusters}  {}\n", i + 1, visible(&wave.wave), when.join(", "));
    }
    for (gate, reading) in &r.gates {
        let value = reading.value.map_or_else(|| reading.error.clone().unwrap_or_default(), |v| v.to_string());
        out += &format!(
            "  gate {}: {} ({})\n",
            visible(gate),
            visible(&value),
            if reading.passing { "passing" } else { "failing" }
        );
    }
    out
}

fn command(args: &RolloutCommandArgs, command: Command) -> anyhow::Result<Outcome> {
    let policy = policy(&args.policy)?;
    let host = args.host_kubeconfig.clone().map(|path| (path, args.host_context.clone()));
    let store = Store {
        host: Arc::new(crate::host::Host::new(host)),
        namespace: args.namespace.clone(),
        instance: args.instance.clone(),
    };
    let id =
        runtime()?.block_on(store.record(&policy, command)).context("recording the command in the host cluster")?;
    let name = serde_json::to_value(command)?;
    eprintln!(
        "{} {policy}: recorded as command {id}; the leading controller carries it out within its --rollout-monitor-period",
        name.as_str().unwrap_or_default()
    );
    Ok(Outcome::Clean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_is_namespace_and_name_or_a_name() {
        assert_eq!(policy("shop/web").unwrap().to_string(), "RolloutPolicy shop/web");
        assert_eq!(policy("fleet").unwrap().to_string(), "ClusterRolloutPolicy fleet");
        for bad in ["", "shop/", "/web", "a/b/c", "Shop/web", "web\u{1b}[2J"] {
            assert!(policy(bad).is_err(), "{bad:?}");
        }
    }
}
