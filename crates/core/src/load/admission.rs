//! What an instance lets a repository declare beyond the schema, as the flags of
//! Karmada's webhook do. Checked after loading; a revision that declares what its
//! instance does not admit does not load (the controller keeps the last good revision).

use super::LoadError;
use crate::model::Loaded;

/// The instance's admission settings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Admission {
    /// NoExecute taints in ClusterTaintPolicies, which Karmada's webhook denies unless
    /// started with `--allow-no-execute-taint-policy`: such a taint evicts every
    /// workload that does not tolerate it from the clusters it lands on.
    pub allow_no_execute_taint_policy: bool,
}

impl Admission {
    /// Refuses the first object `loaded` declares that this instance does not admit,
    /// with its file, document and line.
    pub fn check(&self, loaded: &Loaded) -> Result<(), LoadError> {
        if self.allow_no_execute_taint_policy {
            return Ok(());
        }
        for policy in &loaded.cluster_taint_policies {
            if let Some(i) = policy.spec.taints.iter().position(|t| t.effect == "NoExecute") {
                return Err(LoadError::Invalid {
                    origin: policy.origin.clone(),
                    message: format!(
                        "spec.taints[{i}]: a NoExecute taint is refused unless the instance allows it \
                         (--allow-no-execute-taint-policy, as Karmada's webhook refuses it by default): \
                         it evicts every workload that does not tolerate it"
                    ),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Limits, RepoFiles};

    #[test]
    fn a_no_execute_taint_policy_loads_only_where_the_instance_admits_it() {
        let policy = |effect: &str| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: first}}\n---\napiVersion: policy.karmada.io/v1alpha1\nkind: ClusterTaintPolicy\nmetadata: {{name: evict}}\nspec:\n  taints:\n  - {{key: a, effect: NoSchedule}}\n  - {{key: b, effect: {effect}}}\n"
            )
        };
        let load = |text: String| {
            let mut files = RepoFiles { revision: "r1".into(), ..Default::default() };
            files.files.insert("taints.yaml".into(), text.into_bytes());
            crate::load::load(&files, &Limits::default()).unwrap()
        };
        let denied = Admission::default().check(&load(policy("NoExecute"))).unwrap_err().to_string();
        assert!(denied.starts_with("taints.yaml: document 2 (line 4): spec.taints[1]: a NoExecute taint"), "{denied}");
        assert!(denied.contains("--allow-no-execute-taint-policy"), "{denied}");
        let allowed = Admission { allow_no_execute_taint_policy: true };
        assert!(allowed.check(&load(policy("NoExecute"))).is_ok());
        assert!(Admission::default().check(&load(policy("NoSchedule").replace("key: b", "key: c"))).is_ok());
    }
}
