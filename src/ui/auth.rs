//! Who may read the fleet page: the holder of the `--ui-token-file` token, or (with
//! `--ui-kubernetes-auth`) a Kubernetes user of the host cluster whose bearer token a
//! TokenReview accepts and whom a SubjectAccessReview allows to `get`
//! `fleets.flotilla.dev` named after the instance, in the controller's namespace (as
//! kube-rbac-proxy and the Kubernetes dashboard check a token). Verdicts are kept for
//! [`KEPT_FOR`], by the token's SHA-256 (never the token), so a page's live updates
//! do not ask the API server on every request; a failed review is not kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::http::header;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use sha2::Digest;

use crate::host::Host;

/// The cookie `/ui/login` sets.
pub const TOKEN_COOKIE: &str = "flotilla_ui_token";

/// How long a review's verdict is kept.
pub const KEPT_FOR: Duration = Duration::from_secs(10);

/// Verdicts kept at most (the oldest are dropped past it).
const KEPT_AT_MOST: usize = 4096;

/// What a request's token is worth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It may read the page.
    Allowed,
    /// No token, or one nobody accepts: 401.
    Unauthenticated,
    /// A user the host cluster knows, not allowed to read this fleet: 403.
    Forbidden(String),
    /// The host cluster could not be asked: 503.
    Unavailable(String),
}

/// The ways a token is accepted.
#[derive(Clone, Default)]
pub struct Auth {
    token: Option<Arc<str>>,
    kubernetes: Option<Arc<Kubernetes>>,
}

/// Reviews by the host cluster.
pub struct Kubernetes {
    host: Arc<Host>,
    /// The controller's namespace: where a RoleBinding grants the page.
    namespace: String,
    /// The instance: the name of the `fleets.flotilla.dev` a user must be allowed to get.
    instance: String,
    kept: Mutex<HashMap<[u8; 32], (Instant, Verdict)>>,
}

impl Kubernetes {
    /// Reviews on `host`, for `instance` in `namespace`.
    pub fn new(host: Arc<Host>, namespace: String, instance: String) -> Self {
        Self { host, namespace, instance, kept: Mutex::default() }
    }
}

impl Auth {
    /// `token` and `kubernetes` when given; neither means the page is open.
    pub fn new(token: Option<String>, kubernetes: Option<Kubernetes>) -> Self {
        Self { token: token.map(Arc::from), kubernetes: kubernetes.map(Arc::new) }
    }

    /// Whether anything is required at all.
    pub fn required(&self) -> bool {
        self.token.is_some() || self.kubernetes.is_some()
    }

    /// What `given` (a request's token) is worth.
    pub async fn judge(&self, given: Option<&str>) -> Verdict {
        if !self.required() {
            return Verdict::Allowed;
        }
        let Some(given) = given.filter(|g| !g.is_empty()) else { return Verdict::Unauthenticated };
        if self.token.as_deref().is_some_and(|token| equal(given.as_bytes(), token.as_bytes())) {
            return Verdict::Allowed;
        }
        match &self.kubernetes {
            Some(k) => k.judge(given).await,
            None => Verdict::Unauthenticated,
        }
    }
}

impl Kubernetes {
    async fn judge(&self, token: &str) -> Verdict {
        let key: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        if let Some((at, verdict)) = self.kept.lock().expect("verdicts").get(&key)
            && at.elapsed() < KEPT_FOR
        {
            return verdict.clone();
        }
        let verdict = match self.review(token).await {
            Ok(verdict) => verdict,
            Err(e) => return Verdict::Unavailable(format!("{e:#}")),
        };
        let mut kept = self.kept.lock().expect("verdicts");
        if kept.len() >= KEPT_AT_MOST {
            kept.retain(|_, (at, _)| at.elapsed() < KEPT_FOR);
            if kept.len() >= KEPT_AT_MOST {
                kept.clear();
            }
        }
        kept.insert(key, (Instant::now(), verdict.clone()));
        verdict
    }

    /// A TokenReview of `token`, then a SubjectAccessReview of its user.
    async fn review(&self, token: &str) -> anyhow::Result<Verdict> {
        use anyhow::Context;
        let client = self.host.client().await?;
        let review = TokenReview {
            spec: TokenReviewSpec { token: Some(token.to_owned()), ..Default::default() },
            ..Default::default()
        };
        let reviewed = kube::Api::<TokenReview>::all(client.clone())
            .create(&Default::default(), &review)
            .await
            .context("TokenReview")?;
        let status = reviewed.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => user,
            _ => return Ok(Verdict::Unauthenticated),
        };
        let name = user.username.clone().unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                resource_attributes: Some(ResourceAttributes {
                    verb: Some("get".into()),
                    group: Some("flotilla.dev".into()),
                    resource: Some("fleets".into()),
                    name: Some(self.instance.clone()),
                    namespace: Some(self.namespace.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answered = kube::Api::<SubjectAccessReview>::all(client)
            .create(&Default::default(), &access)
            .await
            .context("SubjectAccessReview")?;
        Ok(match answered.status.is_some_and(|s| s.allowed) {
            true => Verdict::Allowed,
            false => Verdict::Forbidden(name),
        })
    }
}

/// The token a request carries: `Authorization: Bearer`, or the login cookie.
pub fn presented(request: &Request) -> Option<String> {
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    bearer.or_else(|| {
        request
            .headers()
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';').filter_map(|c| c.trim().split_once('=')))
            .find(|(k, _)| *k == TOKEN_COOKIE)
            .map(|(_, v)| v.to_owned())
    })
}

/// Whether `token` can be a token at all: one word of printable characters, none of
/// them a cookie's separator.
pub fn one_word(token: &str) -> bool {
    !token.is_empty() && !token.contains(|c: char| c.is_whitespace() || c.is_control() || c == ';')
}

/// Compares a secret in time that does not depend on where it differs.
pub fn equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_token_file_s_token_alone_opens_the_page_when_no_cluster_reviews() {
        let auth = Auth::new(Some("s3cret".into()), None);
        assert_eq!(auth.judge(Some("s3cret")).await, Verdict::Allowed);
        assert_eq!(auth.judge(Some("s3cre")).await, Verdict::Unauthenticated);
        assert_eq!(auth.judge(None).await, Verdict::Unauthenticated);
        assert_eq!(auth.judge(Some("")).await, Verdict::Unauthenticated);
        assert_eq!(Auth::default().judge(None).await, Verdict::Allowed, "nothing required");
    }

    #[test]
    fn a_token_comes_from_the_header_or_the_cookie() {
        let with = |name, value: &str| Request::builder().header(name, value).body(axum::body::Body::empty()).unwrap();
        assert_eq!(presented(&with(header::AUTHORIZATION, "Bearer abc")).as_deref(), Some("abc"));
        assert_eq!(presented(&with(header::AUTHORIZATION, "Basic abc")), None);
        assert_eq!(presented(&with(header::COOKIE, "a=b; flotilla_ui_token=xyz")).as_deref(), Some("xyz"));
        assert_eq!(presented(&with(header::COOKIE, "flotilla_ui_tokenx=1")), None);
    }
}
