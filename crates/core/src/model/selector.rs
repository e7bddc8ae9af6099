//! Label selectors (`metav1.LabelSelector`) and node-selector-style requirements.
//!
//! Written here rather than taken from `kube-core`: its `Selector` needs a
//! `k8s-openapi` version feature in this pure crate, and it does not reject the invalid
//! keys that Kubernetes' `LabelSelectorAsSelector` rejects. Karmada treats a selector
//! that fails to parse as "no match" (vector `selector-priority-table`, "labels error"),
//! so validity is part of the semantics.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

/// Where a selector reads labels from: a cluster's map, a template's [`Labels`].
pub trait LabelLookup {
    /// The value of label `key`.
    fn label(&self, key: &str) -> Option<&str>;
}

impl LabelLookup for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// A template's labels, held compact: the pairs sorted by key in one shared slice (a
/// B-tree map costs a node of eleven slots even for one label, and there is a set per
/// template).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels(Arc<[(Box<str>, Box<str>)]>);

impl Labels {
    /// The value of label `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.binary_search_by(|(k, _)| (**k).cmp(key)).ok().map(|i| &*self.0[i].1)
    }

    /// Whether label `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The pairs, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<BTreeMap<String, String>> for Labels {
    /// A map is sorted and without repeats already.
    fn from(map: BTreeMap<String, String>) -> Self {
        Labels(map.into_iter().map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str())).collect())
    }
}

impl FromIterator<(String, String)> for Labels {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(pairs: I) -> Self {
        Labels::from(pairs.into_iter().collect::<BTreeMap<_, _>>())
    }
}

impl LabelLookup for Labels {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key)
    }
}

/// `metav1.LabelSelector`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    /// Exact key/value pairs, ANDed.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements, ANDed.
    #[serde(default)]
    pub match_expressions: Vec<Requirement>,
}

/// One set-based requirement: `key`, `operator`, `values`.
///
/// Shared by `LabelSelectorRequirement` (In, NotIn, Exists, DoesNotExist) and
/// `NodeSelectorRequirement` (adds Gt, Lt), which have the same shape.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Requirement {
    /// Label key.
    #[serde(default)]
    pub key: String,
    /// Operator name as written.
    #[serde(default)]
    pub operator: String,
    /// Operand values.
    #[serde(default)]
    pub values: Vec<String>,
}

impl LabelSelector {
    /// Whether the selector parses and matches `labels`. An invalid selector matches
    /// nothing, as in Karmada.
    pub fn matches(&self, labels: &impl LabelLookup) -> bool {
        self.is_valid()
            && self.match_labels.iter().all(|(k, v)| labels.label(k) == Some(v.as_str()))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }

    /// Kubernetes' validity rules: qualified keys, valid values, operator arity.
    pub fn is_valid(&self) -> bool {
        self.check().is_ok()
    }

    /// [`Self::is_valid`] with the reason, as `field: why` relative to the selector.
    pub fn check(&self) -> Result<(), String> {
        for (k, v) in &self.match_labels {
            if !is_qualified_name(k) {
                return Err(format!("matchLabels: key {k:?} is not a qualified name"));
            }
            if !is_label_value(v) {
                return Err(format!("matchLabels.{k}: {v:?} is not a valid label value"));
            }
        }
        for (i, r) in self.match_expressions.iter().enumerate() {
            r.check_label_requirement().map_err(|why| format!("matchExpressions[{i}].{why}"))?;
        }
        Ok(())
    }
}

impl std::str::FromStr for LabelSelector {
    type Err = String;

    /// The string form `kubectl -l` takes: terms separated by commas, each `key=value`
    /// (or `==`), `key!=value`, `key in (a,b)`, `key notin (a,b)`, `key` (exists) or
    /// `!key` (does not exist); an empty string selects everything. The result is
    /// checked as a written selector is.
    fn from_str(text: &str) -> Result<Self, String> {
        let mut selector = LabelSelector::default();
        for term in terms(text) {
            let requirement = |key: &str, operator: &str, values: Vec<String>| Requirement {
                key: key.trim().to_owned(),
                operator: operator.to_owned(),
                values,
            };
            let set = |list: &str| -> Result<Vec<String>, String> {
                let inner = list.trim().strip_prefix('(').and_then(|l| l.strip_suffix(')'));
                let inner = inner.ok_or_else(|| format!("{term:?}: the values go in parentheses"))?;
                Ok(inner.split(',').map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned).collect())
            };
            let found = if let Some(key) = term.strip_prefix('!') {
                requirement(key, "DoesNotExist", Vec::new())
            } else if let Some((key, list)) = term.split_once(" notin ") {
                requirement(key, "NotIn", set(list)?)
            } else if let Some((key, list)) = term.split_once(" in ") {
                requirement(key, "In", set(list)?)
            } else if let Some((key, value)) = term.split_once("!=") {
                requirement(key, "NotIn", vec![value.trim().to_owned()])
            } else if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
                requirement(key, "In", vec![value.trim().to_owned()])
            } else {
                requirement(term, "Exists", Vec::new())
            };
            selector.match_expressions.push(found);
        }
        selector.check()?;
        Ok(selector)
    }
}

/// The terms of a selector's string form: split at commas outside parentheses, trimmed,
/// empty ones dropped.
fn terms(text: &str) -> Vec<&str> {
    let (mut terms, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(text[start..].trim());
    terms.retain(|t| !t.is_empty());
    terms
}

impl Requirement {
    /// Label-selector semantics for In, NotIn, Exists, DoesNotExist; anything else fails.
    pub fn matches(&self, labels: &impl LabelLookup) -> bool {
        let value = labels.label(&self.key);
        match self.operator.as_str() {
            "In" => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            "NotIn" => value.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    }

    fn check_label_requirement(&self) -> Result<(), String> {
        if !is_qualified_name(&self.key) {
            return Err(format!("key: {:?} is not a qualified name", self.key));
        }
        let needs_values = match self.operator.as_str() {
            "In" | "NotIn" => true,
            "Exists" | "DoesNotExist" => false,
            other => return Err(format!("operator: {other:?} is not In, NotIn, Exists or DoesNotExist")),
        };
        match (needs_values, self.values.is_empty()) {
            (true, true) => Err(format!("values: must be non-empty with operator {}", self.operator)),
            (false, false) => Err(format!("values: must be empty with operator {}", self.operator)),
            _ => self
                .values
                .iter()
                .find(|v| !is_label_value(v))
                .map_or(Ok(()), |v| Err(format!("values: {v:?} is not a valid label value"))),
        }
    }
}

/// A label key: optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters of alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
pub fn is_qualified_name(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    prefix.is_none_or(super::names::is_dns1123_subdomain) && !name.is_empty() && is_label_value(name)
}

/// A label value: empty, or at most 63 characters of alphanumerics, `-`, `_`, `.`,
/// starting and ending alphanumeric.
pub fn is_label_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && value.as_bytes()[0].is_ascii_alphanumeric()
            && value.as_bytes()[value.len() - 1].is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_string_form_selects_as_kubectl_l_does() {
        let web = labels(&[("app", "web"), ("tier", "front")]);
        let db = labels(&[("app", "db")]);
        let selects = |text: &str, l: &BTreeMap<String, String>| text.parse::<LabelSelector>().unwrap().matches(l);
        assert!(selects("app=web", &web) && !selects("app=web", &db));
        assert!(selects("app==web,tier", &web) && !selects("app==db,tier", &db));
        assert!(selects("app!=web", &db) && !selects("app!=web", &web));
        assert!(selects("app in (web, db)", &db) && selects("app in (web,db),!tier", &db));
        assert!(!selects("app notin (web,db)", &web) && selects("!tier", &db));
        assert!(selects("", &db), "empty selects everything");
        assert!(selects(" app = web , tier ", &web), "spaces around terms");
        for bad in ["app in web", "-bad=x", "app=not a value", "app in ()"] {
            assert!(bad.parse::<LabelSelector>().is_err(), "{bad}");
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn match_labels_and_expressions_are_anded() {
        let sel = LabelSelector {
            match_labels: labels(&[("app", "web")]),
            match_expressions: vec![Requirement {
                key: "tier".into(),
                operator: "NotIn".into(),
                values: vec!["db".into()],
            }],
        };
        assert!(sel.matches(&labels(&[("app", "web")])));
        assert!(sel.matches(&labels(&[("app", "web"), ("tier", "fe")])));
        assert!(!sel.matches(&labels(&[("app", "web"), ("tier", "db")])));
        assert!(!sel.matches(&labels(&[("tier", "fe")])));
    }

    #[test]
    fn an_invalid_selector_matches_nothing() {
        let empty_key = LabelSelector { match_labels: labels(&[("", "bar")]), ..Default::default() };
        assert!(!empty_key.matches(&labels(&[("", "bar")])));
        let in_without_values = LabelSelector {
            match_expressions: vec![Requirement { key: "a".into(), operator: "In".into(), values: vec![] }],
            ..Default::default()
        };
        assert!(!in_without_values.matches(&labels(&[("a", "")])));
    }

    #[test]
    fn qualified_names() {
        assert!(is_qualified_name("app"));
        assert!(is_qualified_name("topology.kubernetes.io/zone"));
        assert!(!is_qualified_name("Upper.Case/x"));
        assert!(!is_qualified_name("-lead"));
        assert!(!is_qualified_name("a/"));
        assert!(!is_qualified_name(&"x".repeat(64)));
    }
}
