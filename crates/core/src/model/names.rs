//! The grammar Kubernetes gives names (`k8s.io/apimachinery/pkg/util/validation` and
//! `pkg/api/validation/path`), so a name the API server would refuse is refused on load,
//! with the rule it breaks, instead of failing later in one member or corrupting state.

/// A DNS-1123 label: at most 63 characters of `a-z`, `0-9`, `-`, starting and ending
/// alphanumeric. Namespaces and most label-like names.
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && is_label_run(s, |b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// A DNS-1035 label: a DNS-1123 label that starts with a letter. Service names.
pub fn is_dns1035_label(s: &str) -> bool {
    is_dns1123_label(s) && s.as_bytes()[0].is_ascii_lowercase()
}

/// A DNS-1123 subdomain: at most 253 characters, dot-separated DNS-1123 labels. The name
/// of most kinds, custom resources included.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

/// A path segment: not `.` or `..`, no `/` or `%`. The name of RBAC kinds, which allow
/// `system:controller:...`.
pub fn is_path_segment(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '%'])
}

/// Non-empty, `alnum` at both ends, `-` only inside.
fn is_label_run(s: &str, alnum: impl Fn(u8) -> bool) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.iter().all(|&b| alnum(b) || b == b'-')
        && alnum(bytes[0])
        && alnum(bytes[bytes.len() - 1])
}

/// Which rule a kind's `metadata.name` follows on the API server.
pub fn name_rule(group: &str, kind: &str) -> NameRule {
    match (group, kind) {
        ("", "Namespace") => NameRule::Dns1123Label,
        ("", "Service") => NameRule::Dns1035Label,
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding") => {
            NameRule::PathSegment
        }
        _ => NameRule::Dns1123Subdomain,
    }
}

/// A naming rule, with the words used in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// [`is_dns1123_label`].
    Dns1123Label,
    /// [`is_dns1035_label`].
    Dns1035Label,
    /// [`is_dns1123_subdomain`].
    Dns1123Subdomain,
    /// [`is_path_segment`].
    PathSegment,
}

impl NameRule {
    /// Whether `name` follows the rule.
    pub fn allows(self, name: &str) -> bool {
        match self {
            NameRule::Dns1123Label => is_dns1123_label(name),
            NameRule::Dns1035Label => is_dns1035_label(name),
            NameRule::Dns1123Subdomain => is_dns1123_subdomain(name),
            NameRule::PathSegment => is_path_segment(name),
        }
    }

    /// The rule in words, for errors.
    pub fn describe(self) -> &'static str {
        match self {
            NameRule::Dns1123Label => {
                "a DNS-1123 label (at most 63 characters: lower-case letters, digits and '-', alphanumeric at both ends)"
            }
            NameRule::Dns1035Label => {
                "a DNS-1035 label (at most 63 characters: lower-case letters, digits and '-', starting with a letter, ending alphanumeric)"
            }
            NameRule::Dns1123Subdomain => {
                "a DNS-1123 subdomain (at most 253 characters: lower-case letters, digits, '-' and '.', alphanumeric at both ends of each part)"
            }
            NameRule::PathSegment => "a path segment (not '.' or '..', without '/' or '%')",
        }
    }
}

/// A kind, as a CRD's `spec.names.kind` must be: its lower-case form a DNS-1035 label
/// (a letter first, then letters, digits and inner `-`; no `/`, `.` or spaces).
pub fn is_kind(kind: &str) -> bool {
    is_dns1035_label(&kind.to_ascii_lowercase())
}

/// An apiVersion: `VERSION` (the core group) or `GROUP/VERSION`, the group a DNS-1123
/// subdomain and the version a DNS-1035 label.
pub fn is_api_version(api_version: &str) -> bool {
    match api_version.split_once('/') {
        Some((group, version)) => is_dns1123_subdomain(group) && is_dns1035_label(version),
        None => is_dns1035_label(api_version),
    }
}

/// `name` if it is at most `max` bytes long; else cut, and ended with a hash of the
/// whole name so that two long names that share a beginning stay apart. Names are
/// ASCII, as every Kubernetes name is.
pub fn fit(name: String, max: usize) -> String {
    if name.len() <= max {
        return name;
    }
    let hash = name.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    let kept = name[..max - 9].trim_end_matches(['-', '.']);
    format!("{kept}-{hash:08x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_api_servers_rules() {
        assert!(is_dns1123_subdomain("nginx.v2-a"));
        assert!(!is_dns1123_subdomain("a b"));
        assert!(!is_dns1123_subdomain("Nginx"));
        assert!(!is_dns1123_subdomain("a..b"));
        assert!(!is_dns1123_subdomain(&"a".repeat(254)));
        assert!(is_dns1123_label("default"));
        assert!(!is_dns1123_label("kube.system"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_dns1035_label("nginx-service"));
        assert!(!is_dns1035_label("1nginx"));
        assert!(is_path_segment("system:controller:job"));
        assert!(!is_path_segment(".."));
        assert!(!is_path_segment("a/b"));
        assert!(!is_path_segment("a%2f"));
    }

    #[test]
    fn kinds_and_api_versions_by_grammar() {
        assert!(is_kind("Deployment"));
        assert!(is_kind("HTTPRoute"));
        assert!(!is_kind("../../../escaped"));
        assert!(!is_kind("Dep loyment"));
        assert!(!is_kind("9Lives"));
        assert!(is_api_version("v1"));
        assert!(is_api_version("apps/v1"));
        assert!(is_api_version("policy.karmada.io/v1alpha1"));
        assert!(!is_api_version("apps/v1/x"));
        assert!(!is_api_version("Apps/v1"));
        assert!(!is_api_version(""));
    }

    #[test]
    fn rbac_kinds_take_path_segments_and_services_dns1035() {
        assert_eq!(name_rule("rbac.authorization.k8s.io", "ClusterRole"), NameRule::PathSegment);
        assert!(name_rule("rbac.authorization.k8s.io", "ClusterRole").allows("system:aggregate-to-view"));
        assert!(!name_rule("", "Service").allows("9svc"));
        assert!(!name_rule("apps", "Deployment").allows("system:x"));
        assert!(!name_rule("", "Namespace").allows("a.b"));
    }
}
