//! HTTP: `/healthz`, `/readyz`, `/metrics` and `/status` on one listener, and push
//! webhooks ([`webhook`]) on the same one or, with `--webhook-listen`, on their own (so
//! exposing webhooks through an Ingress exposes nothing else).
//!
//! Every listener is served with bounds a hostile client cannot stretch: the request
//! head must arrive within [`Limits::header_read`], a request is answered or dropped
//! within [`Limits::request`], a connection lives at most [`Limits::connection`], and at
//! most [`Limits::max_connections`] are open at once. A new connection always gets in
//! while any open one is idle (no request in progress: a head still arriving, or a
//! keep-alive wait): the oldest idle connection is closed for it ([`connections`]). So
//! clients that hold sockets open, however many and however often they reconnect,
//! cannot keep a probe or a scrape from being answered; only requests being served at
//! that moment are never cut.

mod connections;
pub mod webhook;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tracing::{debug, warn};

use crate::status::Board;

/// Bounds on what a client may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Time to send a request's head (line and headers).
    pub header_read: Duration,
    /// Time to read the body and answer.
    pub request: Duration,
    /// Lifetime of one connection, keep-alive included.
    pub connection: Duration,
    /// Connections open at once.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read: Duration::from_secs(5),
            request: Duration::from_secs(10),
            connection: Duration::from_secs(60),
            max_connections: 256,
        }
    }
}

/// What the status endpoints read.
#[derive(Clone)]
pub struct Endpoints {
    /// The controller's status.
    pub board: Arc<Board>,
    /// The metrics registry.
    pub registry: Arc<Registry>,
}

/// `/healthz`, `/readyz`, `/metrics` and `/status`.
pub fn router(endpoints: Endpoints) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics))
        .route("/status", get(status))
        .with_state(endpoints)
}

async fn ready(State(endpoints): State<Endpoints>) -> Response {
    let status = endpoints.board.snapshot();
    if status.ready {
        return "ready".into_response();
    }
    let why = match () {
        _ if !status.leading => "standing by: another instance leads",
        _ if status.source_unavailable.is_some() => "the branch cannot be fetched",
        _ => "no revision reconciled yet",
    };
    (StatusCode::SERVICE_UNAVAILABLE, why).into_response()
}

async fn metrics(State(endpoints): State<Endpoints>) -> Response {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &endpoints.registry) {
        Ok(()) => ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text)
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn status(State(endpoints): State<Endpoints>) -> Response {
    let body = serde_json::to_string(&endpoints.board.snapshot()).expect("the status serialises");
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Serves `app` on `listener` within `limits`, until the task is dropped.
pub async fn serve(listener: TcpListener, app: Router, limits: Limits) {
    let app = app.layer(axum::middleware::from_fn(move |request, next: axum::middleware::Next| async move {
        match tokio::time::timeout(limits.request, next.run(request)).await {
            Ok(response) => response,
            Err(_) => (StatusCode::REQUEST_TIMEOUT, "request timed out").into_response(),
        }
    }));
    let open = Arc::new(connections::Open::new(limits.max_connections));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, mostly: wait rather than spin.
                warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(admitted) = open.admit() else {
            debug!(%peer, "every connection is serving a request; closing a new connection");
            continue;
        };
        // Each request counts as being served on its connection until it is answered;
        // the router itself is shared by every connection.
        let (busy, inner) = (admitted.busy(), hyper_util::service::TowerToHyperService::new(app.clone()));
        let service = hyper::service::service_fn(move |request| {
            let serving = busy.serving();
            let answered = hyper::service::Service::call(&inner, request);
            async move {
                let response = answered.await;
                drop(serving);
                response
            }
        });
        let id = admitted.id();
        let task = tokio::spawn(async move {
            let _admitted = admitted;
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read)
                .serve_connection(TokioIo::new(stream), service);
            if let Ok(Err(e)) = tokio::time::timeout(limits.connection, connection).await {
                debug!(%peer, error = %e, "connection ended with an error");
            }
        });
        open.record(id, task.abort_handle());
    }
}
