//! Which API a kind is served by (resolved once per run, with why it is not), and the
//! live state of the objects flotilla manages.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flotilla_core::model::ObjectKey;
use flotilla_core::render::MANAGED_LABEL;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersion;
use kube::discovery::Scope;
use serde_json::Value;

use super::ReconcileError;

/// Resolves apiVersion/kind to API resources once per run, and makes the APIs objects
/// are handled through (with the acting client).
pub struct Kinds<'a> {
    client: &'a Client,
    acting: &'a Client,
    known: BTreeMap<(String, String), Result<(ApiResource, Scope), Unresolved>>,
    served: Option<Arc<Served>>,
}

/// How long a group version's resource list read from a member is trusted by the next
/// runs against that member. A kind missing from a trusted list is read again at once.
const SERVED_FOR: Duration = Duration::from_secs(300);

/// The resources one group version serves, with their scope.
type Resources = Arc<[(ApiResource, Scope)]>;

/// What one member serves, kept between runs (the controller's client pool holds one
/// per member): each group version's resource list as last read, with when. A run takes
/// a kind from here without a request while the list is younger than [`SERVED_FOR`] and
/// names the kind; a kind it does not name is asked of the member again, so "not served"
/// (which lets prune forget an object) is only ever the member's live answer. Failures
/// are never kept. Each member has its own, so a slow member's discovery is only ever
/// on that member's path.
#[derive(Debug, Default)]
pub struct Served {
    lists: Mutex<HashMap<String, (Instant, Resources)>>,
}

impl Served {
    fn fresh(&self, api_version: &str, kind: &str) -> Option<Resources> {
        let lists = self.lists.lock().expect("served lock");
        let (read, list) = lists.get(api_version)?;
        (read.elapsed() < SERVED_FOR && list.iter().any(|(ar, _)| ar.kind == kind)).then(|| list.clone())
    }

    fn keep(&self, api_version: &str, list: Resources) {
        self.lists.lock().expect("served lock").insert(api_version.to_owned(), (Instant::now(), list));
    }

    /// Group versions kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lists.lock().expect("served lock").len()
    }
}

/// Why a kind did not resolve. Only a cluster that answers "not served" lets prune
/// forget an object of that kind; any other failure keeps it in the inventory.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unresolved {
    /// The API server answered that it does not serve the kind (404, or not in its group
    /// version's resource list).
    #[error("{0} is not served by this cluster")]
    NotServed(String),
    /// Discovery failed otherwise (unreachable, forbidden, a server error).
    #[error("discovery of {0} failed: {1}")]
    Failed(String, String),
}

impl Unresolved {
    fn of(kind: String, error: kube::Error) -> Self {
        match &error {
            kube::Error::Api(status) if status.code == 404 => Unresolved::NotServed(kind),
            kube::Error::Discovery(kube::error::DiscoveryError::MissingKind(_)) => Unresolved::NotServed(kind),
            _ => Unresolved::Failed(kind, error.to_string()),
        }
    }
}

impl<'a> Kinds<'a> {
    /// An empty cache: discovery through `client`, objects through `acting`.
    pub fn new(client: &'a Client, acting: &'a Client) -> Self {
        Self { client, acting, known: BTreeMap::new(), served: None }
    }

    /// The same, taking group versions from (and keeping them in) a member's [`Served`].
    pub fn keeping(client: &'a Client, acting: &'a Client, served: Option<Arc<Served>>) -> Self {
        Self { served, ..Self::new(client, acting) }
    }

    /// The API of `key`'s kind. The first kind asked of a group version reads that
    /// group version's whole resource list (one request), and every kind in it is known
    /// from then on.
    pub(super) async fn resolve(&mut self, key: &ObjectKey) -> Result<(ApiResource, Scope), Unresolved> {
        let id = (key.api_version.clone(), key.kind.clone());
        if let Some(found) = self.known.get(&id) {
            return found.clone();
        }
        let kept = self.served.as_ref().and_then(|s| s.fresh(&key.api_version, &key.kind));
        match kept {
            Some(list) => self.learn(&key.api_version, &list),
            None => self.discover(key).await,
        }
        let what = || format!("{} {}", key.api_version, key.kind);
        self.known.entry(id).or_insert_with(|| Err(Unresolved::NotServed(what()))).clone()
    }

    /// Reads `key`'s group version from the member (one request) and learns its kinds.
    async fn discover(&mut self, key: &ObjectKey) {
        let (group, version) = key.api_version.rsplit_once('/').unwrap_or(("", &key.api_version));
        match kube::discovery::pinned_group(self.client, &GroupVersion::gv(group, version)).await {
            Ok(served) => {
                let list: Resources =
                    served.versioned_resources(version).into_iter().map(|(ar, caps)| (ar, caps.scope)).collect();
                if let Some(kept) = &self.served {
                    kept.keep(&key.api_version, list.clone());
                }
                self.learn(&key.api_version, &list);
            }
            Err(e) => {
                let what = format!("{} {}", key.api_version, key.kind);
                self.known.insert((key.api_version.clone(), key.kind.clone()), Err(Unresolved::of(what, e)));
            }
        }
    }

    fn learn(&mut self, api_version: &str, list: &[(ApiResource, Scope)]) {
        for (ar, scope) in list {
            self.known
                .entry((api_version.to_owned(), ar.kind.clone()))
                .or_insert_with(|| Ok((ar.clone(), scope.clone())));
        }
    }

    /// An already resolved kind.
    pub(super) fn known(&self, key: &ObjectKey) -> Option<(ApiResource, Scope)> {
        self.known.get(&(key.api_version.clone(), key.kind.clone())).cloned().and_then(Result::ok)
    }

    /// CRDs applied in this run make new kinds resolvable.
    pub(super) fn forget_failures(&mut self) {
        self.known.retain(|_, v| v.is_ok());
    }

    pub(super) fn api(&self, ar: &ApiResource, scope: &Scope, namespace: Option<&str>) -> Api<DynamicObject> {
        match (scope, namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(self.acting.clone(), ns, ar),
            _ => Api::all_with(self.acting.clone(), ar),
        }
    }
}

/// Live objects flotilla manages, for the given keys: one LIST per kind (by the
/// managed label), so observing an unchanged cluster costs a handful of reads. Keys
/// whose kind the cluster does not serve come back as errors.
pub async fn observe(
    client: &Client,
    kinds: &mut Kinds<'_>,
    keys: impl IntoIterator<Item = &ObjectKey>,
) -> Result<(BTreeMap<ObjectKey, Value>, Vec<(ObjectKey, String)>), ReconcileError> {
    observe_into(client, kinds, keys, |_, value| Some(value)).await
}

/// Objects per page of a LIST, at least: a member's answer is held one page at a time.
const PAGE: usize = 500;
/// Objects per page of a LIST, at most, however many of a kind are wanted.
const MAX_PAGE: usize = 5_000;

/// The page size for a kind of which `wanted` objects are expected: one page more than
/// them, so that a member holding only what is wanted answers in one read (the API server
/// hands back a continue token when it stops at the limit with objects left to scan,
/// unmanaged ones included), within [`PAGE`]..=[`MAX_PAGE`].
fn page_size(wanted: usize) -> u32 {
    u32::try_from(wanted.saturating_add(1).clamp(PAGE, MAX_PAGE)).expect("MAX_PAGE fits")
}

/// [`observe`], keeping of each listed object only what `keep` makes of it (`None`:
/// nothing), page by page, so what is held is what the caller keeps.
pub async fn observe_into<'k, T>(
    client: &Client,
    kinds: &mut Kinds<'_>,
    keys: impl IntoIterator<Item = &'k ObjectKey>,
    mut keep: impl FnMut(&ObjectKey, Value) -> Option<T>,
) -> Result<(BTreeMap<ObjectKey, T>, Vec<(ObjectKey, String)>), ReconcileError> {
    let keys: Vec<&ObjectKey> = keys.into_iter().collect();
    let mut wanted: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for key in &keys {
        *wanted.entry((key.api_version.as_str(), key.kind.as_str())).or_default() += 1;
    }
    let mut live = BTreeMap::new();
    let mut unserved = Vec::new();
    let mut listed = BTreeSet::new();
    for key in keys {
        let ar = match kinds.resolve(key).await {
            Ok((ar, _)) => ar,
            Err(e) => {
                unserved.push((key.clone(), e.to_string()));
                continue;
            }
        };
        if !listed.insert((key.api_version.clone(), key.kind.clone())) {
            continue;
        }
        let all: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let limit = page_size(wanted[&(key.api_version.as_str(), key.kind.as_str())]);
        let mut params = ListParams::default().labels(&format!("{MANAGED_LABEL}=true")).limit(limit);
        loop {
            let page = all.list(&params).await.map_err(|e| ReconcileError::Discovery(key.kind.clone(), e))?;
            let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
            for item in page {
                let found = ObjectKey {
                    api_version: key.api_version.clone(),
                    kind: key.kind.clone(),
                    namespace: item.metadata.namespace.clone(),
                    name: item.metadata.name.clone().unwrap_or_default(),
                };
                // List items carry no apiVersion and kind of their own.
                let mut value = serde_json::to_value(item).expect("objects serialise");
                value["apiVersion"] = found.api_version.clone().into();
                value["kind"] = found.kind.clone().into();
                if let Some(kept) = keep(&found, value) {
                    live.insert(found, kept);
                }
            }
            match next {
                Some(token) => params.continue_token = Some(token),
                None => break,
            }
        }
    }
    Ok((live, unserved))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A member that serves apps/v1 Deployments and counts its discovery requests.
    async fn member() -> (Client, Arc<AtomicUsize>) {
        let asked = Arc::new(AtomicUsize::new(0));
        let counter = asked.clone();
        let list = serde_json::json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "apps/v1",
            "resources": [{"name": "deployments", "singularName": "deployment", "namespaced": true,
                           "kind": "Deployment", "verbs": ["get", "list", "patch"]}]});
        let app = axum::Router::new().route(
            "/apis/apps/v1",
            axum::routing::get(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                let body = list.to_string();
                async move { ([(http::header::CONTENT_TYPE, "application/json")], body) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let config = kube::Config::new(url.parse().unwrap());
        (Client::try_from(config).unwrap(), asked)
    }

    fn key(kind: &str) -> ObjectKey {
        ObjectKey {
            api_version: "apps/v1".into(),
            kind: kind.into(),
            namespace: Some("default".into()),
            name: "web".into(),
        }
    }

    #[tokio::test]
    async fn a_member_s_kinds_are_read_once_across_runs_and_a_missing_kind_is_asked_again() {
        let (client, asked) = member().await;
        let served = Arc::new(Served::default());
        for _ in 0..3 {
            let mut kinds = Kinds::keeping(&client, &client, Some(served.clone()));
            let (ar, scope) = kinds.resolve(&key("Deployment")).await.unwrap();
            assert_eq!((ar.plural.as_str(), scope), ("deployments", Scope::Namespaced));
        }
        assert_eq!(asked.load(Ordering::SeqCst), 1, "three runs, one discovery request");
        assert_eq!(served.len(), 1);

        // A kind the kept list does not name is the member's live answer, every run.
        for run in 1..=2 {
            let mut kinds = Kinds::keeping(&client, &client, Some(served.clone()));
            assert!(matches!(kinds.resolve(&key("Gadget")).await, Err(Unresolved::NotServed(_))));
            assert_eq!(asked.load(Ordering::SeqCst), 1 + run);
        }

        // Without a kept list (a one-shot run), each run asks.
        let mut kinds = Kinds::new(&client, &client);
        kinds.resolve(&key("Deployment")).await.unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn a_page_holds_what_is_wanted_and_one_more_within_bounds() {
        assert_eq!(page_size(0), 500);
        assert_eq!(page_size(499), 500);
        assert_eq!(page_size(500), 501, "500 wanted never reach the limit, so no continue token");
        assert_eq!(page_size(1_200), 1_201);
        assert_eq!(page_size(1_000_000), 5_000);
    }
}
