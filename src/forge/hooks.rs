//! Pull-request webhook deliveries, read into a [`PullRequest`]: GitHub's and Gitea's
//! `pull_request` event (Gitea sends GitHub's headers and payload shape too), GitLab's
//! `Merge Request Hook`. Pure: the signature is checked by the server before this runs.

use serde_json::Value;

use super::{Kind, PullRequest, pull_request};

/// The header naming the event, per forge.
pub fn event_header(kind: Kind) -> &'static str {
    match kind {
        Kind::Github => "x-github-event",
        Kind::Gitea => "x-gitea-event",
        Kind::Gitlab => "x-gitlab-event",
    }
}

/// The pull request a delivery is about: `Ok(None)` for events that are not about pull
/// requests (pushes, issues, pings), an error for a payload that does not parse.
pub fn read(kind: Kind, event: Option<&str>, body: &[u8]) -> Result<Option<PullRequest>, &'static str> {
    let wanted = match kind {
        Kind::Github | Kind::Gitea => "pull_request",
        Kind::Gitlab => "Merge Request Hook",
    };
    if event != Some(wanted) {
        return Ok(None);
    }
    let payload: Value = serde_json::from_slice(body).map_err(|_| "the payload is not JSON")?;
    let pull = match kind {
        Kind::Github | Kind::Gitea => pull_request(kind, &payload["pull_request"]),
        Kind::Gitlab => {
            let mut attributes = payload["object_attributes"].clone();
            if attributes.get("labels").is_none_or(Value::is_null) {
                attributes["labels"] = payload["labels"].clone();
            }
            pull_request(kind, &attributes)
        }
    };
    pull.map(Some).ok_or("the payload names no pull request (number, head, base)")
}

#[cfg(test)]
mod tests {
    use super::*;

    // Trimmed from the payloads in GitHub's "Webhook events and payloads" (pull_request,
    // action synchronize), Gitea's webhook documentation and GitLab's "Merge request
    // events".
    const GITHUB: &str = r#"{"action":"synchronize","number":7,"pull_request":{"number":7,"state":"open","draft":false,
        "head":{"ref":"scale","sha":"0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"},"base":{"ref":"main","sha":"6dcb09b5b57875f334f61aebed695e2e4193db5e"},
        "labels":[{"id":208045946,"name":"preview","color":"f29513"}]}}"#;
    const GITEA_CLOSED: &str = r#"{"action":"closed","number":3,"pull_request":{"id":3,"number":3,"state":"closed","merged":true,
        "head":{"ref":"scale","sha":"9b3c1f"},"base":{"ref":"main","sha":"1a2b3c"},"labels":[]}}"#;
    const GITLAB: &str = r##"{"object_kind":"merge_request","event_type":"merge_request",
        "object_attributes":{"iid":1,"target_branch":"main","source_branch":"ms-viewport","state":"opened","draft":true,
        "last_commit":{"id":"da1560886d4f094c3e6c9ef40349f7d38b5d27d7"},"action":"update"},
        "labels":[{"id":206,"title":"preview","color":"#FF0000"}]}"##;

    #[test]
    fn github_gitea_and_gitlab_payloads_read_alike() {
        let github = read(Kind::Github, Some("pull_request"), GITHUB.as_bytes()).unwrap().unwrap();
        assert_eq!((github.number, github.base.as_str(), github.open, github.draft), (7, "main", true, false));
        assert_eq!(github.head, "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c");
        assert!(github.labels.contains("preview"));

        let gitea = read(Kind::Gitea, Some("pull_request"), GITEA_CLOSED.as_bytes()).unwrap().unwrap();
        assert_eq!((gitea.number, gitea.open), (3, false), "merged is closed");

        let gitlab = read(Kind::Gitlab, Some("Merge Request Hook"), GITLAB.as_bytes()).unwrap().unwrap();
        assert_eq!((gitlab.number, gitlab.open, gitlab.draft), (1, true, true));
        assert_eq!(gitlab.head, "da1560886d4f094c3e6c9ef40349f7d38b5d27d7");
        assert!(gitlab.labels.contains("preview"));
    }

    #[test]
    fn other_events_are_ignored_and_broken_payloads_refused() {
        assert_eq!(read(Kind::Github, Some("push"), b"{}"), Ok(None));
        assert_eq!(read(Kind::Gitlab, None, b"{}"), Ok(None));
        assert!(read(Kind::Github, Some("pull_request"), b"{").is_err());
        assert!(read(Kind::Github, Some("pull_request"), br#"{"pull_request":{"number":1}}"#).is_err());
    }
}
