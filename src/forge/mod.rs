//! The forges pull requests come from: GitHub, GitLab and Gitea. One shape for a pull
//! request ([`PullRequest`]) whatever the forge calls it, and the few calls the preview
//! loop makes: list the open ones, post or update flotilla's comment, set a commit
//! status. Webhook deliveries are read in [`hooks`].

pub mod hooks;
pub mod http;

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
    /// Its title (text from the forge: untrusted).
    pub title: String,
    /// Its page on the forge, when the forge gave one with an http or https address.
    pub link: Option<String>,
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
    /// The forge user the token acts as, asked once: only that user's comments are
    /// flotilla's to edit.
    me: std::sync::Arc<tokio::sync::OnceCell<String>>,
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
            me: Default::default(),
        })
    }

    /// The login of the user the token acts as (GitHub and Gitea `login`, GitLab
    /// `username`), asked of the forge once.
    async fn me(&self) -> Result<&str, ApiError> {
        let field = if self.kind == Kind::Gitlab { "username" } else { "login" };
        let asked = self.me.get_or_try_init(|| async {
            let user = self.call(Method::GET, "user", None).await?;
            Ok::<_, ApiError>(user[field].as_str().unwrap_or_default().to_owned())
        });
        asked.await.map(String::as_str)
    }

    /// Who wrote a comment (GitHub and Gitea `user.login`, GitLab `author.username`).
    fn author<'c>(&self, comment: &'c Value) -> Option<&'c str> {
        match self.kind {
            Kind::Gitlab => comment["author"]["username"].as_str(),
            Kind::Github | Kind::Gitea => comment["user"]["login"].as_str(),
        }
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
    /// first one starting with `marker` **that the token's own user wrote**), so one
    /// comment follows the pull request. A comment someone else wrote with the marker
    /// is never taken for it: the plan would show under their name, and they could
    /// edit it.
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
        let me = self.me().await?;
        let comments = self.list(&list).await?;
        let ours = comments.iter().find(|c| {
            !me.is_empty() && self.author(c) == Some(me) && c["body"].as_str().is_some_and(|b| b.starts_with(marker))
        });
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
            title: text(&item["title"]).unwrap_or_default(),
            link: web(&item["html_url"]),
        }),
        Kind::Gitlab => Some(PullRequest {
            number: item["iid"].as_u64()?,
            head: text(&item["sha"]).or_else(|| text(&item["last_commit"]["id"]))?,
            base: text(&item["target_branch"])?,
            labels: names(&item["labels"], "title"),
            draft: item["draft"].as_bool().or_else(|| item["work_in_progress"].as_bool()).unwrap_or(false),
            open: item["state"].as_str() == Some("opened"),
            title: text(&item["title"]).unwrap_or_default(),
            link: web(&item["web_url"]),
        }),
    }
}

/// A web address from the forge, kept only with an http or https scheme (so that it
/// never becomes a `javascript:` link on the fleet page).
fn web(v: &Value) -> Option<String> {
    let url = v.as_str()?;
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    matches!(scheme.as_deref(), Some("http" | "https")).then(|| url.to_owned())
}

/// Label names: plain strings (GitLab's listings) or objects with `field`.
fn names(labels: &Value, field: &str) -> BTreeSet<String> {
    let label = |l: &Value| l.as_str().or_else(|| l[field].as_str()).map(str::to_owned);
    labels.as_array().into_iter().flatten().filter_map(label).collect()
}

#[cfg(test)]
mod tests {
    //! The REST shapes each forge documents, served by a small local server that keeps
    //! comments and statuses as the forge would: what flotilla sends (method, path,
    //! token header, body) is checked against it.

    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::body::Bytes;
    use axum::extract::{Request, State};
    use axum::http::StatusCode;
    use serde_json::{Value, json};

    use super::*;

    #[derive(Default)]
    struct Fake {
        comments: Vec<Value>,
        statuses: Vec<Value>,
        /// Every request: method, path with query, token header, body.
        seen: Vec<(String, String, String, Value)>,
    }

    /// A pull request as GitHub and Gitea list it; a merge request as GitLab does.
    fn listed(kind: Kind) -> Value {
        match kind {
            Kind::Gitlab => json!([{"iid": 4, "sha": "abc123", "target_branch": "main", "state": "opened",
                                    "draft": false, "labels": ["preview"]}]),
            _ => json!([{"number": 4, "state": "open", "draft": false, "head": {"sha": "abc123", "ref": "x"},
                         "base": {"ref": "main"}, "labels": [{"name": "preview"}]}]),
        }
    }

    async fn serve(kind: Kind) -> (String, Arc<Mutex<Fake>>) {
        let fake = Arc::new(Mutex::new(Fake::default()));
        let handler = move |State(fake): State<Arc<Mutex<Fake>>>, request: Request| async move {
            let (parts, body) = request.into_parts();
            let body: Bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let path = parts.uri.path_and_query().unwrap().to_string();
            let token = ["authorization", "private-token"]
                .iter()
                .find_map(|h| parts.headers.get(*h))
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default();
            let mut fake = fake.lock().unwrap();
            fake.seen.push((parts.method.to_string(), path.clone(), token, body.clone()));
            let route = path.split('?').next().unwrap().to_owned();
            let answer = match (parts.method.as_str(), route.as_str()) {
                (_, p) if p.contains("missing") => {
                    return (StatusCode::NOT_FOUND, json!({"message": "Not Found"}).to_string());
                }
                ("GET", p) if p.ends_with("/pulls") || p.ends_with("/merge_requests") => listed(kind),
                ("GET", p) if p.ends_with("/user") => json!({"login": "flotilla-bot", "username": "flotilla-bot"}),
                ("GET", p) if p.ends_with("/comments") || p.ends_with("/notes") => Value::from(fake.comments.clone()),
                ("POST", _) if body["body"].as_str().is_some_and(|b| b.len() > 65_536) => {
                    let message =
                        json!({"message": "Validation Failed: body is too long (maximum is 65536 characters)"});
                    return (StatusCode::UNPROCESSABLE_ENTITY, message.to_string());
                }
                ("POST", p) if p.ends_with("/comments") || p.ends_with("/notes") => {
                    let id = fake.comments.len() + 100;
                    let comment = json!({"id": id, "body": body["body"], "user": {"login": "flotilla-bot"},
                                         "author": {"username": "flotilla-bot"}});
                    fake.comments.push(comment.clone());
                    comment
                }
                ("PATCH" | "PUT", p) => {
                    let id: u64 = p.rsplit('/').next().unwrap().parse().unwrap();
                    let comment = fake.comments.iter_mut().find(|c| c["id"] == id).expect("an existing comment");
                    comment["body"] = body["body"].clone();
                    comment.clone()
                }
                ("POST", p) if p.contains("/statuses/") => {
                    fake.statuses.push(body.clone());
                    body
                }
                _ => return (StatusCode::NOT_FOUND, json!({"message": "Not Found"}).to_string()),
            };
            (StatusCode::OK, answer.to_string())
        };
        let app = Router::new().fallback(handler).with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{address}"), fake)
    }

    async fn exercise(kind: Kind, api_path: &str) -> Arc<Mutex<Fake>> {
        let (root, fake) = serve(kind).await;
        // Someone else posted the marker first: their comment is never taken for ours.
        let forged = json!({"id": 7, "body": "<!-- m -->\nNo changes.", "user": {"login": "mallory"},
                            "author": {"username": "mallory"}});
        fake.lock().unwrap().comments.push(forged);
        let forge = Forge::new(kind, &format!("{root}{api_path}"), "org/fleet", "s3cret").unwrap();
        let open = forge.open_pulls().await.unwrap();
        assert_eq!(open.len(), 1);
        assert_eq!((open[0].number, open[0].head.as_str(), open[0].open), (4, "abc123", true));
        assert!(open[0].labels.contains("preview"));
        forge.upsert_comment(4, "<!-- m -->", "<!-- m -->\nfirst").await.unwrap();
        forge.upsert_comment(4, "<!-- m -->", "<!-- m -->\nsecond").await.unwrap();
        let status =
            Status { context: "flotilla/plan".into(), state: CommitState::Failure, description: "x".repeat(200) };
        forge.set_status("abc123", &status).await.unwrap();
        let missing = Forge::new(kind, &format!("{root}{api_path}"), "org/missing", "s3cret").unwrap();
        let error = missing.open_pulls().await.unwrap_err().to_string();
        assert!(error.contains("404") && error.contains("Not Found") && !error.contains("s3cret"), "{error}");
        let too_long = forge.upsert_comment(4, "<!-- x -->", &"x".repeat(70_000)).await.unwrap_err();
        assert!(too_long.refused() && too_long.to_string().contains("422"), "{too_long}");
        assert!(missing.open_pulls().await.unwrap_err().refused(), "a 404 is the forge's answer, not an outage");
        let state = fake.lock().unwrap();
        assert_eq!(state.comments.len(), 2, "one comment of ours, edited in place; mallory's untouched");
        assert_eq!(state.comments[0]["body"], "<!-- m -->\nNo changes.");
        assert_eq!(state.comments[1]["body"], "<!-- m -->\nsecond");
        assert_eq!(state.seen.iter().filter(|(m, p, ..)| m == "GET" && p.ends_with("/user")).count(), 1, "asked once");
        assert_eq!(state.statuses[0]["description"].as_str().unwrap().len(), 140);
        drop(state);
        fake
    }

    fn requests(fake: &Mutex<Fake>) -> Vec<(String, String, String)> {
        fake.lock().unwrap().seen.iter().map(|(m, p, t, _)| (m.clone(), p.clone(), t.clone())).collect()
    }

    #[tokio::test]
    async fn github_rest_shapes() {
        let fake = exercise(Kind::Github, "").await;
        let seen = requests(&fake);
        let bearer = "Bearer s3cret".to_owned();
        assert_eq!(seen[0], ("GET".into(), "/repos/org/fleet/pulls?state=open&per_page=100&page=1".into(), bearer));
        assert!(seen.iter().any(|(m, p, _)| m == "POST" && p == "/repos/org/fleet/issues/4/comments"));
        assert!(seen.iter().any(|(m, p, _)| m == "PATCH" && p == "/repos/org/fleet/issues/comments/101"));
        assert!(!seen.iter().any(|(m, p, _)| m == "PATCH" && p.ends_with("/comments/7")), "mallory's is not edited");
        assert!(seen.iter().any(|(m, p, _)| m == "GET" && p == "/user"));
        assert!(seen.iter().any(|(m, p, _)| m == "POST" && p == "/repos/org/fleet/statuses/abc123"));
        let status = &fake.lock().unwrap().statuses[0];
        assert_eq!((status["state"].as_str(), status["context"].as_str()), (Some("failure"), Some("flotilla/plan")));
    }

    #[tokio::test]
    async fn gitlab_rest_shapes() {
        let fake = exercise(Kind::Gitlab, "/api/v4").await;
        let seen = requests(&fake);
        let project = "/api/v4/projects/org%2Ffleet";
        assert_eq!(
            seen[0],
            ("GET".into(), format!("{project}/merge_requests?state=opened&per_page=100&page=1"), "s3cret".into())
        );
        assert!(seen.iter().any(|(m, p, _)| m == "POST" && *p == format!("{project}/merge_requests/4/notes")));
        assert!(seen.iter().any(|(m, p, _)| m == "PUT" && *p == format!("{project}/merge_requests/4/notes/101")));
        assert!(seen.iter().any(|(m, p, _)| m == "GET" && p == "/api/v4/user"));
        assert!(seen.iter().any(|(m, p, _)| m == "POST" && *p == format!("{project}/statuses/abc123")));
        let status = &fake.lock().unwrap().statuses[0];
        assert_eq!((status["state"].as_str(), status["name"].as_str()), (Some("failed"), Some("flotilla/plan")));
    }

    #[tokio::test]
    async fn gitea_rest_shapes() {
        let fake = exercise(Kind::Gitea, "/api/v1").await;
        let seen = requests(&fake);
        let token = "token s3cret".to_owned();
        assert_eq!(seen[0], ("GET".into(), "/api/v1/repos/org/fleet/pulls?state=open&limit=100&page=1".into(), token));
        assert!(seen.iter().any(|(m, p, _)| m == "PATCH" && p == "/api/v1/repos/org/fleet/issues/comments/101"));
        assert!(seen.iter().any(|(m, p, _)| m == "GET" && p == "/api/v1/user"));
    }

    #[test]
    fn a_pull_request_s_page_is_kept_only_with_a_web_address() {
        let item = |url: &str| {
            json!({"number": 3, "title": "<b>bump</b>", "html_url": url, "state": "open",
                   "head": {"sha": "abc"}, "base": {"ref": "main"}, "labels": []})
        };
        let found = pull_request(Kind::Github, &item("https://github.com/org/fleet/pull/3")).unwrap();
        assert_eq!(found.link.as_deref(), Some("https://github.com/org/fleet/pull/3"));
        assert_eq!(found.title, "<b>bump</b>", "kept as written: the page escapes it");
        for url in ["javascript:alert(1)", "JAVASCRIPT://x", "data:text/html,x", "//evil"] {
            assert_eq!(pull_request(Kind::Gitea, &item(url)).unwrap().link, None, "{url}");
        }
        let merge = json!({"iid": 4, "title": "t", "web_url": "https://gitlab.com/org/fleet/-/merge_requests/4",
                           "state": "opened", "sha": "abc", "target_branch": "main", "labels": []});
        assert!(pull_request(Kind::Gitlab, &merge).unwrap().link.unwrap().ends_with("/merge_requests/4"));
    }
}
