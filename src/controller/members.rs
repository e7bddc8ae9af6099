//! The loops that watch the members beside the reconcile loop: the endpoints loop of
//! multi-cluster Services, the failover loop, and a Pull agent's heartbeat.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::{Config, Parts};
use crate::host::Host;
use crate::leader::Leadership;
use crate::reconciler::Trigger;

/// The endpoints loop of multi-cluster Services, in the push controller, on its own task.
pub(super) fn endpoints_loop(
    config: &Config,
    parts: &Parts,
    leadership: &Leadership,
    plans: &watch::Receiver<Option<Arc<flotilla_core::model::Plan>>>,
    stop: &watch::Receiver<bool>,
) -> Option<tokio::task::JoinHandle<()>> {
    let settings = config.endpoints.clone()?;
    let loop_ = crate::endpoints::Endpoints {
        settings,
        access: access(config, parts),
        board: parts.board.clone(),
        fence: leadership.fence(),
    };
    let inputs =
        crate::endpoints::Inputs { rendered: plans.clone(), leading: leadership.subscribe(), stop: stop.clone() };
    Some(tokio::spawn(loop_.run(inputs)))
}

/// The fleet page's feed, on its own task, when the page is on.
pub(super) fn fleet_page(
    config: &Config,
    parts: &Parts,
    (publish, health): (
        watch::Sender<Arc<crate::ui::Snapshot>>,
        Option<watch::Receiver<flotilla_core::model::ClusterState>>,
    ),
    plans: &watch::Receiver<Option<Arc<flotilla_core::model::Plan>>>,
    stop: &watch::Receiver<bool>,
) -> Option<tokio::task::JoinHandle<()>> {
    let every = config.ui.as_ref()?.every;
    let feed =
        crate::ui::feed::Feed { access: access(config, parts), board: parts.board.clone(), health, every, publish };
    Some(tokio::spawn(feed.run(crate::ui::feed::Inputs { rendered: plans.clone(), stop: stop.clone() })))
}

/// The failover loop, in the push controller, on its own task; its overlay feeds the
/// reconcile loop's renders, and a new overlay wakes it.
pub(super) fn failover_loop(
    config: &Config,
    parts: &Parts,
    leadership: &Leadership,
    (plans, stop): (&watch::Receiver<Option<Arc<flotilla_core::model::Plan>>>, &watch::Receiver<bool>),
    wake: mpsc::UnboundedSender<Trigger>,
) -> (Option<tokio::task::JoinHandle<()>>, Option<watch::Receiver<flotilla_core::model::ClusterState>>) {
    let Some(settings) = config.failover.clone() else { return (None, None) };
    let (overlay, overlaid) = watch::channel(Default::default());
    let loop_ = crate::failover::Failover {
        settings,
        access: access(config, parts),
        board: parts.board.clone(),
        metrics: parts.metrics.clone(),
        fence: leadership.fence(),
        overlay,
        wake: Box::new(move || {
            let _ = wake.send(Trigger::Force);
        }),
    };
    let inputs =
        crate::failover::Inputs { rendered: plans.clone(), leading: leadership.subscribe(), stop: stop.clone() };
    (Some(tokio::spawn(loop_.run(inputs))), Some(overlaid))
}

/// A Pull agent's heartbeat Lease in the push controller's host cluster, renewed on its
/// own task.
pub(super) fn heartbeat(config: &Config, stop: &watch::Receiver<bool>) -> Option<tokio::task::JoinHandle<()>> {
    let h = config.heartbeat.as_ref()?;
    let host = Host::new(Some(h.host.clone()));
    let namespace = config.reconcile.namespace.clone();
    Some(tokio::spawn(crate::heartbeat::renew(host, namespace, h.cluster.clone(), h.every, stop.clone())))
}

/// The rollout loop, between the reconcile loop's publications and the members'
/// workers, on its own task: returns what the workers listen to (the publications
/// themselves, without a rollout loop).
pub(super) fn rollouts_loop(
    config: &Config,
    parts: &Parts,
    (git, parse_cache): (&crate::git::Git, &Arc<std::sync::Mutex<flotilla_core::load::ParseCache>>),
    (leadership, health, stop): (
        &Leadership,
        Option<watch::Receiver<flotilla_core::model::ClusterState>>,
        &watch::Receiver<bool>,
    ),
    publications: mpsc::UnboundedReceiver<crate::members::Publication>,
) -> (mpsc::UnboundedReceiver<crate::members::Publication>, Option<tokio::task::JoinHandle<()>>) {
    let Some(settings) = config.rollouts.clone() else { return (publications, None) };
    let reconcile = &config.reconcile;
    let renderer = crate::rendering::Renderer {
        git: git.clone(),
        path: reconcile.path.clone(),
        cache: parse_cache.clone(),
        scope: reconcile.scope.clone(),
        admission: reconcile.admission,
    };
    // A Pull agent reads the push controller's rollouts where its heartbeat goes.
    let host = match (&settings.follow, &config.heartbeat) {
        (Some(_), Some(heartbeat)) => Arc::new(crate::host::Host::new(Some(heartbeat.host.clone()))),
        _ => parts.host.clone(),
    };
    let store = settings.stored.then(|| crate::rollouts::store::Store {
        host,
        namespace: reconcile.namespace.clone(),
        instance: reconcile.instance.clone(),
    });
    let loop_ = crate::rollouts::Rollouts {
        settings,
        renderer,
        access: access(config, parts),
        store,
        fence: leadership.fence(),
        board: parts.board.clone(),
        metrics: parts.metrics.clone(),
        health,
        forge: config.previews.as_ref().map(|follow| follow.forge.clone()),
    };
    let (members, to_members) = mpsc::unbounded_channel();
    let inputs = crate::rollouts::Inputs { publications, members, leading: leadership.subscribe(), stop: stop.clone() };
    (to_members, Some(tokio::spawn(loop_.run(inputs))))
}

/// How the member-watching loops reach members.
pub(super) fn access(config: &Config, parts: &Parts) -> crate::clusters::connect::Access {
    crate::clusters::connect::Access {
        credentials: config.credentials.clone(),
        host: parts.host.clone(),
        pool: parts.pool.clone(),
        trust: config.reconcile.trust,
        request_timeout: config.reconcile.request_timeout,
    }
}
