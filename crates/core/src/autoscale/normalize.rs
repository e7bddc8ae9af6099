//! From a metric's recommendation to the replica count to write: stabilization over
//! recent recommendations, rate limits from `behavior`, and the min/max clamp, with the
//! conditions Kubernetes reports (spec §5.2 steps 6 and 7).

use crate::model::autoscale::{Behavior, ScalingPolicy, ScalingRules};

/// A recommendation or scale event at a time (seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stamped {
    /// Unix seconds.
    pub at: i64,
    /// Replicas recommended, or replicas added/removed.
    pub value: i64,
}

/// What an autoscaler remembers between syncs: its raw recommendations and the scale
/// events of its writes. Kept by the caller (in memory or in a ConfigMap).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct History {
    /// Raw recommendations.
    pub recommendations: Vec<Stamped>,
    /// Scale-ups (replicas added).
    pub up: Vec<Stamped>,
    /// Scale-downs (replicas removed).
    pub down: Vec<Stamped>,
}

/// A condition as the HPA status reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Condition {
    /// `AbleToScale`, `ScalingActive` or `ScalingLimited`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `True` or `False`.
    pub status: &'static str,
    /// CamelCase reason.
    pub reason: &'static str,
    /// Explanation.
    pub message: String,
}

impl Condition {
    /// A condition.
    pub fn new(kind: &'static str, status: bool, reason: &'static str, message: impl Into<String>) -> Self {
        Condition { kind, status: if status { "True" } else { "False" }, reason, message: message.into() }
    }
}

/// Scaling rules with Kubernetes' defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    /// Seconds.
    pub window: i64,
    /// `Max`, `Min` or `Disabled`.
    pub select: String,
    /// Rate limits.
    pub policies: Vec<ScalingPolicy>,
}

/// `behavior` with defaults (`SetDefaults_HorizontalPodAutoscalerBehavior`): scale-up
/// window 0, Max of 4 pods or 100 % per 15 s; scale-down window `downscale_window`
/// (the controller's 5 minutes unless set), Max of 100 % per 15 s.
pub fn defaults(behavior: &Behavior, downscale_window: i64) -> (Rules, Rules) {
    let fill = |rules: Option<&ScalingRules>, window: i64, policies: Vec<ScalingPolicy>| Rules {
        window: rules.and_then(|r| r.stabilization_window_seconds).map_or(window, i64::from),
        select: rules.and_then(|r| r.select_policy.clone()).unwrap_or_else(|| "Max".into()),
        policies: rules.and_then(|r| r.policies.clone()).unwrap_or(policies),
    };
    let policy = |kind: &str, value| ScalingPolicy { kind: kind.into(), value, period_seconds: 15 };
    (
        fill(behavior.scale_up.as_ref(), 0, vec![policy("Pods", 4), policy("Percent", 100)]),
        fill(behavior.scale_down.as_ref(), downscale_window, vec![policy("Percent", 100)]),
    )
}

/// Replicas changed by events newer than `period` seconds before `now`.
fn changed_within(events: &[Stamped], period: i64, now: i64) -> i64 {
    events.iter().filter(|e| e.at > now - period).map(|e| e.value).sum()
}

/// `calculateScaleUpLimitWithScalingRules`.
pub fn scale_up_limit(current: i64, up: &[Stamped], down: &[Stamped], rules: &Rules, now: i64) -> i64 {
    rate_limit(current, up, down, rules, now, true)
}

/// `calculateScaleDownLimitWithBehaviors`.
pub fn scale_down_limit(current: i64, up: &[Stamped], down: &[Stamped], rules: &Rules, now: i64) -> i64 {
    rate_limit(current, up, down, rules, now, false)
}

/// The limit the policies allow from the replicas at each period's start: `Max` picks
/// the most permissive policy (the highest limit up, the lowest down), `Min` the least.
fn rate_limit(current: i64, up: &[Stamped], down: &[Stamped], rules: &Rules, now: i64, scaling_up: bool) -> i64 {
    if rules.select == "Disabled" {
        return current;
    }
    let (mut result, pick): (i64, fn(i64, i64) -> i64) = match (rules.select == "Min") != scaling_up {
        true => (i64::from(i32::MIN), i64::max),
        false => (i64::from(i32::MAX), i64::min),
    };
    for policy in &rules.policies {
        let period = i64::from(policy.period_seconds);
        let start = current - changed_within(up, period, now) + changed_within(down, period, now);
        let (value, percent) = (i64::from(policy.value), f64::from(policy.value) / 100.0);
        let proposed = match (policy.kind.as_str(), scaling_up) {
            ("Pods", true) => start + value,
            ("Pods", false) => start - value,
            // Up rounds up so a small percentage still adds a pod; down truncates.
            (_, true) => (start as f64 * (1.0 + percent)).ceil() as i64,
            (_, false) => (start as f64 * (1.0 - percent)) as i64,
        };
        result = pick(result, proposed);
    }
    result
}

/// `convertDesiredReplicasWithRules` (no `behavior`): at least `min`, at most `max` and
/// `max(2·current, 4)`. Returns (replicas, reason, message).
pub fn clamp_without_behavior(current: i64, desired: i64, min: i64, max: i64) -> (i64, &'static str, &'static str) {
    let scale_up_limit = (2 * current).max(4);
    let (allowed_max, reason, message) = if max > scale_up_limit {
        (scale_up_limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate")
    } else {
        (max, "TooManyReplicas", "the desired replica count is more than the maximum replica count")
    };
    if desired < min {
        return (min, "TooFewReplicas", "the desired replica count is less than the minimum replica count");
    }
    if desired > allowed_max {
        return (allowed_max, reason, message);
    }
    (desired, "DesiredWithinRange", "the desired count is within the acceptable range")
}

/// Bounds and history for one normalization.
pub struct Normalize<'a> {
    /// Template replicas now.
    pub current: i64,
    /// The metrics' recommendation.
    pub desired: i64,
    /// `minReplicas`.
    pub min: i64,
    /// `maxReplicas`.
    pub max: i64,
    /// `behavior`, if the FederatedHPA has one.
    pub behavior: Option<&'a Behavior>,
    /// The controller's downscale stabilization window (seconds), used without a
    /// `behavior` and as the default scale-down window.
    pub downscale_window: i64,
    /// Now (unix seconds).
    pub now: i64,
}

impl Normalize<'_> {
    /// The replicas to write and the AbleToScale and ScalingLimited conditions; records
    /// the raw recommendation in `history` (replacing one older than every window, as
    /// Kubernetes recycles samples).
    pub fn run(&self, history: &mut History) -> (i64, Vec<Condition>) {
        match self.behavior {
            None => self.without_behavior(history),
            Some(behavior) => self.with_behavior(behavior, history),
        }
    }

    fn record(&self, history: &mut History, oldest_relevant: i64) {
        let sample = Stamped { at: self.now, value: self.desired };
        match history.recommendations.iter_mut().find(|r| r.at < oldest_relevant) {
            Some(old) => *old = sample,
            None => history.recommendations.push(sample),
        }
    }

    fn without_behavior(&self, history: &mut History) -> (i64, Vec<Condition>) {
        let cutoff = self.now - self.downscale_window;
        let stabilized =
            history.recommendations.iter().filter(|r| r.at >= cutoff).map(|r| r.value).fold(self.desired, i64::max);
        self.record(history, cutoff);
        let able = if stabilized != self.desired {
            Condition::new(
                "AbleToScale",
                true,
                "ScaleDownStabilized",
                "recent recommendations were higher than current one, applying the highest recent recommendation",
            )
        } else {
            Condition::new("AbleToScale", true, "ReadyForNewScale", "recommended size matches current size")
        };
        let (replicas, reason, message) = clamp_without_behavior(self.current, stabilized, self.min, self.max);
        (replicas, vec![able, Condition::new("ScalingLimited", replicas != stabilized, reason, message)])
    }

    fn with_behavior(&self, behavior: &Behavior, history: &mut History) -> (i64, Vec<Condition>) {
        let (up, down) = defaults(behavior, self.downscale_window);
        let (up_cutoff, down_cutoff) = (self.now - up.window, self.now - down.window);
        let (mut up_rec, mut down_rec) = (self.desired, self.desired);
        for r in &history.recommendations {
            if r.at > up_cutoff {
                up_rec = up_rec.min(r.value);
            }
            if r.at > down_cutoff {
                down_rec = down_rec.max(r.value);
            }
        }
        let stabilized = self.current.max(up_rec).min(down_rec);
        self.record(history, up_cutoff.min(down_cutoff));
        let able = match (stabilized != self.desired, self.desired >= self.current) {
            (false, _) => {
                Condition::new("AbleToScale", true, "ReadyForNewScale", "recommended size matches current size")
            }
            (true, true) => Condition::new(
                "AbleToScale",
                true,
                "ScaleUpStabilized",
                "recent recommendations were lower than current one, applying the lowest recent recommendation",
            ),
            (true, false) => Condition::new(
                "AbleToScale",
                true,
                "ScaleDownStabilized",
                "recent recommendations were higher than current one, applying the highest recent recommendation",
            ),
        };
        let (replicas, reason, message) = self.rate_limit(stabilized, &up, &down, history);
        (replicas, vec![able, Condition::new("ScalingLimited", replicas != stabilized, reason, message)])
    }

    /// `convertDesiredReplicasWithBehaviorRate`.
    fn rate_limit(&self, desired: i64, up: &Rules, down: &Rules, history: &History) -> (i64, &'static str, String) {
        if desired > self.current {
            let limit = scale_up_limit(self.current, &history.up, &history.down, up, self.now).max(self.current);
            let (allowed, reason, message) = if self.max > limit {
                (limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate")
            } else {
                (self.max, "TooManyReplicas", "the desired replica count is more than the maximum replica count")
            };
            if desired > allowed {
                return (allowed, reason, message.into());
            }
        } else if desired < self.current {
            let limit = scale_down_limit(self.current, &history.up, &history.down, down, self.now).min(self.current);
            let (allowed, reason, message) = if self.min < limit {
                (limit, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate")
            } else {
                (self.min, "TooFewReplicas", "the desired replica count is less than the minimum replica count")
            };
            if desired < allowed {
                return (allowed, reason, message.into());
            }
        }
        (desired, "DesiredWithinRange", "the desired count is within the acceptable range".into())
    }
}

/// Records a write from `from` to `to` replicas (`storeScaleEvent`): only with a
/// `behavior`, whose rate limits read the events; events older than the longest policy
/// period are dropped.
pub fn record_scale(
    history: &mut History,
    behavior: Option<&Behavior>,
    from: i64,
    to: i64,
    now: i64,
    downscale_window: i64,
) {
    let Some(behavior) = behavior else { return };
    let (up, down) = defaults(behavior, downscale_window);
    let (events, rules, change) =
        if to > from { (&mut history.up, &up, to - from) } else { (&mut history.down, &down, from - to) };
    let longest = rules.policies.iter().map(|p| i64::from(p.period_seconds)).max().unwrap_or(0);
    events.retain(|e| e.at > now - longest);
    events.push(Stamped { at: now, value: change });
}
