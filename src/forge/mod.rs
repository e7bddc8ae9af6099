//! The forges pull requests come from: GitHub, GitLab and Gitea. One shape for a pull
//! request ([`PullRequest`]) whatever the forge calls it, and the few calls the preview
//! loop makes: list the open ones, post or update flotilla's comment, set a commit
//! status. Webhook deliveries are read in [`hooks`].

pub mod hooks;
mod http;

use std::collections::BTreeSet;

use ::http::Method;
use serde_json::{Value, json};

pub use http::ApiError;

/// Which forge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// GitHub or GitHub Enterprise (REST v3).
    Github,
    /// GitLab (REST v4); pull requests are merge requests.
    Gitlab,
    /// Gitea or Forgejo (REST v1).
    Gitea,
}

/// A pull (merge) request as the preview loop sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    /// Its number (GitLab's `iid`).
    pub number: u64,
    /// The head commit.
    pub head: String,
    /// The branch it targets.
    pub base: String,
    /// Its labels.
    pub labels: BTreeSet<String>,
    /// A draft (work in progress).
    pub draft: bool,
    /// Open (false once closed or merged).
    pub open: bool,
}

/// A commit status's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitState {
    /// Still working.
    Pending,
    /// The plan rendered (and the preview, if any, applied).
    Success,
    /// The head does not load, or a preview could not be applied.
    Failure,
}

/// One commit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Its name (`flotilla/plan`, `flotilla/member1`).
    pub context: String,
    /// Its state.
    pub state: CommitState,
    /// One line (forges cut at 140 characters).
    pub description: String,
}

/// One repository on one forge.
#[derive(Clone)]
pub struct Forge {
    kind: Kind,
    /// API root: `https://api.github.com`, `https://gitlab.example/api/v4`,
    /// `https://gitea.example/api/v1`.
    api: String,
    /// `owner/name` (GitLab: the project's path or numeric id).
    repo: String,
    http: http::Http,
}

/// Pages of a listing read at most (100 items each).
const MAX_PAGES: usize = 20;

impl Forge {
    /// A client for `repo` on the forge at `api`, with `token`.
    pub fn new(kind: Kind, api: &str, repo: &str, token: &str) -> anyhow::Result<Self> {
        let auth = match kind {
            Kind::Github => ("authorization", format!("Bearer {token}")),
            Kind::Gitlab => ("private-token", token.to_owned()),
            Kind::Gitea => ("authorization", format!("token {token}")),
        };
        Ok(Self {
            kind,
            api: api.trim_end_matches('/').to_owned(),
            repo: repo.to_owned(),
            http: http::Http::new(auth)?,
        })
    }

    /// Which forge.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The ref the forge keeps a pull request's head under, fetched like a branch.
    pub fn head_ref(&self, number: u64) -> String {
        match self.kind {
            Kind::Gitlab => format!("refs/merge-requests/{number}/head"),
            Kind::Github | Kind::Gitea => format!("refs/pull/{number}/head"),
        }
    }

    /// The repository's path in API URLs.
    fn project(&self) -> String {
        match self.kind {
            Kind::Gitlab => format!("projects/{}", self.repo.replace('/', "%2F")),
            Kind::Github | Kind::Gitea => format!("repos/{}", self.repo),
        }
    }

    async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value, ApiError> {
        self.http.json(method, &format!("{}/{path}", self.api), path, body).await
    }

    /// Every item of a paged listing (`path` without page parameters).
    async fn list(&self, path: &str) -> Result<Vec<Value>, ApiError> {
        let joiner = if path.contains('?') { '&' } else { '?' };
        let mut items = Vec::new();
        for page in 1..=MAX_PAGES {
            let size = if self.kind == Kind::Gitea { "limit" } else { "per_page" };
            let url = format!("{path}{joiner}{size}=100&page={page}");
            let Value::Array(batch) = self.call(Method::GET, &url, None).await? else { break };
            let last = batch.len() < 100;
            items.extend(batch);
            if last {
                break;
            }
        }
        Ok(items)
    }

    /// The open pull requests (the polling fallback).
    pub async fn open_pulls(&self) -> Result<Vec<PullRequest>, ApiError> {
        let path = match self.kind {
            Kind::Gitlab => format!("{}/merge_requests?state=opened", self.project()),
            Kind::Github | Kind::Gitea => format!("{}/pulls?state=open", self.project()),
        };
        let items = self.list(&path).await?;
        Ok(items.iter().filter_map(|item| pull_request(self.kind, item)).collect())
    }

    /// Posts `body` on the pull request, or edits flotilla's earlier comment there (the
    /// one starting with `marker`), so one comment follows the pull request.
    pub async fn upsert_comment(&self, number: u64, marker: &str, body: &str) -> Result<(), ApiError> {
        let (list, edit_method, edit_base) = match self.kind {
            Kind::Gitlab => {
                let base = format!("{}/merge_requests/{number}/notes", self.project());
                (base.clone(), Method::PUT, base)
            }
            Kind::Github | Kind::Gitea => {
                let project = self.project();
                (format!("{project}/issues/{number}/comments"), Method::PATCH, format!("{project}/issues/comments"))
            }
        };
        let comments = self.list(&list).await?;
        let ours = comments.iter().find(|c| c["body"].as_str().is_some_and(|b| b.starts_with(marker)));
        let payload = json!({ "body": body });
        match ours.and_then(|c| c.get("id")) {
            Some(id) => {
                self.call(edit_method, &format!("{edit_base}/{id}"), Some(&payload)).await?;
            }
            None => {
                self.call(Method::POST, &list, Some(&payload)).await?;
            }
        }
        Ok(())
    }

    /// Sets a commit status on `sha`.
    pub async fn set_status(&self, sha: &str, status: &Status) -> Result<(), ApiError> {
        let description: String = status.description.chars().take(140).collect();
        let (path, body) = match self.kind {
            Kind::Gitlab => {
                let state = match status.state {
                    CommitState::Pending => "running",
                    CommitState::Success => "success",
                    CommitState::Failure => "failed",
                };
                let body = json!({"state": state, "name": status.context, "description": description});
                (format!("{}/statuses/{sha}", self.project()), body)
            }
            Kind::Github | Kind::Gitea => {
                let state = match status.state {
                    CommitState::Pending => "pending",
                    CommitState::Success => "success",
                    CommitState::Failure => "failure",
                };
                let body = json!({"state": state, "context": status.context, "description": description});
                (format!("{}/statuses/{sha}", self.project()), body)
            }
        };
        self.call(Method::POST, &path, Some(&body)).await.map(drop)
    }
}

/// Reads a pull request from a listing item or a webhook's `pull_request` object (GitHub
/// and Gitea), or a merge request (GitLab: listing item, or a webhook's
/// `object_attributes` with the hook's `labels` merged in by the caller).
pub fn pull_request(kind: Kind, item: &Value) -> Option<PullRequest> {
    let text = |v: &Value| v.as_str().map(str::to_owned);
    match kind {
        Kind::Github | Kind::Gitea => Some(PullRequest {
            number: item["number"].as_u64()?,
            head: text(&item["head"]["sha"])?,
            base: text(&item["base"]["ref"])?,
            labels: names(&item["labels"], "name"),
            draft: item["draft"].as_bool().unwrap_or(false),
            open: item["state"].as_str() == Some("open"),
        }),
        Kind::Gitlab => Some(PullRequest {
            number: item["iid"].as_u64()?,
            head: text(&item["sha"]).or_else(|| text(&item["last_commit"]["id"]))?,
            base: text(&item["target_branch"])?,
            labels: names(&item["labels"], "title"),
            draft: item["draft"].as_bool().or_else(|| item["work_in_progress"].as_bool()).unwrap_or(false),
            open: item["state"].as_str() == Some("opened"),
        }),
    }
}

/// Label names: plain strings (GitLab's listings) or objects with `field`.
fn names(labels: &Value, field: &str) -> BTreeSet<String> {
    let label = |l: &Value| l.as_str().or_else(|| l[field].as_str()).map(str::to_owned);
    labels.as_array().into_iter().flatten().filter_map(label).collect()
}
