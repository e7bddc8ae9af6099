//! Push webhooks from GitHub (`X-Hub-Signature-256`), GitLab (`X-Gitlab-Token`) and
//! anything that can sign a body (`X-Flotilla-Signature-256`, the same HMAC-SHA256
//! scheme). A delivery with a bad signature, a body over 1 MiB or a malformed payload is
//! refused and counted, and never triggers a fetch.

use std::sync::Arc;

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
    let signed = match hooks.kind {
        Kind::Github | Kind::Gitea => signature_valid(&hooks.secret, &body, header(&headers, "x-hub-signature-256")),
        Kind::Gitlab => token_valid(&hooks.secret, header(&headers, "x-gitlab-token")),
    };
    if !signed {
        count("bad_signature");
        return (StatusCode::UNAUTHORIZED, "bad signature").into_response();
    }
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
    deliver(&hooks, "github", signed, &body)
}

async fn gitlab(State(hooks): State<Arc<Webhooks>>, headers: HeaderMap, body: Bytes) -> Response {
    let signed = |secret: &[u8]| token_valid(secret, header(&headers, "x-gitlab-token"));
    deliver(&hooks, "gitlab", signed, &body)
}

async fn generic(State(hooks): State<Arc<Webhooks>>, headers: HeaderMap, body: Bytes) -> Response {
    let signed = |secret: &[u8]| signature_valid(secret, &body, header(&headers, "x-flotilla-signature-256"));
    deliver(&hooks, "generic", signed, &body)
}

/// Checks the signature, then the payload (a push to the watched branch), then wakes
/// the controller.
fn deliver(hooks: &Webhooks, source: &str, signed: impl Fn(&[u8]) -> bool, body: &[u8]) -> Response {
    let count = counter(&hooks.metrics, source);
    if !signed(&hooks.secret) {
        count("bad_signature");
        return (StatusCode::UNAUTHORIZED, "bad signature").into_response();
    }
    let Ok(payload) = serde_json::from_slice::<serde_json::Value>(body) else {
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
}
