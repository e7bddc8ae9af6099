//! Leader election on a Lease in the host cluster, so replicas can stand by. The decision
//! is pure ([`elect`]); this is its executor: it reads and writes the Lease with every
//! request bounded, and keeps time. Loops learn whether they may write from a `watch` of
//! the leadership ([`Leadership::subscribe`]) and check a [`Fence`] right before the
//! writes that cannot be undone (a prune's deletes, a push). Without election an
//! instance always leads.

pub mod elect;

use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::sync::{oneshot, watch};
use tokio::time::timeout_at;
use tracing::{info, warn};

use self::elect::{Action, Elector, Event, Seen, Timing};
use crate::host::Host;

/// The Lease's name and timing (it lives in the controller's namespace).
#[derive(Debug, Clone)]
pub struct Election {
    /// Lease name.
    pub name: String,
    /// Duration, renew deadline and retry period.
    pub timing: Timing,
}

/// Whether this instance leads, kept current by a task acquiring and renewing the Lease.
pub struct Leadership {
    leading: watch::Receiver<bool>,
    fence: Fence,
    /// Without election: the sender of a constant `true`, kept so the watch stays open.
    _always: Option<watch::Sender<bool>>,
    task: Option<(tokio::task::JoinHandle<()>, oneshot::Sender<()>)>,
}

impl Leadership {
    /// Starts campaigning for `election`'s Lease as `identity`, or leads at once without one.
    pub async fn start(
        election: Option<&Election>,
        host: &Host,
        namespace: &str,
        identity: &str,
    ) -> anyhow::Result<Self> {
        let Some(election) = election else {
            let (always, leading) = watch::channel(true);
            return Ok(Self { leading, fence: Fence::default(), _always: Some(always), task: None });
        };
        let api: Api<Lease> =
            Api::namespaced(host.client().await.context("the host cluster, for the lease")?, namespace);
        let (lead, leading) = watch::channel(false);
        let (hold, until) = watch::channel(None);
        let (stop, stopped) = oneshot::channel();
        let campaign = Campaign {
            api,
            name: election.name.clone(),
            timing: election.timing,
            elector: Elector::new(identity.to_owned(), election.timing),
            lead,
            hold,
        };
        info!(lease = %format!("{namespace}/{}", election.name), identity, "leader election on");
        let task = tokio::spawn(campaign.run(stopped));
        Ok(Self { leading, fence: Fence(Some(until)), _always: None, task: Some((task, stop)) })
    }

    /// A watch of the leadership, for a loop.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// A fence to check right before an irreversible write.
    pub fn fence(&self) -> Fence {
        self.fence.clone()
    }

    /// Gives the lease up: the Lease no longer names a process that is gone, and a
    /// standby takes it on its next look instead of waiting for it to lapse. Loops must
    /// have stopped.
    pub async fn release(self) {
        let Some((task, stop)) = self.task else { return };
        let _ = stop.send(());
        if tokio::time::timeout(Duration::from_secs(5), task).await.is_err() {
            warn!("releasing the lease timed out; it lapses after its duration");
        }
    }
}

/// Whether this instance may still write, read at the moment of the write: it compares
/// the end of the leadership with the clock, so it holds even if the campaign's timer
/// is late. The default fence (no election) always holds.
#[derive(Debug, Clone, Default)]
pub struct Fence(Option<watch::Receiver<Option<Instant>>>);

impl Fence {
    /// A fence that holds until the deadline `until` names (none: it does not hold).
    pub fn until(until: watch::Receiver<Option<Instant>>) -> Self {
        Self(Some(until))
    }

    /// Whether the lease is held now.
    pub fn holds(&self) -> bool {
        self.0.as_ref().is_none_or(|until| until.borrow().is_some_and(|until| Instant::now() < until))
    }
}

/// Resolves when `leading` changes; never when its sender is gone.
pub async fn changed(leading: &mut watch::Receiver<bool>) {
    if leading.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// The executor's state: the Lease API, the decision, and where the outcome goes.
struct Campaign {
    api: Api<Lease>,
    name: String,
    timing: Timing,
    elector: Elector,
    lead: watch::Sender<bool>,
    hold: watch::Sender<Option<Instant>>,
}

impl Campaign {
    /// Tries to acquire or renew every retry period until `stopped`, then releases.
    async fn run(mut self, mut stopped: oneshot::Receiver<()>) {
        loop {
            let now = Instant::now();
            // A request may take until the next attempt, and never past the leadership.
            let bound = self.bound(now);
            let event = match timeout_at(bound.into(), self.api.get_opt(&self.name)).await {
                Ok(Ok(lease)) => {
                    let (received, wall) = (Instant::now(), k8s_openapi::jiff::Timestamp::now());
                    Event::Seen { now, received, wall, lease: lease.map(seen) }
                }
                Ok(Err(e)) => {
                    warn!(error = %e, "cannot read the lease");
                    Event::Unseen { now }
                }
                Err(_) => {
                    warn!("reading the lease timed out");
                    Event::Unseen { now }
                }
            };
            let actions = self.elector.step(event);
            self.act(actions, bound).await;
            let wake = self.elector.until().map_or(now + self.timing.retry, |u| u.min(now + self.timing.retry));
            tokio::select! {
                _ = tokio::time::sleep_until(wake.into()) => {}
                _ = &mut stopped => break,
            }
            let actions = self.elector.step(Event::Tick { now: Instant::now() });
            self.act(actions, bound).await;
        }
        let actions = self.elector.step(Event::Release);
        let bound = Instant::now() + self.timing.retry.max(Duration::from_secs(1));
        self.act(actions, bound).await;
    }

    /// The end of the current attempt's requests.
    fn bound(&self, now: Instant) -> Instant {
        let attempt = now + self.timing.attempt();
        self.elector.until().map_or(attempt, |until| until.min(attempt))
    }

    /// Carries out actions, and those that their outcomes lead to.
    async fn act(&mut self, actions: Vec<Action>, bound: Instant) {
        let mut queue = std::collections::VecDeque::from(actions);
        while let Some(action) = queue.pop_front() {
            let written = match action {
                Action::Lead(leading) => {
                    self.hold.send_replace(self.elector.until().filter(|_| leading));
                    self.lead.send_replace(leading);
                    info!(leading, "{}", if leading { "acquired the lease" } else { "no longer holding the lease" });
                    continue;
                }
                Action::Create(spec) => {
                    let lease = Lease { metadata: self.meta(None), spec: Some(spec) };
                    timeout_at(bound.into(), self.api.create(&params(), &lease)).await
                }
                Action::Replace { spec, version } => {
                    let released = spec.holder_identity.is_none();
                    let lease = Lease { metadata: self.meta(Some(version)), spec: Some(spec) };
                    let replaced = timeout_at(bound.into(), self.api.replace(&self.name, &params(), &lease)).await;
                    if released {
                        match &replaced {
                            Ok(Ok(_)) => info!("released the lease"),
                            _ => warn!("could not release the lease; it lapses after its duration"),
                        }
                    }
                    replaced
                }
            };
            let event = match written {
                Ok(Ok(lease)) => Event::Wrote(seen(lease)),
                Ok(Err(e)) => {
                    // A conflict is the normal outcome of losing a race to another candidate.
                    tracing::debug!(error = %e, "lease write refused");
                    Event::WriteFailed { now: Instant::now() }
                }
                Err(_) => {
                    warn!("writing the lease timed out");
                    Event::WriteFailed { now: Instant::now() }
                }
            };
            queue.extend(self.elector.step(event));
            // A renewal moves the end of the leadership on.
            if *self.lead.borrow() {
                self.hold.send_replace(self.elector.until());
            }
        }
    }

    fn meta(&self, version: Option<String>) -> ObjectMeta {
        ObjectMeta { name: Some(self.name.clone()), resource_version: version, ..Default::default() }
    }
}

fn params() -> PostParams {
    PostParams { field_manager: Some("flotilla-lease".into()), ..Default::default() }
}

fn seen(lease: Lease) -> Seen {
    Seen { spec: lease.spec.unwrap_or_default(), version: lease.metadata.resource_version.unwrap_or_default() }
}
