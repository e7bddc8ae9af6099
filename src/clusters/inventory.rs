//! The inventory of what flotilla applied, kept in each member cluster (ConfigMap
//! `flotilla-system/flotilla-inventory`) so a fresh process knows what it may prune.

use std::collections::BTreeMap;

use flotilla_core::inventory::{Inventory, Source};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams};

use super::FIELD_MANAGER;

/// Namespace of the inventories.
pub const NAMESPACE: &str = "flotilla-system";

/// Name of one instance's inventory ConfigMap.
pub fn name(instance: &str) -> String {
    format!("flotilla-inventory-{instance}")
}

/// Why the inventory could not be used.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    /// Reading or writing failed.
    #[error("inventory {NAMESPACE}/{0}")]
    Api(String, #[source] kube::Error),
    /// Its content does not parse: nothing may be pruned from it.
    #[error("inventory {NAMESPACE}/{0} is unreadable: {1}")]
    Corrupt(String, String),
}

/// Largest part of the object list one ConfigMap holds (the API server allows 1 MiB per
/// object): about 15,000 objects. Larger inventories continue in part ConfigMaps.
const PART_BYTES: usize = 900_000;

/// Label on part ConfigMaps, valued with the instance, so stale parts can be found.
const PART_LABEL: &str = "flotilla.dev/inventory-part";

fn part_name(instance: &str, generation: &str, index: usize) -> String {
    format!("{}-{generation}-{index}", name(instance))
}

/// Reads the inventory (its head and any parts); an absent one is empty.
pub async fn read(client: &Client, instance: &str) -> Result<Inventory, InventoryError> {
    let name = name(instance);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let found = api.get_opt(&name).await.map_err(|e| InventoryError::Api(name.clone(), e))?;
    let Some(cm) = found else { return Ok(Inventory::default()) };
    let data = cm.data.unwrap_or_default();
    let field = |k: &str| data.get(k).map(String::as_str).unwrap_or_default();
    let corrupt = |why: String| InventoryError::Corrupt(name.clone(), why);
    let source = match data.get("source") {
        Some(text) => Some(serde_json::from_str::<Source>(text).map_err(|e| corrupt(format!("source: {e}")))?),
        None => None,
    };
    let mut parts = vec![field("objects").to_owned()];
    if let Some(layout) = data.get("parts") {
        let (generation, count) = layout
            .split_once(' ')
            .and_then(|(g, n)| Some((g, n.parse::<usize>().ok()?)))
            .ok_or_else(|| corrupt(format!("parts: {layout:?} is not 'GENERATION COUNT'")))?;
        for index in 1..=count {
            let part = part_name(instance, generation, index);
            let found = api.get_opt(&part).await.map_err(|e| InventoryError::Api(part.clone(), e))?;
            let cm = found.ok_or_else(|| corrupt(format!("part {part} is missing")))?;
            parts.push(cm.data.and_then(|mut d| d.remove("objects")).unwrap_or_default());
        }
    }
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    Inventory::decode(field("revision"), source, &parts).map_err(corrupt)
}

/// Writes the inventory (creating its namespace on first use). Parts beyond the first
/// are written before the head that names them, under a generation of their content, so
/// a write interrupted at any point leaves the previous head and its parts readable;
/// parts no head names any more are deleted last.
pub async fn write(client: &Client, instance: &str, inventory: &Inventory) -> Result<(), InventoryError> {
    let name = name(instance);
    let failed = |e| InventoryError::Api(name.clone(), e);
    ensure_namespace(client).await.map_err(failed)?;
    let mut parts = inventory.encode(PART_BYTES);
    let head_objects = parts.remove(0);
    let generation = &flotilla_core::diff::digest(&serde_json::Value::from(parts.concat()))[..8];
    let mut current = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let part_name = part_name(instance, generation, i + 1);
        let labels = BTreeMap::from([(PART_LABEL.to_owned(), instance.to_owned())]);
        let data = BTreeMap::from([("objects".to_owned(), part.clone())]);
        put(client, &part_name, Some(labels), data).await.map_err(|e| InventoryError::Api(part_name.clone(), e))?;
        current.push(part_name);
    }
    let mut data =
        BTreeMap::from([("revision".to_owned(), inventory.revision.clone()), ("objects".to_owned(), head_objects)]);
    if let Some(source) = &inventory.source {
        data.insert("source".to_owned(), serde_json::to_string(source).expect("a source serialises"));
    }
    if !parts.is_empty() {
        data.insert("parts".to_owned(), format!("{generation} {}", parts.len()));
    }
    put(client, &name, None, data).await.map_err(failed)?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let stale = api.list(&ListParams::default().labels(&format!("{PART_LABEL}={instance}"))).await.map_err(failed)?;
    for cm in stale.items.into_iter().filter_map(|cm| cm.metadata.name).filter(|n| !current.contains(n)) {
        match api.delete(&cm, &DeleteParams::default()).await {
            Ok(_) | Err(kube::Error::Api(_)) => {}
            Err(e) => return Err(failed(e)),
        }
    }
    Ok(())
}

/// Deletes an instance's inventory (its parts, then the head), once nothing it lists is
/// left: a teardown's last step.
pub async fn remove(client: &Client, instance: &str) -> Result<(), InventoryError> {
    let name = name(instance);
    let failed = |e| InventoryError::Api(name.clone(), e);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let parts = api.list(&ListParams::default().labels(&format!("{PART_LABEL}={instance}"))).await.map_err(failed)?;
    for part in parts.items.into_iter().filter_map(|cm| cm.metadata.name).chain([name.clone()]) {
        match api.delete(&part, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(failed(e)),
        }
    }
    Ok(())
}

async fn ensure_namespace(client: &Client) -> Result<(), kube::Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(NAMESPACE).await?.is_some() {
        return Ok(());
    }
    let ns =
        Namespace { metadata: ObjectMeta { name: Some(NAMESPACE.into()), ..Default::default() }, ..Default::default() };
    match namespaces.create(&Default::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Server-side applies one ConfigMap of the inventory.
async fn put(
    client: &Client,
    name: &str,
    labels: Option<BTreeMap<String, String>>,
    data: BTreeMap<String, String>,
) -> Result<(), kube::Error> {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NAMESPACE.into()),
            labels,
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    };
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let mut body = serde_json::to_value(&cm).expect("ConfigMap serialises");
    body["apiVersion"] = "v1".into();
    body["kind"] = "ConfigMap".into();
    api.patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(body)).await?;
    Ok(())
}
