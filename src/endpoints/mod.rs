//! The endpoints loop: multi-cluster Services that carry traffic. For every Service the
//! last render exports (ServiceExport / ServiceImport, or a CrossCluster
//! MultiClusterService), it watches the EndpointSlices of the providing members and
//! keeps a copy of each in the consuming members, so `derived-<service>` (or the
//! Service itself) leads to every ready pod of the fleet. Event-driven: one watch per
//! member, a write only where a digest differs. A provider that stops answering its
//! probe has its endpoints withdrawn; it returns once it answers and is listed again.
//! Only the leader watches and writes; a new leader lists every member and starts from
//! what they hold. The decisions are [`step`]'s; this module only watches and writes.

pub mod step;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flotilla_core::model::Plan;
use flotilla_core::multicluster::{self, SERVICE_NAME_LABEL};
use futures::StreamExt;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::config::Kubeconfig;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::clusters::connect::Access;
use crate::clusters::probe;
use crate::leader::Fence;
use crate::status::Board;
use step::{Action, Event, Key, State};

/// The field manager of every write.
const FIELD_MANAGER: &str = "flotilla-endpoints";
/// A watch's connection may stay quiet this long (the API server ends a watch after at
/// most 290 s of its own accord); a silent member is found by its probe, not here.
const WATCH_READ_TIMEOUT: Duration = Duration::from_secs(300);

/// How the loop runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// What the decision needs.
    pub decide: step::Settings,
    /// Time between probes of a member.
    pub probe_interval: Duration,
}

/// What the loop works with.
pub struct Endpoints {
    /// Settings.
    pub settings: Settings,
    /// How members (and the host cluster) are reached.
    pub access: Access,
    /// Where status goes.
    pub board: Arc<Board>,
    /// Checked right before each write.
    pub fence: Fence,
}

/// What the loop listens to.
pub struct Inputs {
    /// Each render of the reconcile loop.
    pub rendered: watch::Receiver<Option<Arc<Plan>>>,
    /// Whether this instance leads.
    pub leading: watch::Receiver<bool>,
    /// Becomes true when the controller stops.
    pub stop: watch::Receiver<bool>,
}

/// The tasks that watch and probe one member.
struct Watching {
    watch: JoinHandle<()>,
    probe: JoinHandle<()>,
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.watch.abort();
        self.probe.abort();
    }
}

impl Endpoints {
    /// Runs until `stop`.
    pub async fn run(self, mut inputs: Inputs) {
        let (events, mut received) = mpsc::unbounded_channel();
        let mut state = State::new(self.settings.decide.clone());
        let mut watching: BTreeMap<String, Watching> = BTreeMap::new();
        let mut kubeconfig = Arc::new(Kubeconfig::default());
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut first = Some(Event::Leading(*inputs.leading.borrow_and_update(), Instant::now()));
        loop {
            let event = match first.take() {
                Some(event) => event,
                None => tokio::select! {
                    _ = inputs.stop.changed() => break,
                    Ok(()) = inputs.leading.changed() => Event::Leading(*inputs.leading.borrow_and_update(), Instant::now()),
                    Ok(()) = inputs.rendered.changed() => {
                        let plan = inputs.rendered.borrow_and_update().clone();
                        let Some(plan) = plan else { continue };
                        match self.access.kubeconfig().await {
                            Ok(read) => kubeconfig = Arc::new(read),
                            Err(e) => warn!(error = %format!("{e:#}"), "endpoints: cannot read member credentials"),
                        }
                        rendered(&plan, &kubeconfig)
                    }
                    Some(event) = received.recv() => event,
                    _ = tick.tick() => {
                        self.board.update(|s| s.services = state.status());
                        Event::Tick(Instant::now())
                    }
                },
            };
            for action in state.step(event) {
                self.act(action, &kubeconfig, &mut watching, &events).await;
            }
        }
        drop(watching);
        info!("endpoints loop stopped");
    }

    async fn act(
        &self,
        action: Action,
        kubeconfig: &Arc<Kubeconfig>,
        watching: &mut BTreeMap<String, Watching>,
        events: &mpsc::UnboundedSender<Event>,
    ) {
        match action {
            Action::Watch(clusters) => {
                watching.retain(|c, _| clusters.contains(c));
                let new: Vec<String> = clusters.into_iter().filter(|c| !watching.contains_key(c)).collect();
                for cluster in new {
                    let started = self.watch(&cluster, kubeconfig, events).await;
                    watching.insert(cluster, started);
                }
            }
            Action::Rewatch(cluster) => {
                let started = self.watch(&cluster, kubeconfig, events).await;
                watching.insert(cluster, started);
            }
            write => self.write(write, kubeconfig, events),
        }
    }

    /// Starts watching and probing one member.
    async fn watch(&self, cluster: &str, kubeconfig: &Kubeconfig, events: &mpsc::UnboundedSender<Event>) -> Watching {
        let client =
            crate::clusters::connect::client(kubeconfig, cluster, self.access.trust, WATCH_READ_TIMEOUT, None).await;
        let watch = match client {
            Ok(client) => tokio::spawn(watch_member(client, cluster.to_owned(), events.clone())),
            Err(e) => {
                warn!(cluster, error = %format!("{:#}", anyhow::Error::new(e)), "endpoints: cannot watch");
                tokio::spawn(async {})
            }
        };
        let probe = self.access.probe(self.settings.probe_interval);
        let (name, events) = (cluster.to_owned(), events.clone());
        let report = move |ok| events.send(Event::Probed { cluster: name.clone(), ok, now: Instant::now() }).is_ok();
        let probe = tokio::spawn(probe::every(
            self.access.pool.clone(),
            Arc::new(kubeconfig.clone()),
            cluster.to_owned(),
            probe,
            report,
        ));
        Watching { watch, probe }
    }

    /// Sends one write on its way; its outcome comes back as an event.
    fn write(&self, action: Action, kubeconfig: &Arc<Kubeconfig>, events: &mpsc::UnboundedSender<Event>) {
        let (pool, kubeconfig, events, fence) =
            (self.access.pool.clone(), kubeconfig.clone(), events.clone(), self.fence.clone());
        let (trust, timeout) = (self.access.trust, self.access.request_timeout);
        tokio::spawn(async move {
            let cluster = match &action {
                Action::Put { cluster, .. }
                | Action::Delete { cluster, .. }
                | Action::ReadCreated { cluster, .. }
                | Action::Condition { cluster, .. } => cluster.clone(),
                Action::Watch(_) | Action::Rewatch(_) => return,
            };
            let client = match pool.client(&kubeconfig, &cluster, trust, timeout, None).await {
                Ok(client) => client,
                Err(e) => return report(&events, &action, Err(format!("{:#}", anyhow::Error::new(e)))),
            };
            if !fence.holds() && !matches!(action, Action::ReadCreated { .. }) {
                return report(&events, &action, Err("not leading".into()));
            }
            let result = perform(client, &action).await;
            if let Err(e) = &result {
                warn!(cluster, error = %e, "endpoints: a write failed");
            }
            report(&events, &action, result);
        });
    }
}

/// The services of a render and the Push members this controller reaches.
fn rendered(plan: &Plan, kubeconfig: &Kubeconfig) -> Event {
    let (push, _) = crate::clusters::by_sync_mode(plan);
    let clusters: BTreeSet<String> =
        push.into_iter().filter(|c| kubeconfig.contexts.iter().any(|x| &x.name == c)).collect();
    Event::Rendered { services: multicluster::services(plan), clusters, now: Instant::now() }
}

/// One write against a member: the resourceVersion written (a Put), the creation time
/// read (ReadCreated, as a string in the error-free case), or why it failed.
async fn perform(client: kube::Client, action: &Action) -> Result<Option<String>, String> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match action {
        Action::Put { object, .. } => {
            let (namespace, name) = key_of(object);
            let api: Api<EndpointSlice> = Api::namespaced(client, &namespace);
            let written = api.patch(&name, &params, &Patch::Apply(object)).await.map_err(|e| e.to_string())?;
            Ok(written.metadata.resource_version)
        }
        Action::Delete { key: (namespace, name), .. } => {
            let api: Api<EndpointSlice> = Api::namespaced(client, namespace);
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => Ok(None),
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
                Err(e) => Err(e.to_string()),
            }
        }
        Action::ReadCreated { key: (namespace, name), .. } => {
            let api: Api<DynamicObject> = Api::namespaced_with(client, namespace, &service_export());
            let export = api.get(name).await.map_err(|e| e.to_string())?;
            Ok(export.metadata.creation_timestamp.map(|t| t.0.to_string()))
        }
        Action::Condition { key: (namespace, name), conflict, .. } => {
            let api: Api<DynamicObject> = Api::namespaced_with(client, namespace, &service_export());
            let condition = match conflict {
                Some(message) => {
                    json!({"type": "Conflict", "status": "True", "reason": "PortConflict", "message": message})
                }
                None => json!({"type": "Conflict", "status": "False", "reason": "NoConflict", "message": ""}),
            };
            let mut condition = condition;
            condition["lastTransitionTime"] = json!(k8s_openapi::jiff::Timestamp::now().to_string());
            let status = json!({
                "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceExport",
                "metadata": {"name": name, "namespace": namespace},
                "status": {"conditions": [condition]},
            });
            api.patch_status(name, &params, &Patch::Apply(status)).await.map_err(|e| e.to_string())?;
            Ok(None)
        }
        Action::Watch(_) | Action::Rewatch(_) => Ok(None),
    }
}

/// Turns a write's outcome into the event the decision takes.
fn report(events: &mpsc::UnboundedSender<Event>, action: &Action, result: Result<Option<String>, String>) {
    let now = Instant::now();
    let event = match action {
        Action::Put { cluster, object } => Event::Wrote {
            cluster: cluster.clone(),
            key: key_of(object),
            result: result.map(|v| v.and_then(|v| v.parse().ok()).or(Some(0))),
            now,
        },
        Action::Delete { cluster, key } => {
            Event::Wrote { cluster: cluster.clone(), key: key.clone(), result: result.map(|_| None), now }
        }
        Action::ReadCreated { cluster, key } => match result {
            Ok(Some(at)) => Event::Created { cluster: cluster.clone(), key: key.clone(), at, now },
            _ => return,
        },
        Action::Condition { .. } | Action::Watch(_) | Action::Rewatch(_) => return,
    };
    let _ = events.send(event);
}

fn key_of(object: &Value) -> Key {
    let field = |f: &str| object["metadata"][f].as_str().unwrap_or_default().to_owned();
    (field("namespace"), field("name"))
}

fn service_export() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("multicluster.x-k8s.io", "v1alpha1", "ServiceExport"))
}

/// Watches every EndpointSlice of a member that names a Service, and reports: a full
/// listing at start and after every re-list, then each change.
async fn watch_member(client: kube::Client, cluster: String, events: mpsc::UnboundedSender<Event>) {
    let api: Api<EndpointSlice> = Api::all(client);
    let config = watcher::Config::default().labels(SERVICE_NAME_LABEL);
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let mut listing = Vec::new();
    let as_value = |slice: EndpointSlice| serde_json::to_value(slice).unwrap_or(Value::Null);
    while let Some(item) = stream.next().await {
        let now = Instant::now();
        let event = match item {
            Ok(watcher::Event::Init) => {
                listing.clear();
                continue;
            }
            Ok(watcher::Event::InitApply(slice)) => {
                listing.push(as_value(slice));
                continue;
            }
            Ok(watcher::Event::InitDone) => {
                Event::Listed { cluster: cluster.clone(), objects: std::mem::take(&mut listing), now }
            }
            Ok(watcher::Event::Apply(slice)) => {
                Event::Applied { cluster: cluster.clone(), object: as_value(slice), now }
            }
            Ok(watcher::Event::Delete(slice)) => {
                Event::Deleted { cluster: cluster.clone(), object: as_value(slice), now }
            }
            Err(e) => {
                debug!(cluster, error = %e, "endpoints: watch interrupted; it resumes");
                continue;
            }
        };
        if events.send(event).is_err() {
            return;
        }
    }
}
