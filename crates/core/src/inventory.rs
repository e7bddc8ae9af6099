//! The inventory: what one flotilla instance applied to one cluster, and from which
//! source. It is what makes prune safe, so its format is structured data no object name
//! can corrupt, it names the repository it belongs to, and it splits into parts when
//! one ConfigMap cannot hold it. Pure: the executor stores and fetches the parts.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::ObjectKey;

/// What flotilla applied to one cluster, persisted in the cluster so a fresh process
/// knows what it may prune.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// The revision last applied completely.
    pub revision: String,
    /// The repository this instance applies; `None` in inventories written before
    /// sources were recorded.
    pub source: Option<Source>,
    /// Objects flotilla applied and has not yet deleted.
    pub objects: BTreeSet<ObjectKey>,
}

/// Where an instance's manifests come from: the repository URL (never its credentials),
/// the branch, and the path inside the repository.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// Repository URL or local path, without userinfo.
    pub url: String,
    /// Branch or ref; empty when unknown (a detached working tree).
    #[serde(default)]
    pub branch: String,
    /// Directory inside the repository; empty for its root.
    #[serde(default)]
    pub path: String,
}

impl Source {
    /// A source with `url` reduced to what identifies the repository: no userinfo (so no
    /// credentials), no trailing `/` or `.git`; `path` without leading or trailing `/`
    /// (`.` is the root).
    pub fn new(url: &str, branch: &str, path: &str) -> Self {
        let path = path.trim_matches('/');
        Self {
            url: strip_userinfo(url).trim_end_matches('/').trim_end_matches(".git").to_owned(),
            branch: branch.to_owned(),
            path: if path == "." { String::new() } else { path.to_owned() },
        }
    }

    /// The same repository, path and branch; an unknown branch matches any.
    pub fn same_as(&self, other: &Source) -> bool {
        self.url == other.url
            && self.path == other.path
            && (self.branch.is_empty() || other.branch.is_empty() || self.branch == other.branch)
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.url)?;
        if !self.branch.is_empty() {
            write!(f, " branch {}", self.branch)?;
        }
        if !self.path.is_empty() {
            write!(f, " path {}", self.path)?;
        }
        Ok(())
    }
}

/// `scheme://user:secret@host/x` → `scheme://host/x`; `user@host:x` (scp-like) → `host:x`.
fn strip_userinfo(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
        return match authority.rfind('@') {
            Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
            None => url.to_owned(),
        };
    }
    let scp_like = !url.starts_with(['/', '.']) && url.split_once(':').is_some_and(|(host, _)| !host.contains('/'));
    match url.split_once(':').map(|(user_host, _)| user_host.rfind('@')) {
        Some(Some(at)) if scp_like => url[at + 1..].to_owned(),
        _ => url.to_owned(),
    }
}

/// Why an inventory belongs to someone else.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the inventory of this instance belongs to {stored}, not {ours}: two repositories need two --instance names; \
     to move this instance to the new source, pass --adopt-inventory once"
)]
pub struct OtherSource {
    /// The source the inventory records.
    pub stored: Source,
    /// This instance's source.
    pub ours: Source,
}

/// Whether `ours` may use (and prune from) an inventory recorded by `stored`. An
/// inventory without a source, and any inventory when `adopt` is set, becomes ours.
pub fn check_source(stored: Option<&Source>, ours: &Source, adopt: bool) -> Result<(), Box<OtherSource>> {
    match stored {
        Some(stored) if !adopt && !stored.same_as(ours) => {
            Err(Box::new(OtherSource { stored: stored.clone(), ours: ours.clone() }))
        }
        _ => Ok(()),
    }
}

/// One object in the stored form: `[apiVersion, kind, namespace or "", name]`.
type Entry = (String, String, String, String);

impl Inventory {
    /// The objects as JSON arrays of entries, each part at most `max_bytes` long (an
    /// entry longer than that gets a part of its own). At least one part, possibly `[]`.
    pub fn encode(&self, max_bytes: usize) -> Vec<String> {
        let mut parts = vec![String::from("[")];
        for key in &self.objects {
            let entry: Entry = (
                key.api_version.clone(),
                key.kind.clone(),
                key.namespace.clone().unwrap_or_default(),
                key.name.clone(),
            );
            let line = serde_json::to_string(&entry).expect("strings serialise");
            let current = parts.last_mut().expect("never empty");
            if current.len() > 1 && current.len() + line.len() + 3 > max_bytes {
                parts.push(String::from("["));
            }
            let current = parts.last_mut().expect("never empty");
            if current.len() > 1 {
                current.push(',');
            }
            current.push('\n');
            current.push_str(&line);
        }
        for part in &mut parts {
            part.push_str("\n]");
        }
        parts
    }

    /// Reads [`Inventory::encode`]'s parts, and the line formats earlier versions wrote
    /// (`apiVersion/kind/namespace/name`, and `apiVersion kind namespace|- name` before
    /// that). Anything malformed is an error: an inventory that cannot be read must not
    /// be pruned from.
    pub fn decode(revision: &str, source: Option<Source>, parts: &[&str]) -> Result<Self, String> {
        let mut objects = BTreeSet::new();
        for (i, part) in parts.iter().enumerate() {
            if part.trim_start().starts_with('[') {
                let entries: Vec<Entry> =
                    serde_json::from_str(part).map_err(|e| format!("part {i} is not an inventory: {e}"))?;
                objects.extend(entries.into_iter().map(|(api_version, kind, namespace, name)| ObjectKey {
                    api_version,
                    kind,
                    namespace: (!namespace.is_empty()).then_some(namespace),
                    name,
                }));
            } else {
                for line in part.lines().filter(|l| !l.trim().is_empty()) {
                    objects.insert(legacy_line(line)?);
                }
            }
        }
        Ok(Self { revision: revision.into(), source, objects })
    }
}

fn legacy_line(line: &str) -> Result<ObjectKey, String> {
    match line.split(' ').collect::<Vec<_>>()[..] {
        [spelled] => spelled.parse().map_err(|e| format!("malformed inventory line: {e}")),
        [api_version, kind, ns, name] => Ok(ObjectKey {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: (ns != "-").then(|| ns.to_owned()),
            name: name.into(),
        }),
        _ => Err(format!("malformed inventory line {line:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("v1", "ConfigMap", Some("ns"), name)
    }

    #[test]
    fn round_trips_in_parts_and_reads_what_earlier_versions_wrote() {
        let mut inv = Inventory { revision: "r".into(), source: None, objects: BTreeSet::new() };
        inv.objects.extend((0..100).map(|i| key(&format!("cm-{i}"))));
        inv.objects.insert(ObjectKey {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            namespace: None,
            name: "x".into(),
        });
        let parts = inv.encode(1_000);
        assert!(parts.len() > 3 && parts.iter().all(|p| p.len() <= 1_000), "{}", parts.len());
        let read: Vec<&str> = parts.iter().map(String::as_str).collect();
        assert_eq!(Inventory::decode("r", None, &read).unwrap(), inv);
        assert_eq!(Inventory { objects: BTreeSet::new(), ..inv.clone() }.encode(1_000), ["[\n]"]);
        assert!(Inventory::decode("r", None, &["only three fields\n"]).is_err());
        assert!(Inventory::decode("r", None, &["v1/ConfigMap/c\n"]).is_err());
        assert!(Inventory::decode("r", None, &["[[\"v1\", \"ConfigMap\"]]"]).is_err());
        let legacy = Inventory::decode("r", None, &["apps/v1 Deployment web nginx\nv1/Namespace//web\n"]).unwrap();
        let spelled: Vec<String> = legacy.objects.iter().map(ObjectKey::spelled).collect();
        assert_eq!(spelled, ["apps/v1/Deployment/web/nginx", "v1/Namespace//web"]);
    }

    #[test]
    fn no_name_can_corrupt_it() {
        // Names the load refuses, but the format must not depend on that.
        let odd = ObjectKey {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("a b".into()),
            name: "x/y \"z\"\n]".into(),
        };
        let inv = Inventory { revision: "r".into(), source: None, objects: [odd].into() };
        let parts = inv.encode(1 << 20);
        assert_eq!(Inventory::decode("r", None, &[&parts[0]]).unwrap(), inv);
    }

    #[test]
    fn sources_never_hold_credentials_and_compare_by_repository_branch_and_path() {
        let a = Source::new("https://bot:s3cret@git.example.com/fleet.git/", "main", "/clusters/prod/");
        assert_eq!(a.url, "https://git.example.com/fleet");
        assert_eq!(a.path, "clusters/prod");
        assert!(!a.to_string().contains("s3cret"));
        assert_eq!(Source::new("git@github.com:org/fleet.git", "", "").url, "github.com:org/fleet");
        assert_eq!(Source::new("/srv/fleet", "", ".").url, "/srv/fleet");
        assert!(a.same_as(&Source::new("https://git.example.com/fleet", "", "clusters/prod")));
        assert!(!a.same_as(&Source::new("https://git.example.com/fleet", "staging", "clusters/prod")));
        assert!(!a.same_as(&Source::new("https://git.example.com/other", "main", "clusters/prod")));
        let b = Source::new("https://git.example.com/fleet", "main", "clusters/dev");
        assert!(check_source(Some(&a), &b, false).is_err());
        assert!(check_source(Some(&a), &b, true).is_ok());
        assert!(check_source(None, &b, false).is_ok());
    }
}
