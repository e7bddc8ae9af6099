//! The inventory in real members: it names the repository it belongs to, a corrupt one
//! is recovered without hand edits, and one past a ConfigMap's size continues in parts.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};

use crate::apply::{apply, fleet};
use crate::members::{Dedicated, members};
use crate::support::{repo, write};

async fn inventory(members: &crate::members::Members, instance: &str) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(members.client("member1").await, "flotilla-system");
    api.get(&format!("flotilla-inventory-{instance}")).await.unwrap()
}

/// A second repository applied under the same instance name is refused before it
/// writes anything, naming both sources; `--adopt-inventory` moves the instance on.
#[tokio::test(flavor = "multi_thread")]
async fn an_inventory_of_another_repository_is_refused_until_adopted() {
    let members = members();
    let ns = "e2e-source";
    let (first, second) = (repo(&[]), repo(&[]));
    write(first.path(), "fleet.yaml", fleet(ns, &[("one", &["member1"])]).as_bytes());
    write(second.path(), "fleet.yaml", fleet(ns, &[("two", &["member1"])]).as_bytes());
    let (code, stdout, stderr) = apply(members, first.path(), "same-name", &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let recorded = inventory(members, "same-name").await.data.unwrap()["source"].clone();
    let first_dir = std::fs::canonicalize(first.path()).unwrap();
    assert!(recorded.contains(first_dir.to_str().unwrap()), "{recorded}");

    let writes = || {
        members.writes(|e| {
            let r = &e["objectRef"];
            r["namespace"] == ns || r["name"] == ns || r["name"] == "flotilla-inventory-same-name"
        })
    };
    let before = writes();
    let (code, stdout, stderr) = apply(members, second.path(), "same-name", &[]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stderr.contains("belongs to") && stderr.contains("--adopt-inventory"), "{stderr}");
    assert!(stderr.contains(first_dir.to_str().unwrap()), "names the recorded source: {stderr}");
    assert_eq!(writes(), before, "nothing is written for another source's inventory");

    let (code, stdout, stderr) = apply(members, second.path(), "same-name", &["--adopt-inventory", "--force-prune"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let cms: Api<ConfigMap> = Api::namespaced(members.client("member1").await, ns);
    assert!(cms.get_opt("one").await.unwrap().is_none(), "adopted, the inventory prunes what the new source dropped");
    assert!(cms.get_opt("two").await.unwrap().is_some());
}

/// An inventory that does not parse is reported, nothing is pruned from it, and it is
/// rewritten, so the member is not stuck until someone edits it by hand.
#[tokio::test(flavor = "multi_thread")]
async fn a_corrupt_inventory_is_reported_and_recovered() {
    let members = members();
    let ns = "e2e-corrupt";
    let dir = repo(&[]);
    write(dir.path(), "fleet.yaml", fleet(ns, &[("a", &["member1"]), ("b", &["member1"])]).as_bytes());
    assert_eq!(apply(members, dir.path(), "corrupt", &[]).0, 0);
    let api: Api<ConfigMap> = Api::namespaced(members.client("member1").await, "flotilla-system");
    let mut cm = inventory(members, "corrupt").await;
    cm.data.as_mut().unwrap().insert("objects".into(), "[[\"v1\", \"ConfigMap\"".into());
    api.replace("flotilla-inventory-corrupt", &Default::default(), &cm).await.unwrap();

    write(dir.path(), "fleet.yaml", fleet(ns, &[("a", &["member1"])]).as_bytes());
    let (code, stdout, stderr) = apply(members, dir.path(), "corrupt", &["--force-prune"]);
    assert_eq!(code, 1, "reported: {stdout}\n{stderr}");
    assert!(stderr.contains("unreadable") && stderr.contains("nothing is pruned"), "{stderr}");
    let cms: Api<ConfigMap> = Api::namespaced(members.client("member1").await, ns);
    assert!(cms.get_opt("b").await.unwrap().is_some(), "nothing pruned from an unreadable inventory");
    let (code, stdout, stderr) = apply(members, dir.path(), "corrupt", &[]);
    assert_eq!(code, 0, "recovered without a hand edit: {stdout}\n{stderr}");
    assert!(stdout.contains("0 applied"), "{stdout}");
}

/// 20,000 objects in one member: more than one ConfigMap holds, so the inventory
/// continues in parts; a smaller one replaces the parts and deletes the stale one.
#[tokio::test(flavor = "multi_thread")]
async fn an_inventory_of_twenty_thousand_objects_is_split_across_config_maps() {
    let cluster = Dedicated::start(1);
    let members = &cluster.0;
    let ns = "e2e-big";
    let dir = repo(&[]);
    let head = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: member1}}\nspec: {{syncMode: Push}}\n---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: all, namespace: {ns}}}\nspec:\n  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap}}]\n  placement: {{clusterAffinity: {{clusterNames: [member1]}}}}\n"
    );
    write(dir.path(), "fleet.yaml", head.as_bytes());
    // Files of 1,000 ConfigMaps each (a file holds at most 10,000 documents), named at
    // a realistic length: 20,000 keys of ~58 bytes are more than one ConfigMap holds.
    let config_maps = |file: usize| {
        (file * 1000..(file + 1) * 1000)
            .map(|i| format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: application-settings-{i:05}, namespace: {ns}}}\n"))
            .collect::<Vec<_>>()
            .join("---\n")
    };
    for file in 0..20 {
        write(dir.path(), &format!("cms/{file:02}.yaml"), config_maps(file).as_bytes());
    }
    let (code, stdout, stderr) = apply(members, dir.path(), "big", &["--concurrency", "32"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let head = inventory(members, "big").await.data.unwrap();
    let parts = head.get("parts").expect("split into parts").clone();
    assert!(parts.ends_with(" 1"), "{parts}");
    let api: Api<ConfigMap> = Api::namespaced(members.client("member1").await, "flotilla-system");
    let listed = || async {
        let params = ListParams::default().labels("flotilla.dev/inventory-part=big");
        api.list(&params).await.unwrap().items.into_iter().filter_map(|c| c.metadata.name).collect::<Vec<_>>()
    };
    assert_eq!(listed().await.len(), 1);

    // Read back whole: a second run finds all 20,000 unchanged.
    let (code, stdout, stderr) = apply(members, dir.path(), "big", &["--concurrency", "32"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("0 applied, 20001 unchanged, 0 pruned"), "{stdout}");

    std::fs::remove_file(dir.path().join("cms/19.yaml")).unwrap();
    let (code, stdout, stderr) = apply(members, dir.path(), "big", &["--concurrency", "32"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("1000 pruned"), "{stdout}");
    let generation = inventory(members, "big").await.data.unwrap()["parts"].split(' ').next().unwrap().to_owned();
    assert!(!parts.starts_with(&generation), "a new generation of parts: {parts} → {generation}");
    assert_eq!(listed().await, [format!("flotilla-inventory-big-{generation}-1")], "the stale part is deleted");
}
