//! FederatedHPA decisions over random histories: random bounds and `behavior`, load
//! changing at every sync, syncs 1–40 s apart, and each decided count written back or
//! not (a failed push). Asserted against the replica count's own trajectory and the
//! recommendations, not against the [`History`] the decision keeps:
//!
//! - once within `[min, max]`, the count stays within;
//! - a scale-up adds no more than the scale-up policies allow from the count one period
//!   earlier (without `behavior`: at most `max(2·current, 4)`); a scale-down likewise;
//! - a scale-down never goes below a recommendation of the scale-down window, a
//!   scale-up never above the smallest recommendation of the scale-up window (without
//!   `behavior`, the largest of the scale-down window, as Kubernetes stabilizes), all
//!   within the bounds.

use proptest::prelude::*;
use serde_json::json;

use super::*;

/// One direction's rules: window, and a policy (`Pods` or `Percent`, value, period).
#[derive(Debug, Clone)]
struct Direction {
    window: i64,
    policy: Option<(bool, i64, i64)>,
}

#[derive(Debug, Clone)]
struct Shape {
    min: i64,
    max: i64,
    behavior: Option<(Direction, Direction)>,
}

impl Shape {
    fn spec(&self) -> FederatedHpaSpec {
        let rules = |d: &Direction| {
            let mut rules = json!({"stabilizationWindowSeconds": d.window});
            if let Some((pods, value, period)) = d.policy {
                let kind = if pods { "Pods" } else { "Percent" };
                rules["policies"] = json!([{"type": kind, "value": value, "periodSeconds": period}]);
            }
            rules
        };
        let mut spec = json!({
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": self.min, "maxReplicas": self.max,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]
        });
        if let Some((up, down)) = &self.behavior {
            spec["behavior"] = json!({"scaleUp": rules(up), "scaleDown": rules(down)});
        }
        serde_json::from_value(spec).unwrap()
    }

    /// The policy of a direction, Kubernetes' default when unset.
    fn policies(&self, up: bool) -> Vec<(bool, i64, i64)> {
        let given = self.behavior.as_ref().and_then(|(u, d)| if up { u.policy } else { d.policy });
        match (given, up) {
            (Some(policy), _) => vec![policy],
            (None, true) => vec![(true, 4, 15), (false, 100, 15)],
            (None, false) => vec![(false, 100, 15)],
        }
    }

    fn window(&self, up: bool) -> i64 {
        match &self.behavior {
            Some((u, d)) => {
                if up {
                    u.window
                } else {
                    d.window
                }
            }
            None => {
                if up {
                    0
                } else {
                    Timing::default().downscale_window
                }
            }
        }
    }
}

fn direction() -> impl Strategy<Value = Direction> {
    let policy = proptest::option::of((any::<bool>(), 1i64..=200, 5i64..=60));
    (0i64..=120, policy).prop_map(|(window, policy)| Direction {
        window,
        policy: policy.map(|(pods, value, period)| (pods, if pods { value.min(6) } else { value }, period)),
    })
}

fn shape() -> impl Strategy<Value = Shape> {
    (1i64..=3, 0i64..=12, proptest::option::of((direction(), direction()))).prop_map(|(min, extra, behavior)| Shape {
        min,
        max: min + extra,
        behavior,
    })
}

/// One sync: seconds since the last, milli-CPU per pod (of a 100m request), and
/// whether a decided change is written.
fn syncs() -> impl Strategy<Value = Vec<(i64, i64, bool)>> {
    proptest::collection::vec((1i64..=40, 0i64..=250, proptest::bool::weighted(0.9)), 1..80)
}

fn pods(n: i64, usage: i64, now: i64) -> Vec<Pod> {
    super::tests::app_pods("web", n, (100, usage), now)
}

/// The count after every write made at or before `at`.
fn count_at(trajectory: &[(i64, i64)], at: i64) -> i64 {
    trajectory.iter().take_while(|(t, _)| *t <= at).last().map(|(_, n)| *n).expect("the first entry is the start")
}

/// The furthest the policies let the count move from `from` in one period.
fn limit(policies: &[(bool, i64, i64)], up: bool, trajectory: &[(i64, i64)], now: i64) -> i64 {
    let each = policies.iter().map(|&(pods, value, period)| {
        let start = count_at(trajectory, now - period);
        match (pods, up) {
            (true, true) => start + value,
            (true, false) => start - value,
            (false, true) => (start as f64 * (1.0 + value as f64 / 100.0)).ceil() as i64,
            (false, false) => (start as f64 * (1.0 - value as f64 / 100.0)) as i64,
        }
    });
    if up { each.max().unwrap() } else { each.min().unwrap() }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn the_count_keeps_its_bounds_rates_and_windows(shape in shape(), syncs in syncs()) {
        let (spec, timing) = (shape.spec(), Timing::default());
        let mut history = History::default();
        let mut now = 1_000_000;
        let mut current = shape.min;
        let mut trajectory = vec![(i64::MIN, current)];
        let mut recommendations: Vec<(i64, i64)> = Vec::new();
        for (gap, usage, lands) in syncs {
            now += gap;
            let pods = pods(current, usage, now);
            let observed = Observed { current, member_replicas: current, pods: &pods, now };
            let decision = decide(&spec, &observed, &mut history, &timing);
            let desired = decision.desired;
            prop_assert!((shape.min..=shape.max).contains(&desired), "{desired} outside {}..={}", shape.min, shape.max);
            let Some(metric) = decision.metrics.first() else { continue };
            recommendations.push((now, metric.recommends));
            let bounded = |r: i64| r.clamp(shape.min, shape.max);
            let within = |window: i64| recommendations.iter().filter(move |(at, _)| *at > now - window || *at == now).map(|(_, r)| bounded(*r));
            if desired > current {
                // With `behavior`, a scale-up takes the smallest recommendation of its
                // window; without, Kubernetes stabilizes both ways on the largest of the
                // scale-down window (so a count whose write failed is asked for again).
                let (window, bound) = match shape.behavior {
                    Some(_) => (shape.window(true), within(shape.window(true)).min().unwrap()),
                    None => (shape.window(false), within(shape.window(false)).max().unwrap()),
                };
                prop_assert!(desired <= bound, "up to {desired} above {bound}, recommended within {window} s");
                let allowed = if shape.behavior.is_some() {
                    limit(&shape.policies(true), true, &trajectory, now)
                } else {
                    (2 * current).max(4)
                };
                prop_assert!(desired <= allowed.max(shape.min), "up from {current} to {desired}; the policies allow {allowed}");
            }
            if desired < current {
                let window = shape.window(false);
                let highest = within(window).max().unwrap();
                prop_assert!(desired >= highest, "down to {desired} below {highest}, recommended within {window} s");
                if shape.behavior.is_some() {
                    let allowed = limit(&shape.policies(false), false, &trajectory, now);
                    prop_assert!(desired >= allowed.min(shape.max), "down from {current} to {desired}; the policies allow {allowed}");
                }
            }
            if desired != current && lands {
                written(&spec, &decision, &mut history, &timing, now);
                current = desired;
                trajectory.push((now, current));
            }
        }
    }
}
