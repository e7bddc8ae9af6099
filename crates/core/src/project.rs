//! The scope of an instance: which clusters, namespaces and kinds its repository may
//! touch, in the shape of Argo CD's AppProject (`destinations`,
//! `clusterResourceWhitelist` / `Blacklist`, `namespaceResourceWhitelist` / `Blacklist`),
//! so Argo CD users read it without a manual. It comes from outside the repository
//! (`--scope FILE`), so a repository cannot widen its own scope.
//!
//! [`restrict`] is a stage after `render`: an object outside the scope leaves its
//! cluster's list and becomes a [`Problem`] naming its file, document and the rule it
//! breaks. Problems are protected, so such an object is never applied, never pruned
//! and never taken over.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::model::{ObjectKey, Plan, Problem, ProblemReason};

/// An AppProject-shaped scope. Read from a file holding either the fields themselves or
/// a whole object with them under `spec` (an AppProject manifest works as it is).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Project {
    /// Where objects may go: a cluster (`name`; `server` is accepted as Argo CD writes
    /// it and matched against the cluster name too) and a namespace, both globs. An
    /// entry starting with `!` denies, and a deny wins.
    #[serde(default)]
    pub destinations: Vec<Destination>,
    /// Cluster-scoped kinds allowed. Absent or empty: none (as in Argo CD).
    #[serde(default)]
    pub cluster_resource_whitelist: Vec<GroupKind>,
    /// Cluster-scoped kinds denied.
    #[serde(default)]
    pub cluster_resource_blacklist: Vec<GroupKind>,
    /// Namespaced kinds allowed. Absent: all (as in Argo CD).
    #[serde(default)]
    pub namespace_resource_whitelist: Option<Vec<GroupKind>>,
    /// Namespaced kinds denied.
    #[serde(default)]
    pub namespace_resource_blacklist: Vec<GroupKind>,
    /// flotilla's own field: custom kinds the scope vouches are namespaced, for
    /// repositories that do not carry their CustomResourceDefinition (an operator
    /// installs it). Under a scope, any other kind whose scope flotilla cannot know is
    /// refused: a cluster-scoped kind written with a namespace would pass for a
    /// namespaced object. Each member's discovery is checked again before every write.
    #[serde(default)]
    pub namespaced_resources: Vec<GroupKind>,
}

/// One destination: cluster and namespace globs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Destination {
    /// Cluster name glob.
    #[serde(default)]
    pub name: Option<String>,
    /// Argo CD's API server URL glob; flotilla's clusters are named, so it is matched
    /// against the name.
    #[serde(default)]
    pub server: Option<String>,
    /// Namespace glob.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// A group and kind, both globs (`group: ""` is the core group).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct GroupKind {
    /// API group glob.
    #[serde(default)]
    pub group: String,
    /// Kind glob.
    #[serde(default)]
    pub kind: String,
}

#[derive(Deserialize)]
struct Wrapped {
    spec: Project,
}

impl Project {
    /// Parses a scope file: the fields, or an object with them under `spec`.
    pub fn parse(text: &str) -> Result<Project, String> {
        let value: serde_json::Value = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        let parsed = if value.get("spec").is_some() {
            Wrapped::deserialize(&value).map(|w| w.spec)
        } else {
            Project::deserialize(&value)
        };
        parsed.map_err(|e| e.to_string())
    }

    /// Why `key` may not go to `cluster`, if it may not.
    pub fn denies(&self, cluster: &str, key: &ObjectKey) -> Option<String> {
        let (group, kind) = (key.group(), key.kind.as_str());
        let listed = |list: &[GroupKind]| list.iter().any(|gk| glob(&gk.group, group) && glob(&gk.kind, kind));
        let shown = if group.is_empty() { kind.to_owned() } else { format!("{kind}.{group}") };
        match &key.namespace {
            None => {
                if !listed(&self.cluster_resource_whitelist) {
                    return Some(format!("cluster-scoped {shown} is not in clusterResourceWhitelist"));
                }
                if listed(&self.cluster_resource_blacklist) {
                    return Some(format!("cluster-scoped {shown} is in clusterResourceBlacklist"));
                }
                // A Namespace is where objects go: its name must be a destination too,
                // so a repository cannot claim kube-system or flotilla-system.
                let namespace = (group.is_empty() && kind == "Namespace").then_some(key.name.as_str());
                self.destination(cluster, namespace)
            }
            Some(namespace) => {
                if self.namespace_resource_whitelist.as_deref().is_some_and(|list| !listed(list)) {
                    return Some(format!("{shown} is not in namespaceResourceWhitelist"));
                }
                if listed(&self.namespace_resource_blacklist) {
                    return Some(format!("{shown} is in namespaceResourceBlacklist"));
                }
                self.destination(cluster, Some(namespace))
            }
        }
    }

    /// Whether some destination allows `cluster` (and `namespace`, when there is one)
    /// and no denying one matches. A denying entry (a `!` on either glob) denies where
    /// all its globs match and allows nothing, as in Argo CD.
    fn destination(&self, cluster: &str, namespace: Option<&str>) -> Option<String> {
        let mut allowed = false;
        for d in &self.destinations {
            let cluster_glob = d.name.as_deref().or(d.server.as_deref()).unwrap_or("*");
            let namespace_glob = d.namespace.as_deref().unwrap_or("*");
            let (cluster_deny, cluster_glob) = negated(cluster_glob);
            let (namespace_deny, namespace_glob) = negated(namespace_glob);
            let cluster_hit = glob(cluster_glob, cluster);
            // Objects without a namespace are not touched by a namespace's deny.
            let namespace_hit = namespace.map_or(!namespace_deny, |ns| glob(namespace_glob, ns));
            if cluster_hit && namespace_hit {
                if cluster_deny || namespace_deny {
                    return Some(denied(cluster, namespace, "is denied by a destination"));
                }
                allowed = true;
            }
        }
        (!allowed).then(|| denied(cluster, namespace, "is not among the destinations"))
    }
}

fn negated(pattern: &str) -> (bool, &str) {
    pattern.strip_prefix('!').map_or((false, pattern), |rest| (true, rest))
}

fn denied(cluster: &str, namespace: Option<&str>, why: &str) -> String {
    match namespace {
        Some(ns) => format!("namespace {ns} in cluster {cluster} {why}"),
        None => format!("cluster {cluster} {why}"),
    }
}

/// Shell-style glob: `*` any run, `?` one character; everything else literal.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

impl Project {
    /// Why the scope of `key`'s kind is unknown, if it is: not built in, not declared by
    /// a CRD among `declared` (group, kind), not vouched for by `namespacedResources`.
    pub fn unknown_scope(&self, key: &ObjectKey, declared: &BTreeSet<(String, String)>) -> Option<String> {
        let (group, kind) = (key.group(), key.kind.as_str());
        let vouched = self.namespaced_resources.iter().any(|gk| glob(&gk.group, group) && glob(&gk.kind, kind));
        if crate::load::is_builtin_kind(group, kind)
            || vouched
            || declared.contains(&(group.to_owned(), kind.to_owned()))
        {
            return None;
        }
        let shown = if group.is_empty() { kind.to_owned() } else { format!("{kind}.{group}") };
        Some(format!(
            "whether {shown} is namespaced or cluster-scoped is not known: add its CustomResourceDefinition to \
             the repository, or list it under namespacedResources in the scope file"
        ))
    }
}

/// The stage: every object outside `project` leaves its cluster and becomes a problem,
/// and so does every object of a kind whose scope is not known.
pub fn restrict(mut plan: Plan, project: &Project) -> Plan {
    let declared = crate::load::declared_kinds(&plan.loaded.templates);
    let mut problems = Vec::new();
    for (cluster, items) in &mut plan.clusters {
        items.retain(|item| {
            let template = &plan.loaded.templates[item.template];
            let denied =
                project.unknown_scope(&template.key, &declared).or_else(|| project.denies(cluster, &template.key));
            let Some(rule) = denied else { return true };
            problems.push(Problem {
                object: template.key.clone(),
                origin: template.origin.clone(),
                cluster: Some(cluster.clone()),
                reason: ProblemReason::OutOfScope,
                message: format!("outside this instance's scope: {rule}"),
            });
            false
        });
    }
    plan.problems.extend(problems);
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey::new(api_version, kind, namespace, name)
    }

    const SCOPE: &str = "
destinations:
- {name: 'member*', namespace: 'team-a-*'}
- {name: '*', namespace: '!kube-*'}
clusterResourceWhitelist:
- {group: '', kind: Namespace}
namespaceResourceBlacklist:
- {group: '', kind: ResourceQuota}
";

    #[test]
    fn argo_cd_fields_decide_by_destination_and_kind() {
        let project = Project::parse(SCOPE).unwrap();
        let cm = |ns| key("v1", "ConfigMap", Some(ns), "x");
        assert_eq!(project.denies("member1", &cm("team-a-web")), None);
        assert!(project.denies("edge1", &cm("team-a-web")).unwrap().contains("not among the destinations"));
        assert!(project.denies("member1", &cm("kube-system")).unwrap().contains("denied"));
        assert!(project.denies("member1", &cm("default")).unwrap().contains("namespace default"));
        let binding = key("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", None, "admin");
        assert_eq!(
            project.denies("member1", &binding).unwrap(),
            "cluster-scoped ClusterRoleBinding.rbac.authorization.k8s.io is not in clusterResourceWhitelist"
        );
        assert_eq!(project.denies("member1", &key("v1", "Namespace", None, "team-a-web")), None);
        assert!(project.denies("member1", &key("v1", "Namespace", None, "flotilla-system")).is_some());
        assert!(
            project
                .denies("member1", &key("v1", "ResourceQuota", Some("team-a-web"), "q"))
                .unwrap()
                .contains("Blacklist")
        );
    }

    #[test]
    fn a_kind_of_unknown_scope_is_refused_unless_a_crd_or_the_scope_says() {
        let project = Project::parse(SCOPE).unwrap();
        let none = BTreeSet::new();
        // A cluster-scoped custom kind written with a namespace must not pass for a
        // namespaced object.
        let store = key("external-secrets.io/v1beta1", "ClusterSecretStore", Some("team-a-web"), "all-namespaces");
        let why = project.unknown_scope(&store, &none).expect("refused");
        assert!(why.contains("ClusterSecretStore.external-secrets.io") && why.contains("namespacedResources"), "{why}");
        let declared = BTreeSet::from([("external-secrets.io".to_owned(), "ClusterSecretStore".to_owned())]);
        assert_eq!(project.unknown_scope(&store, &declared), None, "its CRD in the repository decides");
        let vouched =
            Project::parse(&format!("{SCOPE}namespacedResources: [{{group: external-secrets.io, kind: '*'}}]\n"))
                .unwrap();
        assert_eq!(vouched.unknown_scope(&store, &none), None);
        // Built-in kinds are known, whichever their scope.
        assert_eq!(project.unknown_scope(&key("v1", "ConfigMap", Some("team-a-web"), "c"), &none), None);
        let slice = key("resource.k8s.io/v1", "ResourceSlice", None, "s");
        assert_eq!(project.unknown_scope(&slice, &none), None);
        assert!(project.denies("member1", &slice).unwrap().contains("not in clusterResourceWhitelist"));
    }

    #[test]
    fn an_app_project_manifest_is_read_as_it_is() {
        let manifest = format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: AppProject\nmetadata: {{name: team-a}}\nspec:\n{}",
            SCOPE.lines().map(|l| format!("  {l}\n")).collect::<String>()
        );
        assert_eq!(Project::parse(&manifest).unwrap(), Project::parse(SCOPE).unwrap());
        assert!(Project::parse("destinations: 3").is_err());
    }

    #[test]
    fn globs() {
        assert!(glob("*", ""));
        assert!(glob("team-*", "team-a"));
        assert!(glob("m?mber*", "member12"));
        assert!(!glob("team-*", "teams"));
        assert!(glob("*-system", "kube-system"));
        assert!(!glob("a*b", "acbd"));
    }
}
