//! HTTP: `/healthz`, `/readyz`, `/metrics`, `/status`, and push webhooks from GitHub
//! (`X-Hub-Signature-256`), GitLab (`X-Gitlab-Token`) and anything that can sign a body
//! (`X-Flotilla-Signature-256`, the same HMAC-SHA256 scheme). A delivery with a bad
//! signature, a body over 1 MiB or a malformed payload is refused and counted, and
//! never triggers a fetch.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::Shared;
use super::metrics::WebhookLabels;

/// Largest webhook body read.
const MAX_BODY: usize = 1 << 20;

/// The router.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics))
        .route("/status", get(status))
        .route("/webhook/github", post(github))
        .route("/webhook/gitlab", post(gitlab))
        .route("/webhook/generic", post(generic))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(shared)
}

async fn ready(State(shared): State<Arc<Shared>>) -> Response {
    if shared.ready.load(std::sync::atomic::Ordering::Relaxed) {
        "ready".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "no revision applied yet").into_response()
    }
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &shared.registry) {
        Ok(()) => ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text)
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn status(State(shared): State<Arc<Shared>>) -> Response {
    let mut status =
        serde_json::to_value(shared.status.lock().expect("status lock").clone()).expect("status serialises");
    let autoscalers = serde_json::to_value(&*shared.autoscaler.lock().expect("autoscaler lock")).expect("serialises");
    status["autoscalers"] = autoscalers;
    ([(header::CONTENT_TYPE, "application/json")], status.to_string()).into_response()
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

async fn github(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let signed = |secret: &[u8]| signature_valid(secret, &body, header(&headers, "x-hub-signature-256"));
    deliver(&shared, "github", signed, &body)
}

async fn gitlab(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let signed = |secret: &[u8]| token_valid(secret, header(&headers, "x-gitlab-token"));
    deliver(&shared, "gitlab", signed, &body)
}

async fn generic(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let signed = |secret: &[u8]| signature_valid(secret, &body, header(&headers, "x-flotilla-signature-256"));
    deliver(&shared, "generic", signed, &body)
}

/// Checks the signature, then the payload (a push to the watched branch), then wakes
/// the controller.
fn deliver(shared: &Shared, source: &str, signed: impl Fn(&[u8]) -> bool, body: &[u8]) -> Response {
    let count = |outcome: &str| {
        shared.metrics.webhooks.get_or_create(&WebhookLabels { source: source.into(), outcome: outcome.into() }).inc();
    };
    let Some(secret) = &shared.webhook_secret else {
        count("disabled");
        return (StatusCode::NOT_FOUND, "webhooks are not configured").into_response();
    };
    if !signed(secret) {
        count("bad_signature");
        return (StatusCode::UNAUTHORIZED, "bad signature").into_response();
    }
    let Ok(payload) = serde_json::from_slice::<serde_json::Value>(body) else {
        count("malformed");
        return (StatusCode::BAD_REQUEST, "the payload is not JSON").into_response();
    };
    let branch_ref = format!("refs/heads/{}", shared.branch);
    match payload.get("ref").and_then(|r| r.as_str()) {
        Some(r) if r == branch_ref => {
            count("accepted");
            shared.trigger.notify_one();
            (StatusCode::ACCEPTED, "fetching").into_response()
        }
        Some(_) => {
            count("other_branch");
            (StatusCode::ACCEPTED, "not the watched branch").into_response()
        }
        None if source == "generic" => {
            count("accepted");
            shared.trigger.notify_one();
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
