//! A small JSON client for forge REST APIs: HTTPS with the system's roots (plain HTTP
//! only where the operator allowed it), a timeout per request, the token in a header
//! and never in a URL or an error.

use std::time::Duration;

use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// Largest response body read (a page of comments with long bodies fits).
const MAX_RESPONSE: usize = 16 << 20;
/// Time for one request, answer included.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A client for one forge API.
#[derive(Clone)]
pub struct Http {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// Header name and value carrying the token, if any.
    auth: Option<(&'static str, String)>,
}

/// A failed request: what was asked and what the forge said (its `message`, never the
/// token or the request headers).
#[derive(Debug, thiserror::Error)]
#[error("{method} {path}: {what}")]
pub struct ApiError {
    method: Method,
    path: String,
    what: String,
    /// The forge answered and refused (a 4xx other than 408 and 429): sending the same
    /// request again gets the same answer.
    refused: bool,
}

impl ApiError {
    /// Whether the forge refused the request itself (too long, invalid, forbidden), so
    /// the same request is not worth sending again.
    pub fn refused(&self) -> bool {
        self.refused
    }
}

impl Http {
    /// A client sending `auth` (header, value) with every request.
    pub fn new(auth: (&'static str, String)) -> anyhow::Result<Self> {
        Ok(Self { auth: Some(auth), ..Self::anonymous()? })
    }

    /// A client sending no token (a metric gate's Prometheus).
    pub fn anonymous() -> anyhow::Result<Self> {
        let connector =
            hyper_rustls::HttpsConnectorBuilder::new().with_native_roots()?.https_or_http().enable_http1().build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Self { client, auth: None })
    }

    /// Sends `body` (if any) to `url` and returns the parsed JSON answer (`Null` for an
    /// empty one). `path` names the request in errors.
    pub async fn json(&self, method: Method, url: &str, path: &str, body: Option<&Value>) -> Result<Value, ApiError> {
        let fail = |what: String| ApiError { method: method.clone(), path: path.to_owned(), what, refused: false };
        let payload = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
        let mut request = Request::builder().method(method.clone()).uri(url);
        if let Some((header, value)) = &self.auth {
            request = request.header(*header, value);
        }
        let request = request
            .header("accept", "application/json")
            .header("content-type", "application/json")
            .header("user-agent", concat!("flotilla/", env!("CARGO_PKG_VERSION")))
            .body(Full::new(payload))
            .map_err(|e| fail(format!("invalid request: {e}")))?;
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| fail(format!("{e}")))?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_RESPONSE)
                .collect()
                .await
                .map_err(|e| fail(format!("reading the answer: {e}")))?
                .to_bytes();
            Ok::<_, ApiError>((status, body))
        };
        let (status, body) =
            tokio::time::timeout(TIMEOUT, exchange).await.map_err(|_| fail(format!("no answer in {TIMEOUT:?}")))??;
        if !status.is_success() {
            let refused = status.is_client_error()
                && status != StatusCode::REQUEST_TIMEOUT
                && status != StatusCode::TOO_MANY_REQUESTS;
            return Err(ApiError { refused, ..fail(refusal(status, &body)) });
        }
        if body.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&body).map_err(|e| fail(format!("the answer is not JSON: {e}")))
    }
}

/// The status and the forge's own message (`message` on GitHub and Gitea, `message` or
/// `error` on GitLab), cut short.
fn refusal(status: StatusCode, body: &[u8]) -> String {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| v.get("message").or_else(|| v.get("error")))
        .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_owned))
        .unwrap_or_default();
    let message: String = message.chars().take(300).collect();
    if message.is_empty() { status.to_string() } else { format!("{status}: {message}") }
}
