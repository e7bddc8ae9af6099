//! RolloutPolicy and ClusterRolloutPolicy (docs/rollouts.md): what the API server's
//! schema would refuse, refused on load with the field's path.

use std::collections::BTreeSet;

use super::{Check, cluster_affinity, ensure, resource_selectors};
use crate::model::rollout::{Amount, RolloutSpec};

/// Selectors defaulted to the policy's namespace; waves and gates named once each;
/// amounts, schedules and addresses that mean something.
pub fn rollout(spec: &mut RolloutSpec, namespace: Option<&str>) -> Check {
    resource_selectors(&mut spec.resource_selectors, namespace)?;
    let mut names = BTreeSet::new();
    for (i, wave) in spec.waves.iter().enumerate() {
        let at = format!("spec.waves[{i}]");
        ensure(!wave.name.is_empty(), || format!("{at}.name: required"))?;
        ensure(names.insert(&wave.name), || format!("{at}.name: {:?} is used twice", wave.name))?;
        ensure(wave.name != crate::rollout::REST, || format!("{at}.name: {:?} is reserved", wave.name))?;
        cluster_affinity(&wave.cluster_affinity, &format!("{at}.clusterAffinity"))?;
        ensure(!matches!(wave.max_concurrent, Some(Amount::Count(0) | Amount::Percent(0))), || {
            format!("{at}.maxConcurrent: at least one cluster must move")
        })?;
    }
    ensure(!spec.progress_deadline.is_zero(), || "spec.progressDeadline: must be longer than 0".into())?;
    let mut names = BTreeSet::new();
    for (i, gate) in spec.gates.iter().enumerate() {
        let at = format!("spec.gates[{i}]");
        ensure(!gate.name.is_empty(), || format!("{at}.name: required"))?;
        ensure(names.insert(&gate.name), || format!("{at}.name: {:?} is used twice", gate.name))?;
        ensure(gate.min.is_some() || gate.max.is_some(), || format!("{at}: min or max is required"))?;
        let address = &gate.prometheus.address;
        ensure(address.starts_with("http://") || address.starts_with("https://"), || {
            format!("{at}.prometheus.address: must start with http:// or https://")
        })?;
        ensure(!gate.prometheus.query.trim().is_empty(), || format!("{at}.prometheus.query: required"))?;
    }
    for (i, window) in spec.windows.iter().enumerate() {
        let at = format!("spec.windows[{i}]");
        crate::autoscale::cron::Schedule::parse(&window.schedule, window.time_zone.as_deref())
            .map_err(|e| format!("{at}: {e}"))?;
        ensure(!window.duration.is_zero(), || format!("{at}.duration: must be longer than 0"))?;
    }
    Ok(())
}
