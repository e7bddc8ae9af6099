//! `policy.karmada.io/v1alpha1` FederatedResourceQuota, typed so that a bad spec is a
//! load error. Like a policy it is never sent to a member itself: each static assignment
//! becomes a ResourceQuota of the same name and namespace in its member, holding the
//! assignment's `hard` (Karmada's static-assignment sync controller).

use std::collections::BTreeMap;

use serde::Deserialize;

/// `FederatedResourceQuota.spec`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FederatedResourceQuotaSpec {
    /// The namespace's limit across the fleet, by resource name.
    pub overall: BTreeMap<String, Quantity>,
    /// Each member's share of it.
    #[serde(default)]
    pub static_assignments: Vec<StaticAssignment>,
}

/// `spec.staticAssignments[]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StaticAssignment {
    /// The member.
    pub cluster_name: String,
    /// Its ResourceQuota's `spec.hard`.
    pub hard: BTreeMap<String, Quantity>,
}

/// A quantity as written: `10`, `500m`, `64Gi` (YAML numbers are read as their text).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Quantity {
    /// Written as a string.
    Text(String),
    /// Written as a YAML number.
    Number(serde_json::Number),
}

impl Quantity {
    /// The quantity as Kubernetes reads it.
    pub fn text(&self) -> String {
        match self {
            Quantity::Text(s) => s.clone(),
            Quantity::Number(n) => n.to_string(),
        }
    }
}

impl FederatedResourceQuotaSpec {
    /// The assignment of `cluster`, if it has one.
    pub fn assignment(&self, cluster: &str) -> Option<usize> {
        self.static_assignments.iter().position(|a| a.cluster_name == cluster)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::model::{ClusterState, Limits, Plan, RepoFiles};

    const CLUSTERS: &str = "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member1}\nspec: {syncMode: Push}\n---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member2}\nspec: {syncMode: Push}\n---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member3}\nspec: {syncMode: Push}\n";

    fn plan(spec: &str) -> Result<Plan, crate::LoadError> {
        let quota = format!(
            "apiVersion: policy.karmada.io/v1alpha1\nkind: FederatedResourceQuota\nmetadata: {{name: team, namespace: shop}}\nspec:\n{spec}"
        );
        let mut files = RepoFiles { revision: "r1".into(), ..Default::default() };
        files.files.insert("fleet.yaml".into(), format!("{CLUSTERS}---\n{quota}").into_bytes());
        crate::plan(&files, &ClusterState::default(), &Limits::default())
    }

    fn quota(plan: &Plan, cluster: &str) -> Option<Value> {
        plan.manifests(cluster).map(Result::unwrap).find(|m| m["kind"] == "ResourceQuota")
    }

    const SPEC: &str = "  overall: {cpu: 100, memory: 200Gi, pods: \"50\"}\n  staticAssignments:\n  - clusterName: member1\n    hard: {cpu: 20, memory: 50Gi}\n  - clusterName: member2\n    hard: {cpu: 500m, memory: 64Mi, pods: 10}\n  - clusterName: gone\n    hard: {cpu: 1}\n";

    #[test]
    fn each_static_assignment_is_a_resource_quota_in_its_member() {
        let plan = plan(SPEC).unwrap();
        assert!(plan.problems.is_empty(), "{:?}", plan.problems);
        let one = quota(&plan, "member1").unwrap();
        assert_eq!((&one["metadata"]["name"], &one["metadata"]["namespace"]), (&json!("team"), &json!("shop")));
        assert_eq!(one["spec"]["hard"], json!({"cpu": "20", "memory": "50Gi"}));
        assert_eq!(one["metadata"]["annotations"]["flotilla.dev/policy"], "FederatedResourceQuota shop/team");
        let two = quota(&plan, "member2").unwrap();
        assert_eq!(two["spec"]["hard"], json!({"cpu": "500m", "memory": "64Mi", "pods": "10"}));
        // A member without an assignment gets none (Karmada's controller skips it), and
        // an assignment to a cluster the fleet does not declare places nothing.
        assert!(quota(&plan, "member3").is_none());
        assert!(!plan.clusters.contains_key("gone"));
    }

    #[test]
    fn a_quota_karmadas_webhook_would_deny_fails_the_revision() {
        for (spec, expected) in [
            (
                "  overall: {cpu: 10}\n  staticAssignments:\n  - {clusterName: member1, hard: {cpu: 6}}\n  - {clusterName: member2, hard: {cpu: 6}}\n",
                "spec.overall.cpu: 10 is less than the assignments' sum",
            ),
            (
                "  overall: {cpu: 10}\n  staticAssignments:\n  - {clusterName: member1, hard: {memory: 1Gi}}\n",
                "spec.staticAssignments[0].hard.memory: not in spec.overall",
            ),
            ("  overall: {cpu: lots}\n", "spec.overall.cpu: \"lots\" is not a quantity"),
            (
                "  overall: {cpu: 10}\n  staticAssignments:\n  - {clusterName: Member1, hard: {cpu: 1}}\n",
                "spec.staticAssignments[0].clusterName",
            ),
            (
                "  overall: {cpu: 10}\n  staticAssignments:\n  - {clusterName: member1, hard: {cpu: 1}}\n  - {clusterName: member1, hard: {cpu: 1}}\n",
                "member1 is assigned twice",
            ),
            ("  staticAssignments: []\n", "overall"),
        ] {
            let error = plan(spec).err().unwrap_or_else(|| panic!("accepted:\n{spec}")).to_string();
            assert!(error.contains(expected) && error.contains("fleet.yaml"), "{spec}: {error}");
        }
    }
}
