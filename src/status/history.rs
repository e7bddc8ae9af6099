//! The history of the revisions the members applied, and the pull requests' plans and
//! previews, as `/status` (and the fleet page) shows them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Status;

/// How many applied revisions the history keeps.
pub const KEPT: usize = 20;

/// A revision as the members took it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppliedStatus {
    /// The revision.
    pub revision: String,
    /// When the first member applied it (RFC 3339).
    pub first: String,
    /// When each member applied it.
    pub members: BTreeMap<String, String>,
    /// When the last member it was published to applied it, once every one has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub everywhere: Option<String>,
}

/// A pull request's plan, and its preview.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreviewStatus {
    /// Its title on the forge.
    #[serde(default)]
    pub title: String,
    /// The head that was planned.
    pub head: String,
    /// Its page on the forge (http or https only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// When it was planned (RFC 3339).
    pub planned: String,
    /// Per member that changes: `A added, C changed, R removed`.
    #[serde(default)]
    pub clusters: BTreeMap<String, String>,
    /// When the preview environment expires (RFC 3339), while one runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// Why the head does not render.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Status {
    /// `member` applied `revision` at `at`: the history's entry for it, created when it
    /// is the first, and closed when every member it was published to has it.
    pub fn record_applied(&mut self, member: &str, revision: &str, at: &str) {
        let position = self.history.iter().position(|h| h.revision == revision);
        let entry = match position {
            Some(i) => &mut self.history[i],
            None => {
                let first = AppliedStatus { revision: revision.to_owned(), first: at.to_owned(), ..Default::default() };
                self.history.insert(0, first);
                self.history.truncate(KEPT);
                &mut self.history[0]
            }
        };
        entry.members.entry(member.to_owned()).or_insert_with(|| at.to_owned());
        if let Some((published, members)) = &self.published
            && published == revision
            && entry.everywhere.is_none()
            && members.iter().all(|m| entry.members.contains_key(m))
        {
            entry.everywhere = Some(at.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_keeps_each_revision_once_and_closes_it_when_every_member_has_it() {
        let mut s = Status::default();
        s.expect("r1".into(), &["m1".to_owned(), "m2".to_owned()]);
        s.record_applied("m1", "r1", "t1");
        assert_eq!(s.history[0].everywhere, None);
        s.record_applied("m1", "r1", "t2");
        assert_eq!(s.history[0].members["m1"], "t1", "the first time counts");
        s.record_applied("m2", "r1", "t3");
        assert_eq!((s.history.len(), s.history[0].everywhere.as_deref()), (1, Some("t3")));
        s.expect("r2".into(), &["m1".to_owned(), "m2".to_owned()]);
        s.record_applied("m2", "r2", "t4");
        assert_eq!(s.history.iter().map(|h| h.revision.as_str()).collect::<Vec<_>>(), ["r2", "r1"]);
        for n in 0..KEPT * 2 {
            s.record_applied("m1", &format!("x{n}"), "t");
        }
        assert_eq!(s.history.len(), KEPT);
        assert_eq!(s.history[0].revision, format!("x{}", KEPT * 2 - 1), "newest first");
    }
}
