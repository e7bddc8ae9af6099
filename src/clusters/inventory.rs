//! The inventory of what flotilla applied, kept in each member cluster (ConfigMap
//! `flotilla-system/flotilla-inventory`) so a fresh process knows what it may prune.

use std::collections::BTreeMap;

use flotilla_core::diff::Inventory;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};

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

/// Reads the inventory; an absent one is empty.
pub async fn read(client: &Client, instance: &str) -> Result<Inventory, InventoryError> {
    let name = name(instance);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let found = api.get_opt(&name).await.map_err(|e| InventoryError::Api(name.clone(), e))?;
    let Some(cm) = found else { return Ok(Inventory::default()) };
    let data = cm.data.unwrap_or_default();
    let field = |k: &str| data.get(k).map(String::as_str).unwrap_or_default();
    Inventory::decode(field("revision"), field("objects")).map_err(|e| InventoryError::Corrupt(name, e))
}

/// Writes the inventory (creating its namespace on first use).
pub async fn write(client: &Client, instance: &str, inventory: &Inventory) -> Result<(), InventoryError> {
    let name = name(instance);
    let failed = |e| InventoryError::Api(name.clone(), e);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(NAMESPACE).await.map_err(failed)?.is_none() {
        let ns = Namespace {
            metadata: ObjectMeta { name: Some(NAMESPACE.into()), ..Default::default() },
            ..Default::default()
        };
        match namespaces.create(&Default::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(failed(e)),
        }
    }
    let data = BTreeMap::from([
        ("revision".to_owned(), inventory.revision.clone()),
        ("objects".to_owned(), inventory.encode()),
    ]);
    let cm = ConfigMap {
        metadata: ObjectMeta { name: Some(name.clone()), namespace: Some(NAMESPACE.into()), ..Default::default() },
        data: Some(data),
        ..Default::default()
    };
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut body = serde_json::to_value(&cm).expect("ConfigMap serialises");
    body["apiVersion"] = "v1".into();
    body["kind"] = "ConfigMap".into();
    api.patch(&name, &params, &Patch::Apply(body)).await.map_err(failed)?;
    Ok(())
}
