//! What a member runs while a rollout holds it back: the newest revision's objects,
//! except those a RolloutPolicy governs, which come from the revision the rollout
//! gives the member (the last good one, until its batch moves). Each member's share is
//! composed from the two renders' shares; no object is ever a mix of the two.

use std::collections::BTreeSet;

use super::governed;
use crate::finish::Share;
use crate::model::{ObjectKey, Plan};

/// The keys `policy` (by namespace and name) governs in either render: in the newer
/// one for templates it has, else in the older one (a template the newer revision
/// removed stays until the member moves, and then goes).
pub fn governed_keys(newer: &Plan, older: &Plan, policy: (Option<&str>, &str)) -> BTreeSet<ObjectKey> {
    let mut keys = BTreeSet::new();
    for (plan, from_newer) in [(newer, true), (older, false)] {
        let policies = &plan.loaded.rollout_policies;
        for (template, claim) in plan.loaded.templates.iter().zip(governed(&plan.loaded)) {
            let Some(p) = claim else { continue };
            let is = (policies[p].namespace.as_deref(), policies[p].name.as_str()) == policy;
            // The newer render decides for the templates it has.
            let decided_by_newer = !from_newer && newer.loaded.template(&template.key).is_some();
            if is && !decided_by_newer {
                keys.insert(template.key.clone());
            }
        }
    }
    keys
}

/// A held member's share: `newer`'s objects not in `governed`, and `older`'s objects in
/// it. Objects either render protects (a problem, suspended dispatching) stay protected
/// where their side is the one used.
pub fn held<'p>(newer: Share<'p>, older: Share<'p>, governed: &BTreeSet<ObjectKey>) -> Share<'p> {
    let mut objects: Vec<_> = newer.objects.into_iter().filter(|o| !governed.contains(&o.key)).collect();
    objects.extend(older.objects.into_iter().filter(|o| governed.contains(&o.key)));
    let mut protected: BTreeSet<ObjectKey> = newer.protected.into_iter().filter(|k| !governed.contains(k)).collect();
    protected.extend(older.protected.into_iter().filter(|k| governed.contains(k)));
    Share { objects, protected }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finish::{Context, finish};

    const REPO: &str = r#"
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member1}
spec: {syncMode: Push}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web-config, namespace: shop, labels: {app: web}}
data: {color: COLOR}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: tools, namespace: shop}
data: {version: "VERSION"}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: all, namespace: shop}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  placement: {clusterAffinity: {clusterNames: [member1]}}
---
apiVersion: flotilla.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: web, namespace: shop}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, labelSelector: {matchLabels: {app: web}}}]
"#;

    fn plan(revision: &str, text: &str) -> Plan {
        crate::plan_of(revision, text)
    }

    fn data(share: &Share<'_>) -> Vec<(String, String)> {
        let finished = share.finish_all().unwrap();
        finished.iter().map(|f| (f.key.name.clone(), f.manifest["data"].to_string())).collect()
    }

    #[test]
    fn a_held_member_runs_the_newest_revision_but_what_the_rollout_governs() {
        let older = plan("r1", &REPO.replace("COLOR", "blue").replace("VERSION", "1"));
        let extra = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-extra, namespace: shop, labels: {app: web}}\ndata: {a: b}\n";
        let newer = plan("r2", &(REPO.replace("COLOR", "green").replace("VERSION", "2") + extra));
        let governed = governed_keys(&newer, &older, (Some("shop"), "web"));
        let names: Vec<&str> = governed.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["web-config", "web-extra"]);
        let autoscaled = BTreeSet::new();
        let context = Context { instance: "flotilla", autoscaled: &autoscaled };
        let share = held(finish(&newer, "member1", context), finish(&older, "member1", context), &governed);
        // `tools` (ungoverned) is already at r2; `web-config` stays at r1; `web-extra`,
        // new in r2 and governed, is not there until the member moves.
        let mut got = data(&share);
        got.sort();
        assert_eq!(
            got,
            [
                ("tools".to_owned(), r#"{"version":"2"}"#.to_owned()),
                ("web-config".into(), r#"{"color":"blue"}"#.into())
            ]
        );
        // A template the newer revision no longer lets the rollout govern goes at once:
        // the newer render decides for the templates it has.
        let released = REPO.replace("COLOR", "green").replace("labels: {app: web}", "labels: {app: other}");
        let governed = governed_keys(&plan("r3", &released), &older, (Some("shop"), "web"));
        assert!(governed.is_empty(), "{governed:?}");
        // A governed template the newer revision removed stays while the member is held.
        let start = REPO.find("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-config").unwrap();
        let end = REPO[start + 4..].find("---").unwrap() + start + 4;
        let removed = plan("r4", &format!("{}{}", &REPO[..start], &REPO[end..]));
        let governed = governed_keys(&removed, &older, (Some("shop"), "web"));
        let share = held(finish(&removed, "member1", context), finish(&older, "member1", context), &governed);
        let names: Vec<String> = share.objects.iter().map(|o| o.key.name.clone()).collect();
        assert!(names.contains(&"web-config".to_owned()), "{names:?}");
    }
}
