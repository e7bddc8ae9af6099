//! Where an autoscaler writes the replicas of a workload a Helm chart renders. A
//! rendered file is nobody's to edit, so the HelmChart names the values key that sets
//! the workload's `spec.replicas` (`spec.replicaValues`), and the count is written where
//! Helm reads that key last: `spec.values` when it sets the key, else the last values
//! file that sets it, else `spec.values` (added there, so it wins over every file).

use serde_json::Value;

use crate::load::HelmChart;
use crate::model::ObjectKey;
use crate::model::source::{ReplicaValue, helm_output_prefix};

/// A field to set: the document of a repository file and the path in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// Repository-relative file.
    pub file: String,
    /// 1-based document in it.
    pub document: usize,
    /// Keys from the document's root.
    pub path: Vec<String>,
}

/// The HelmChart whose output `file` is (`helm:NAMESPACE/NAME:…`), among `charts`.
pub fn chart_of<'a>(charts: &'a [HelmChart], file: &str) -> Option<&'a HelmChart> {
    charts.iter().find(|c| file.starts_with(&helm_output_prefix(c.namespace.as_deref().unwrap_or("default"), &c.name)))
}

/// The chart's entry for the rendered workload `key` (by kind and name).
pub fn entry<'a>(chart: &'a HelmChart, key: &ObjectKey) -> Option<&'a ReplicaValue> {
    chart.spec.replica_values.iter().find(|e| e.kind == key.kind && e.name == key.name)
}

/// Whether `value` holds something at `keys`.
fn sets(value: &Value, keys: &[&str]) -> bool {
    keys.iter().try_fold(value, |at, key| at.get(key)).is_some()
}

/// Where the count for `keys` is written, given the chart's values files in the order
/// Helm applies them, each parsed (`None`: it did not parse, so it sets nothing).
pub fn location(chart: &HelmChart, keys: &[&str], values_files: &[(&str, Option<Value>)]) -> Location {
    let in_spec = || Location {
        file: chart.origin.file.to_string(),
        document: chart.origin.document,
        path: ["spec", "values"].iter().chain(keys).map(|k| (*k).to_owned()).collect(),
    };
    if chart.spec.values.as_ref().is_some_and(|v| sets(v, keys)) {
        return in_spec();
    }
    let last = values_files.iter().rev().find(|(_, v)| v.as_ref().is_some_and(|v| sets(v, keys)));
    match last {
        Some((file, _)) => {
            Location { file: (*file).to_owned(), document: 1, path: keys.iter().map(|k| (*k).to_owned()).collect() }
        }
        None => in_spec(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::model::{Named, Origin};

    fn chart(values: Option<Value>) -> HelmChart {
        let spec = serde_json::from_value(json!({
            "chart": "charts/shop",
            "valuesFiles": ["a.yaml", "b.yaml"],
            "values": values,
            "replicaValues": [{"kind": "Deployment", "name": "web", "path": "web.replicas"}],
        }))
        .unwrap();
        Arc::new(Named {
            namespace: Some("shop".into()),
            name: "shop".into(),
            spec,
            origin: Origin { file: Arc::from("charts.yaml"), document: 2, line: 5 },
        })
    }

    #[test]
    fn the_chart_of_an_output_file_is_found_by_namespace_and_name() {
        let charts = [chart(None)];
        assert!(chart_of(&charts, "helm:shop/shop:shop/templates/web.yaml").is_some());
        assert!(chart_of(&charts, "helm:other/shop:shop/templates/web.yaml").is_none());
        assert!(chart_of(&charts, "kustomize:shop/kustomization.yaml").is_none());
        assert!(chart_of(&charts, "shop.yaml").is_none());
    }

    #[test]
    fn the_count_goes_where_helm_reads_the_key_last() {
        let keys = ["web", "replicas"];
        let files = |a: Value, b: Value| [("a.yaml", Some(a)), ("b.yaml", Some(b))];
        let set = json!({"web": {"replicas": 2}});
        let other = json!({"web": {"image": "x"}});
        // spec.values is applied after every file.
        let here = location(&chart(Some(set.clone())), &keys, &files(set.clone(), set.clone()));
        assert_eq!((here.file.as_str(), here.document), ("charts.yaml", 2));
        assert_eq!(here.path, ["spec", "values", "web", "replicas"]);
        // Else the last file that sets it.
        let here = location(&chart(Some(other.clone())), &keys, &files(set.clone(), other.clone()));
        assert_eq!((here.file.as_str(), here.document, here.path.join(".")), ("a.yaml", 1, "web.replicas".into()));
        let here = location(&chart(None), &keys, &files(set.clone(), set.clone()));
        assert_eq!(here.file, "b.yaml");
        // Set nowhere (or only in the chart's own values.yaml): added to spec.values.
        let here = location(&chart(None), &keys, &[("a.yaml", None), ("b.yaml", Some(other))]);
        assert_eq!((here.file.as_str(), here.path.join(".")), ("charts.yaml", "spec.values.web.replicas".into()));
    }

    #[test]
    fn an_entry_names_a_workload_by_kind_and_name() {
        let c = chart(None);
        let key = |kind: &str, name: &str| ObjectKey {
            api_version: "apps/v1".into(),
            kind: kind.into(),
            namespace: Some("shop".into()),
            name: name.into(),
        };
        assert_eq!(entry(&c, &key("Deployment", "web")).map(|e| e.path.as_str()), Some("web.replicas"));
        assert!(entry(&c, &key("StatefulSet", "web")).is_none());
        assert!(entry(&c, &key("Deployment", "api")).is_none());
    }

    #[test]
    fn a_values_key_is_dotted_plain_names() {
        let e = |path: &str| ReplicaValue { kind: "Deployment".into(), name: "web".into(), path: path.into() };
        assert_eq!(e("web.replicas").keys().unwrap(), ["web", "replicas"]);
        assert_eq!(e("replicaCount").keys().unwrap(), ["replicaCount"]);
        for bad in ["", "web.", ".web", "web..replicas", "web[0]", "a b"] {
            assert!(e(bad).keys().is_err(), "{bad:?}");
        }
    }
}
