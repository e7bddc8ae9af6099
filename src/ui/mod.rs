//! The fleet page (`/ui/`): every member and object, where the replicas are, what is
//! unhealthy, and why each object is where it is (the same `flotilla_core::why` the CLI
//! prints). Read-only, server-rendered HTML with one small script for live updates
//! (server-sent events); every asset is inside the binary. A Content-Security-Policy
//! allows no inline script or style and nothing from elsewhere. Off loopback a bearer
//! token is required (`--ui-token-file`): as an `Authorization` header, or the cookie
//! `/ui/login` sets.

pub mod feed;
pub mod model;
mod pages;
mod views;

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use flotilla_core::model::{ClusterState, ObjectKey, Plan};
use tokio::sync::watch;

use crate::status::Status;
use model::{Filter, Fleet};

/// What the page shows: the fleet, and the plan and state it was built from (for `why`).
#[derive(Default)]
pub struct Snapshot {
    /// The fleet.
    pub fleet: Fleet,
    /// The plan (none before the controller's first render).
    pub plan: Option<Arc<Plan>>,
    /// The cluster state it was rendered with.
    pub state: ClusterState,
    /// The controller's status (`/status`), when a controller serves the page: each
    /// member's target and applied revision, rollouts, failover, services.
    pub status: Option<Status>,
}

/// The fleet page in the controller (`flotilla run --ui`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The bearer token a request must carry (required off loopback).
    pub token: Option<String>,
    /// Time between readings of the members.
    pub every: std::time::Duration,
}

/// The page's token, read from `file`; none may be given only when `listen` is a
/// loopback address, so that off this machine only holders of the token read the fleet.
pub fn token(file: Option<&std::path::Path>, listen: &str) -> anyhow::Result<Option<String>> {
    use anyhow::Context;
    match file {
        Some(file) => {
            let token = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
            let token = token.trim().to_owned();
            anyhow::ensure!(
                !token.is_empty() && !token.contains(|c: char| c.is_whitespace() || c.is_control() || c == ';'),
                "{}: the token must be one word of printable characters",
                file.display()
            );
            Ok(Some(token))
        }
        None if !loopback(listen) => anyhow::bail!(
            "{listen} is not a loopback address: give --ui-token-file, so that only holders of the token read the fleet"
        ),
        None => Ok(None),
    }
}

/// Whether `listen` (`HOST:PORT`) is a loopback address; a name other than
/// `localhost` is not taken as one.
fn loopback(listen: &str) -> bool {
    match listen.parse::<std::net::SocketAddr>() {
        Ok(address) => address.ip().is_loopback(),
        Err(_) => listen.rsplit_once(':').is_some_and(|(host, _)| host == "localhost"),
    }
}

/// The page's state: the newest snapshot, watched by every open page.
#[derive(Clone)]
pub struct Ui {
    snapshots: watch::Receiver<Arc<Snapshot>>,
    token: Option<Arc<str>>,
}

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
const TOKEN_COOKIE: &str = "flotilla_ui_token";

impl Ui {
    /// A page over `snapshots`, requiring `token` when given.
    pub fn new(snapshots: watch::Receiver<Arc<Snapshot>>, token: Option<String>) -> Self {
        Self { snapshots, token: token.map(Arc::from) }
    }

    /// `/ui/…`.
    pub fn router(self) -> Router {
        let guarded = self.clone();
        Router::new()
            .route("/ui/", get(overview))
            .route("/ui", get(|| async { axum::response::Redirect::permanent("/ui/") }))
            .route("/ui/workload/{kind}/{namespace}/{name}", get(namespaced))
            .route("/ui/workload/{kind}/{name}", get(cluster_scoped))
            .route("/ui/member/{name}", get(member))
            .route("/ui/rollouts", get(views::rollouts))
            .route("/ui/failover", get(views::failover))
            .route("/ui/services", get(views::services))
            .route("/ui/events", get(events))
            .route("/ui/static/ui.css", get(|| async { asset("text/css", include_str!("assets/ui.css")) }))
            .route("/ui/static/live.js", get(|| async { asset("text/javascript", include_str!("assets/live.js")) }))
            .route("/ui/login", get(login_form).post(login))
            .layer(axum::middleware::from_fn_with_state(guarded, guard))
            .with_state(self)
    }

    fn now(&self) -> Arc<Snapshot> {
        self.snapshots.borrow().clone()
    }
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

/// Security headers on every answer; 401 without the token where one is required.
async fn guard(State(ui): State<Ui>, request: Request, next: Next) -> Response {
    let open = request.uri().path() == "/ui/login";
    let started = std::time::Instant::now();
    let mut response = match &ui.token {
        Some(token) if !open && !presented(&request, token) => {
            (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], "a token is required: see /ui/login")
                .into_response()
        }
        _ => next.run(request).await,
    };
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    // The time the page took on the server (every page is rendered whole before it is
    // sent), for browsers' developer tools and the benchmark.
    let took = format!("render;dur={:.1}", started.elapsed().as_secs_f64() * 1e3);
    if let Ok(took) = HeaderValue::from_str(&took) {
        headers.insert(HeaderName::from_static("server-timing"), took);
    }
    response
}

/// Whether the request carries `token`: `Authorization: Bearer`, or the login cookie.
fn presented(request: &Request, token: &str) -> bool {
    let same = |given: &str| {
        use subtle_compare::equal;
        equal(given.as_bytes(), token.as_bytes())
    };
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(same);
    let cookie = request
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(';').filter_map(|c| c.trim().split_once('=')).any(|(k, v)| k == TOKEN_COOKIE && same(v)));
    bearer || cookie
}

/// Comparing a secret in time that does not depend on where it differs.
mod subtle_compare {
    pub fn equal(a: &[u8], b: &[u8]) -> bool {
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
    }
}

async fn overview(State(ui): State<Ui>, Query(filter): Query<Filter>) -> Html<String> {
    Html(pages::overview(&ui.now().fleet, &filter).into_string())
}

async fn namespaced(State(ui): State<Ui>, Path((kind, namespace, name)): Path<(String, String, String)>) -> Response {
    workload(&ui, &kind, Some(&namespace), &name)
}

async fn cluster_scoped(State(ui): State<Ui>, Path((kind, name)): Path<(String, String)>) -> Response {
    workload(&ui, &kind, None, &name)
}

fn workload(ui: &Ui, kind: &str, namespace: Option<&str>, name: &str) -> Response {
    let now = ui.now();
    let found = now
        .fleet
        .workloads
        .iter()
        .find(|w| w.key.kind == kind && w.key.namespace.as_deref() == namespace && w.key.name == name);
    let explained = found
        .zip(now.plan.as_ref())
        .and_then(|(w, plan)| flotilla_core::why::explain(plan, &now.state, &w.key).map(|e| (w, e)));
    match explained {
        Some((w, e)) => Html(pages::workload(&now.fleet, w, &e).into_string()).into_response(),
        None => {
            let what = model::path(&ObjectKey::new("", kind, namespace, name));
            (
                StatusCode::NOT_FOUND,
                Html(pages::not_found(&now.fleet, &format!("No placed object {what}")).into_string()),
            )
                .into_response()
        }
    }
}

async fn member(State(ui): State<Ui>, Path(name): Path<String>) -> Response {
    let now = ui.now();
    if !now.fleet.members.contains_key(&name) {
        let page = pages::not_found(&now.fleet, &format!("No member {name}"));
        return (StatusCode::NOT_FOUND, Html(page.into_string())).into_response();
    }
    Html(pages::member(&now.fleet, &name, now.status.as_ref()).into_string()).into_response()
}

/// One event per change of the fleet (its revision and a count of changes).
async fn events(State(ui): State<Ui>) -> Sse<impl futures::Stream<Item = Result<Event, Infallible>>> {
    let stream = futures::stream::unfold((ui.snapshots.clone(), 0u64), |(mut rx, n)| async move {
        rx.changed().await.ok()?;
        let revision = rx.borrow_and_update().fleet.revision.clone();
        Some((Ok(Event::default().data(format!("{} {revision}", n + 1))), (rx, n + 1)))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

async fn login_form() -> Html<&'static str> {
    Html(concat!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Sign in · flotilla</title>",
        "<link rel=\"stylesheet\" href=\"/ui/static/ui.css\"></head><body><main><h1>Sign in</h1>",
        "<form method=\"post\" action=\"/ui/login\"><label>Token <input type=\"password\" name=\"token\" autocomplete=\"current-password\"></label> ",
        "<button type=\"submit\">Sign in</button></form></main></body></html>"
    ))
}

/// Sets the token cookie (HttpOnly, SameSite=Strict, the page's path) when the token is
/// right; 401 otherwise.
async fn login(State(ui): State<Ui>, body: String) -> Response {
    let given = form_urlencoded::parse(body.as_bytes()).find(|(k, _)| k == "token").map(|(_, v)| v.into_owned());
    match (&ui.token, given) {
        (Some(token), Some(given)) if subtle_compare::equal(given.as_bytes(), token.as_bytes()) => {
            let cookie = format!("{TOKEN_COOKIE}={given}; Path=/ui; HttpOnly; SameSite=Strict");
            (StatusCode::SEE_OTHER, [(header::SET_COOKIE, cookie), (header::LOCATION, "/ui/".to_owned())])
                .into_response()
        }
        (None, _) => axum::response::Redirect::to("/ui/").into_response(),
        _ => (StatusCode::UNAUTHORIZED, "wrong token").into_response(),
    }
}
