//! The fleet page (`/ui/`): every member and object, where the replicas are, what is
//! unhealthy, and why each object is where it is (the same `flotilla_core::why` the CLI
//! prints). Read-only, server-rendered HTML with one small script for live updates
//! (server-sent events); every asset is inside the binary. A Content-Security-Policy
//! allows no inline script or style and nothing from elsewhere. Off loopback a bearer
//! token is required (`--ui-token-file`, or a Kubernetes token: [`auth`]): as an
//! `Authorization` header, or the cookie `/ui/login` sets.

pub mod auth;
pub mod feed;
pub mod live;
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
    /// The bearer token a request must carry (this or `kubernetes` off loopback).
    pub token: Option<String>,
    /// Whether a Kubernetes token of the host cluster is accepted (TokenReview and
    /// SubjectAccessReview).
    pub kubernetes: bool,
    /// Time between readings of the members.
    pub every: std::time::Duration,
}

/// The page's token, read from `file`; none may be given only when `listen` is a
/// loopback address or `reviewed` (a Kubernetes token is checked instead), so that off
/// this machine only holders of a token read the fleet.
pub fn token(file: Option<&std::path::Path>, listen: &str, reviewed: bool) -> anyhow::Result<Option<String>> {
    use anyhow::Context;
    match file {
        Some(file) => {
            let token = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
            let token = token.trim().to_owned();
            anyhow::ensure!(
                auth::one_word(&token),
                "{}: the token must be one word of printable characters",
                file.display()
            );
            Ok(Some(token))
        }
        None if !loopback(listen) && !reviewed => anyhow::bail!(
            "{listen} is not a loopback address: give --ui-token-file (or, in the controller, --ui-kubernetes-auth), so that only holders of a token read the fleet"
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
    auth: auth::Auth,
    live: Option<Arc<live::Live>>,
}

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

impl Ui {
    /// A page over `snapshots`, open to what `auth` accepts.
    pub fn new(snapshots: watch::Receiver<Arc<Snapshot>>, auth: auth::Auth) -> Self {
        Self { snapshots, auth, live: None }
    }

    /// The same page, comparing a workload with the members on request.
    pub fn comparing(self, live: live::Live) -> Self {
        Self { live: Some(Arc::new(live)), ..self }
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
            .route("/ui/previews", get(views::previews))
            .route("/ui/history", get(views::history))
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

/// Security headers on every answer; 401 without a token where one is required, 403
/// for a Kubernetes user not allowed to read the fleet.
async fn guard(State(ui): State<Ui>, request: Request, next: Next) -> Response {
    let open = request.uri().path() == "/ui/login";
    let started = std::time::Instant::now();
    let verdict = match open {
        true => auth::Verdict::Allowed,
        false => ui.auth.judge(auth::presented(&request).as_deref()).await,
    };
    let mut response = match verdict {
        auth::Verdict::Allowed => next.run(request).await,
        auth::Verdict::Unauthenticated => {
            (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], "a token is required: see /ui/login")
                .into_response()
        }
        auth::Verdict::Forbidden(user) => {
            let why = format!("{user:?} may not get fleets.flotilla.dev (a Role granting it is in docs/ui.md)");
            (StatusCode::FORBIDDEN, why).into_response()
        }
        auth::Verdict::Unavailable(why) => {
            tracing::warn!(error = why, "the fleet page cannot review a token");
            (StatusCode::SERVICE_UNAVAILABLE, "the host cluster cannot review the token now").into_response()
        }
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

async fn overview(State(ui): State<Ui>, Query(filter): Query<Filter>) -> Html<String> {
    Html(pages::overview(&ui.now().fleet, &filter).into_string())
}

/// A workload page's query: `live=1` compares it with the members (`member=` one).
#[derive(Debug, Default, serde::Deserialize)]
struct Asked {
    live: Option<String>,
    member: Option<String>,
}

async fn namespaced(
    State(ui): State<Ui>,
    Path((kind, namespace, name)): Path<(String, String, String)>,
    Query(asked): Query<Asked>,
) -> Response {
    workload(&ui, &ObjectKey::new("", &kind, Some(&namespace), &name), asked).await
}

async fn cluster_scoped(
    State(ui): State<Ui>,
    Path((kind, name)): Path<(String, String)>,
    Query(asked): Query<Asked>,
) -> Response {
    workload(&ui, &ObjectKey::new("", &kind, None, &name), asked).await
}

async fn workload(ui: &Ui, wanted: &ObjectKey, asked: Asked) -> Response {
    let now = ui.now();
    let found = now
        .fleet
        .workloads
        .iter()
        .find(|w| w.key.kind == wanted.kind && w.key.namespace == wanted.namespace && w.key.name == wanted.name);
    let explained = found
        .zip(now.plan.as_ref())
        .and_then(|(w, plan)| flotilla_core::why::explain(plan, &now.state, &w.key).map(|e| (w, e)));
    let Some((w, e)) = explained else {
        let what = model::path(wanted);
        let page = pages::not_found(&now.fleet, &format!("No placed object {what}"));
        return (StatusCode::NOT_FOUND, Html(page.into_string())).into_response();
    };
    let live = match (&ui.live, &now.plan, asked.live.is_some()) {
        (Some(live), Some(plan), true) => {
            let placed: Vec<String> = w.cells.keys().cloned().collect();
            let (members, left_out) = live::chosen(&placed, asked.member.as_deref());
            let (live, plan, key) = (live.clone(), plan.clone(), w.key.clone());
            // The observation's futures are not `Send` (their stream closures borrow
            // across awaits), so it runs on a blocking thread of its own, on this runtime.
            let handle = tokio::runtime::Handle::current();
            let compared = tokio::task::spawn_blocking(move || {
                handle.block_on(async move { live.compare(&plan, &key, &members).await })
            })
            .await
            .unwrap_or_else(|e| vec![(String::from("(all)"), Err(format!("the comparison stopped: {e}")))]);
            Some(live::section(&compared, left_out))
        }
        (Some(_), Some(_), false) => Some(html_link(&pages::workload_url(w))),
        _ => None,
    };
    Html(pages::workload(&now.fleet, w, &e, now.status.as_ref(), live).into_string()).into_response()
}

/// The link that asks for the live comparison.
fn html_link(url: &str) -> maud::Markup {
    maud::html! {
        h2 { "Live" }
        p { a href=(format!("{url}?live=1")) { "Compare with the members" } " (a server-side dry run in each, at most " (live::AT_MOST) ")" }
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
/// accepted; 401 otherwise. A token that is not one cookie-safe word is refused.
async fn login(State(ui): State<Ui>, body: String) -> Response {
    if !ui.auth.required() {
        return axum::response::Redirect::to("/ui/").into_response();
    }
    let given = form_urlencoded::parse(body.as_bytes()).find(|(k, _)| k == "token").map(|(_, v)| v.into_owned());
    let given = given.filter(|g| auth::one_word(g));
    match ui.auth.judge(given.as_deref()).await {
        auth::Verdict::Allowed => {
            let cookie =
                format!("{}={}; Path=/ui; HttpOnly; SameSite=Strict", auth::TOKEN_COOKIE, given.unwrap_or_default());
            (StatusCode::SEE_OTHER, [(header::SET_COOKIE, cookie), (header::LOCATION, "/ui/".to_owned())])
                .into_response()
        }
        _ => (StatusCode::UNAUTHORIZED, "wrong token").into_response(),
    }
}
