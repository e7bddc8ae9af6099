//! `flotilla get`: live objects of any kind across member clusters, printed like
//! `karmadactl get --operation-scope members`. Columns come from each API server's own
//! Table rendering (what kubectl prints), with a CLUSTER column after NAME.

use http::header::{ACCEPT, HeaderValue};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::discovery::{Discovery, Scope};
use serde_json::Value;

/// What to list.
#[derive(Debug, Clone)]
pub struct Query {
    /// Kind, plural, singular, short name, or `plural.group`.
    pub kind: String,
    /// One namespace, or all with `None`.
    pub namespace: Option<String>,
    /// Label selector.
    pub selector: Option<String>,
}

/// One member's answer: the Table's column names (priority 0) and rows.
#[derive(Debug, Default)]
pub struct Listing {
    /// Column names.
    pub columns: Vec<String>,
    /// Rows: namespace (if any) and cells.
    pub rows: Vec<(Option<String>, Vec<String>)>,
}

const SHORT_NAMES: &[(&str, &str)] = &[
    ("po", "pods"),
    ("deploy", "deployments"),
    ("svc", "services"),
    ("cm", "configmaps"),
    ("ns", "namespaces"),
    ("sa", "serviceaccounts"),
    ("rs", "replicasets"),
    ("sts", "statefulsets"),
    ("ds", "daemonsets"),
    ("ing", "ingresses"),
    ("crd", "customresourcedefinitions"),
    ("no", "nodes"),
    ("pvc", "persistentvolumeclaims"),
    ("pv", "persistentvolumes"),
    ("ep", "endpoints"),
    ("hpa", "horizontalpodautoscalers"),
    ("cj", "cronjobs"),
];

/// Finds the resource a user means, preferring core and apps groups on ties.
async fn resolve(client: &Client, wanted: &str) -> Result<Option<(ApiResource, Scope)>, String> {
    let wanted = wanted.to_lowercase();
    let (name, group) = match wanted.split_once('.') {
        Some((n, g)) => (n.to_owned(), Some(g.to_owned())),
        None => (wanted.clone(), None),
    };
    let name = SHORT_NAMES.iter().find(|(s, _)| *s == name).map(|(_, p)| p.to_string()).unwrap_or(name);
    let discovery =
        Discovery::new(client.clone()).run_aggregated().await.map_err(|e| format!("discovery failed: {e}"))?;
    let mut found: Vec<(ApiResource, Scope)> = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .filter(|(ar, _)| {
            let kind = ar.kind.to_lowercase();
            (ar.plural == name || kind == name || format!("{kind}s") == name)
                && group.as_ref().is_none_or(|g| *g == ar.group)
        })
        .map(|(ar, caps)| (ar, caps.scope))
        .collect();
    found.sort_by_key(|(ar, _)| match ar.group.as_str() {
        "" => 0,
        "apps" => 1,
        _ => 2,
    });
    Ok(found.into_iter().next())
}

/// The list request for `query` in one member, and whether the kind is namespaced; `None`
/// when the member does not serve the kind.
async fn request(
    client: &Client,
    query: &Query,
) -> Result<Option<(http::Request<Vec<u8>>, ApiResource, bool)>, String> {
    let Some((ar, scope)) = resolve(client, &query.kind).await? else { return Ok(None) };
    let api: Api<DynamicObject> = match (&scope, &query.namespace) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    };
    let mut params = ListParams::default();
    if let Some(selector) = &query.selector {
        params = params.labels(selector);
    }
    let request = kube::core::Request::new(api.resource_url()).list(&params).map_err(|e| e.to_string())?;
    Ok(Some((request, ar, scope == Scope::Namespaced)))
}

/// One member's objects, each with its apiVersion and kind (a list's items lack them).
/// A member that does not serve the kind has none (`Ok(None)`).
pub async fn objects(client: &Client, query: &Query) -> Result<Option<Vec<Value>>, String> {
    let Some((request, ar, _)) = request(client, query).await? else { return Ok(None) };
    let list: Value = client.request(request).await.map_err(|e| format!("list failed: {e}"))?;
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let typed = items.into_iter().map(|mut item| {
        if let Some(fields) = item.as_object_mut() {
            fields.insert("apiVersion".into(), Value::from(ar.api_version.clone()));
            fields.insert("kind".into(), Value::from(ar.kind.clone()));
        }
        item
    });
    Ok(Some(typed.collect()))
}

/// Lists one member as a Table: the columns kubectl shows, or with `wide` every one the
/// server offers. A member that does not serve the kind has no such objects
/// (`Ok(None)`): CRDs are often placed on some members only.
pub async fn list(client: &Client, query: &Query, wide: bool) -> Result<Option<Listing>, String> {
    let Some((mut request, _, namespaced)) = request(client, query).await? else { return Ok(None) };
    request.headers_mut().insert(ACCEPT, HeaderValue::from_static("application/json;as=Table;v=v1;g=meta.k8s.io"));
    let table: Value = client.request(request).await.map_err(|e| format!("list failed: {e}"))?;
    let definitions = table["columnDefinitions"].as_array().cloned().unwrap_or_default();
    let shown: Vec<usize> =
        (0..definitions.len()).filter(|&i| wide || definitions[i]["priority"].as_i64().unwrap_or(0) == 0).collect();
    let columns = shown.iter().map(|&i| definitions[i]["name"].as_str().unwrap_or("").to_uppercase()).collect();
    let rows = table["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|row| {
            let cells = row["cells"].as_array().cloned().unwrap_or_default();
            let text = shown.iter().map(|&i| cell(cells.get(i))).collect();
            let ns = namespaced
                .then(|| row.pointer("/object/metadata/namespace").and_then(Value::as_str).unwrap_or("").to_owned());
            (ns, text)
        })
        .collect();
    Ok(Some(Listing { columns, rows }))
}

fn cell(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "<none>".into(),
        Some(other) => other.to_string(),
    }
}

/// Formats listings from several clusters as one table: NAME, CLUSTER, then the
/// server's columns; NAMESPACE first when listing all namespaces.
pub fn format(listings: &[(String, Listing)], all_namespaces: bool) -> String {
    let Some(first) = listings.iter().find(|(_, l)| !l.columns.is_empty()) else { return String::new() };
    let mut header: Vec<String> = Vec::new();
    if all_namespaces {
        header.push("NAMESPACE".into());
    }
    header.push(first.1.columns.first().cloned().unwrap_or_else(|| "NAME".into()));
    header.push("CLUSTER".into());
    header.extend(first.1.columns.iter().skip(1).cloned());
    let mut lines = vec![header];
    for (cluster, listing) in listings {
        for (ns, cells) in &listing.rows {
            let mut line = Vec::new();
            if all_namespaces {
                line.push(ns.clone().unwrap_or_default());
            }
            line.push(cells.first().cloned().unwrap_or_default());
            line.push(cluster.clone());
            line.extend(cells.iter().skip(1).cloned());
            lines.push(line);
        }
    }
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|i| lines.iter().map(|l| l.get(i).map_or(0, |c| c.chars().count())).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for line in &lines {
        let padded: Vec<String> = line.iter().enumerate().map(|(i, c)| format!("{c:<w$}", w = widths[i])).collect();
        out.push_str(padded.join("   ").trim_end());
        out.push('\n');
    }
    out
}
