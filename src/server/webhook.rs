//! Push webhooks from GitHub (`X-Hub-Signature-256`), GitLab (`X-Gitlab-Token`) and
//! anything that can sign a body (`X-Flotilla-Signature-256`, the same HMAC-SHA256
//! scheme). A delivery with a bad signature, a body over 1 MiB or a malformed payload is
//! refused and counted, and never triggers a fetch.
//!
//! As forges send them: a signed `ping` (GitHub and Gitea send one when a hook is made,
//! and on "Redeliver") is answered 200; a body sent form-encoded (`payload=<JSON>`, the
//! other content type GitHub and Gitea offer) is read as JSON; a delivery whose id
//! (`X-GitHub-Delivery`, `X-Gitea-Delivery`, `X-Gitlab-Event-UUID`) was already taken is
//! answered 200 and does nothing again, so a captured delivery cannot be replayed.

use std::borrow::Cow;
use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::metrics::{Metrics, WebhookLabels};

/// Largest webhook body read.
const MAX_BODY: usize = 1 << 20;

/// Delivery ids remembered against replays (a day of busy hooks).
const REMEMBERED: usize = 4_096;

/// The most recent delivery ids taken, oldest first.
#[derive(Default)]
pub struct Deliveries {
    seen: Mutex<(VecDeque<String>, BTreeSet<String>)>,
}

impl Deliveries {
    /// Takes `id`: `false` when it was taken already (a replay).
    fn take(&self, id: &str) -> bool {
        let mut guard = self.seen.lock().expect("deliveries lock");
        let (order, set) = &mut *guard;
        if !set.insert(id.to_owned()) {
            return false;
        }
        order.push_back(id.to_owned());
        if order.len() > REMEMBERED {
            let oldest = order.pop_front().expect("not empty");
            set.remove(&oldest);
        }
        true
    }
}

/// What a signed delivery is, before its payload is read.
enum Signed<'a> {
    /// A forge testing the hook.
    Ping,
    /// A delivery already taken.
    Replayed,
    /// The JSON payload.
    Payload(Cow<'a, [u8]>),
}

/// Reads a signed delivery: a ping, a replay, or its JSON (decoded from a form body).
fn signed<'a>(headers: &HeaderMap, body: &'a [u8], deliveries: &Deliveries) -> Result<Signed<'a>, &'static str> {
    let event = header(headers, "x-github-event").or_else(|| header(headers, "x-gitea-event"));
    let id = ["x-github-delivery", "x-gitea-delivery", "x-gitlab-event-uuid", "x-flotilla-delivery"]
        .iter()
        .find_map(|name| header(headers, name));
    if id.is_some_and(|id| !deliveries.take(id)) {
        return Ok(Signed::Replayed);
    }
    if event == Some("ping") {
        return Ok(Signed::Ping);
    }
    let form = header(headers, "content-type").is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if !form {
        return Ok(Signed::Payload(Cow::Borrowed(body)));
    }
    let payload = form_urlencoded::parse(body).find(|(key, _)| key == "payload").map(|(_, value)| value);
    payload.map(|p| Signed::Payload(Cow::Owned(p.into_owned().into_bytes()))).ok_or("a form body without `payload`")
}

/// The payload to read, or the answer to a ping, a replay or a bad form (counted).
fn answered<'a>(
    read: Result<Signed<'a>, &'static str>,
    count: impl Fn(&str),
) -> Result<Cow<'a, [u8]>, (StatusCode, &'static str)> {
    let (outcome, answer) = match read {
        Ok(Signed::Payload(payload)) => return Ok(payload),
        Ok(Signed::Ping) => ("ping", (StatusCode::OK, "pong")),
        Ok(Signed::Replayed) => ("replayed", (StatusCode::OK, "already delivered")),
        Err(why) => ("malformed", (StatusCode::BAD_REQUEST, why)),
    };
    count(outcome);
    Err(answer)
}

/// What webhook deliveries need.
pub struct Webhooks {
    /// The shared secret (never empty: refused at start).
    pub secret: Vec<u8>,
    /// The branch a push must name.
    pub branch: String,
    /// Deliveries are counted here.
    pub metrics: Arc<Metrics>,
    /// Wakes the reconcile loop.
    pub push: Box<dyn Fn() + Send + Sync>,
    /// Delivery ids taken, against replays.
    pub deliveries: Deliveries,
}

/// What pull-request deliveries need (the preview loop).
pub struct PullHooks {
    /// Which forge sends them.
    pub kind: crate::forge::Kind,
    /// The shared secret.
    pub secret: Vec<u8>,
    /// Deliveries are counted here.
    pub metrics: Arc<Metrics>,
    /// Hands a pull request to the preview loop.
    pub deliver: Box<dyn Fn(crate::forge::PullRequest) + Send + Sync>,
    /// Delivery ids taken, against replays.
    pub deliveries: Deliveries,
}

/// The pull-request webhook route, `/webhook/pulls`: GitHub and Gitea sign with
/// `X-Hub-Signature-256`, GitLab sends its token.
pub fn pulls_router(hooks: PullHooks) -> Router {
    Router::new()
        .route("/webhook/pulls", post(pulls))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(Arc::new(hooks))
}

async fn pulls(State(hooks): State<Arc<PullHooks>>, headers: HeaderMap, body: Bytes) -> Response {
    use crate::forge::{Kind, hooks as forge_hooks};
    let count = counter(&hooks.metrics, "pulls");
    let valid = match hooks.kind {
        Kind::Github | Kind::Gitea => signature_valid(&hooks.secret, &body, header(&headers, "x-hub-signature-256")),
        Kind::Gitlab => token_valid(&hooks.secret, header(&headers, "x-gitlab-token")),
    };
    if !valid {
        count("bad_signature");
        return (StatusCode::UNAUTHORIZED, "bad signature").into_response();
    }
    let body = match answered(signed(&headers, &body, &hooks.deliveries), &count) {
        Ok(payload) => payload,
        Err(answer) => return answer.into_response(),
    };
    let event = header(&headers, forge_hooks::event_header(hooks.kind));
    match forge_hooks::read(hooks.kind, event, &body) {
        Ok(Some(pull)) => {
            count("accepted");
            (hooks.deliver)(pull);
            (StatusCode::ACCEPTED, "planning").into_response()
        }
        Ok(None) => {
            count("ignored");
            (StatusCode::ACCEPTED, "not a pull request event").into_response()
        }
        Err(why) => {
            count("malformed");
            (StatusCode::BAD_REQUEST, why).into_response()
        }
    }
}

/// Counts deliveries from `source` by outcome.
fn counter<'a>(metrics: &'a Metrics, source: &'a str) -> impl Fn(&str) + 'a {
    move |outcome| {
        metrics.webhooks.get_or_create(&WebhookLabels { source: source.into(), outcome: outcome.into() }).inc();
    }
}

/// The webhook routes.
pub fn router(webhooks: Webhooks) -> Router {
    Router::new()
        .route("/webhook/github", post(github))
        .route("/webhook/gitlab", post(gitlab))
        .route("/webhook/generic", post(generic))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(Arc::new(webhooks))
}

/// Verifies `sha256=<hex>` against HMAC-SHA256(secret, body), in constant time.
pub fn signature_valid(secret: &[u8], body: &[u8], header: Option<&str>) -> bool {
    let Some(hex_sig) = header.and_then(|h| h.strip_prefix("sha256=")) else { return false };
    let Ok(expected) = hex::decode(hex_sig) else { return false };
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

/// Compares a shared token in constant time (by comparing HMACs of both).
fn token_valid(secret: &[u8], token: Option<&str>) -> bool {
    let Some(token) = token else { return false };
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(b"flotilla-token-compare").expect("any key length");
    mac.update(secret);
    let expected = mac.finalize().into_bytes();
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(b"flotilla-token-compare").expect("any key length");
    mac.update(token.as_bytes());
    mac.verify_slice(&expected).is_ok()
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

async fn github(State(hooks): State<Arc<Webhooks>>, headers: HeaderMap, body: Bytes) -> Response {
    let signed = |secret: &[u8]| signature_valid(secret, &body, header(&headers, "x-hub-signature-256"));
    deliver(&hooks, "github", signed, &headers, &body)
}

async fn gitlab(State(hooks): State<Arc<Webhooks>>, headers: HeaderMap, body: Bytes) -> Response {
    let signed = |secret: &[u8]| token_valid(secret, header(&headers, "x-gitlab-token"));
    deliver(&hooks, "gitlab", signed, &headers, &body)
}

async fn generic(State(hooks): State<Arc<Webhooks>>, headers: HeaderMap, body: Bytes) -> Response {
    let signed = |secret: &[u8]| signature_valid(secret, &body, header(&headers, "x-flotilla-signature-256"));
    deliver(&hooks, "generic", signed, &headers, &body)
}

/// Checks the signature, then the payload (a push to the watched branch), then wakes
/// the controller.
fn deliver(
    hooks: &Webhooks,
    source: &str,
    valid: impl Fn(&[u8]) -> bool,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let count = counter(&hooks.metrics, source);
    if !valid(&hooks.secret) {
        count("bad_signature");
        return (StatusCode::UNAUTHORIZED, "bad signature").into_response();
    }
    let body = match answered(signed(headers, body, &hooks.deliveries), &count) {
        Ok(payload) => payload,
        Err(answer) => return answer.into_response(),
    };
    let Ok(payload) = serde_json::from_slice::<serde_json::Value>(&body) else {
        count("malformed");
        return (StatusCode::BAD_REQUEST, "the payload is not JSON").into_response();
    };
    let branch_ref = format!("refs/heads/{}", hooks.branch);
    match payload.get("ref").and_then(|r| r.as_str()) {
        Some(r) if r == branch_ref => {
            count("accepted");
            (hooks.push)();
            (StatusCode::ACCEPTED, "fetching").into_response()
        }
        Some(_) => {
            count("other_branch");
            (StatusCode::ACCEPTED, "not the watched branch").into_response()
        }
        None if source == "generic" => {
            count("accepted");
            (hooks.push)();
            (StatusCode::ACCEPTED, "fetching").into_response()
        }
        None => {
            count("malformed");
            (StatusCode::BAD_REQUEST, "no ref in the payload").into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_signatures_are_checked() {
        let secret = b"It's a Secret to Everybody";
        let body = b"Hello, World!";
        // The example from GitHub's webhook documentation.
        let good = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(signature_valid(secret, body, Some(good)));
        assert!(!signature_valid(secret, b"Hello, World?", Some(good)));
        assert!(!signature_valid(b"other", body, Some(good)));
        assert!(!signature_valid(secret, body, Some("sha1=abc")));
        assert!(!signature_valid(secret, body, None));
        assert!(token_valid(b"t0ken", Some("t0ken")));
        assert!(!token_valid(b"t0ken", Some("t0ke")));
    }

    fn sign(secret: &[u8], body: &[u8]) -> String {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).unwrap();
        mac.update(body);
        format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[tokio::test]
    async fn pings_forms_and_replays_are_handled_as_forges_send_them() {
        let pushes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = pushes.clone();
        let hooks = Arc::new(Webhooks {
            secret: b"s3cret".to_vec(),
            branch: "main".into(),
            metrics: Arc::new(Metrics::new(&mut prometheus_client::registry::Registry::default())),
            push: Box::new(move || {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }),
            deliveries: Deliveries::default(),
        });
        let pushed = || pushes.load(std::sync::atomic::Ordering::SeqCst);
        let send = |pairs: Vec<(&'static str, String)>, body: &'static [u8]| {
            let pairs: Vec<(&'static str, &str)> = pairs.iter().map(|(n, v)| (*n, v.as_str())).collect();
            github(State(hooks.clone()), headers(&pairs), Bytes::from_static(body))
        };
        let ping: &[u8] = br#"{"zen": "Design for failure.", "hook_id": 1}"#;
        let signature = ("x-hub-signature-256", sign(b"s3cret", ping));
        let answer =
            send(vec![signature, ("x-github-event", "ping".into()), ("x-github-delivery", "d-1".into())], ping);
        assert_eq!(answer.await.status(), StatusCode::OK, "a signed ping is how users test a hook");
        assert_eq!(pushed(), 0);
        let unsigned = send(vec![("x-github-event", "ping".into())], ping).await;
        assert_eq!(unsigned.status(), StatusCode::UNAUTHORIZED, "an unsigned one is not");

        let push: &[u8] = br#"{"ref": "refs/heads/main"}"#;
        let with_id = |id: &str| {
            vec![
                ("x-hub-signature-256", sign(b"s3cret", push)),
                ("x-github-event", "push".into()),
                ("x-github-delivery", id.into()),
            ]
        };
        let forged = vec![("x-hub-signature-256", "sha256=00".into()), ("x-github-delivery", "d-2".into())];
        assert_eq!(send(forged, push).await.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(send(with_id("d-2"), push).await.status(), StatusCode::ACCEPTED, "a forged try used no id");
        assert_eq!(pushed(), 1);
        assert_eq!(send(with_id("d-2"), push).await.status(), StatusCode::OK, "a replay is answered");
        assert_eq!(pushed(), 1, "and does nothing again");

        // Form-encoded, as GitHub sends with content type application/x-www-form-urlencoded.
        let form: &[u8] = b"payload=%7B%22ref%22%3A+%22refs%2Fheads%2Fmain%22%7D";
        let pairs = vec![
            ("x-hub-signature-256", sign(b"s3cret", form)),
            ("content-type", "application/x-www-form-urlencoded".into()),
            ("x-github-delivery", "d-3".into()),
        ];
        assert_eq!(send(pairs, form).await.status(), StatusCode::ACCEPTED);
        assert_eq!(pushed(), 2);
        let empty: &[u8] = b"other=1";
        let pairs = vec![
            ("x-hub-signature-256", sign(b"s3cret", empty)),
            ("content-type", "application/x-www-form-urlencoded".into()),
        ];
        assert_eq!(send(pairs, empty).await.status(), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn only_the_most_recent_deliveries_are_remembered() {
        let deliveries = Deliveries::default();
        assert!(deliveries.take("first"));
        assert!(!deliveries.take("first"));
        for i in 0..REMEMBERED {
            assert!(deliveries.take(&format!("id-{i}")));
        }
        assert!(deliveries.take("first"), "forgotten after {REMEMBERED} others: memory stays bounded");
    }
}
