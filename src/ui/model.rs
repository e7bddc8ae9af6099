//! What the fleet page shows, built purely from a plan and what the members report:
//! one row per placed object, one cell per member it is placed in (desired replicas
//! from the plan, ready and health from the member). No second source of truth: the
//! plan is the render every command shares, the observations are `status`'s.

use std::collections::BTreeMap;

use flotilla_core::model::selector::{LabelSelector, Labels};
use flotilla_core::model::{ObjectKey, Plan};

use crate::clusters::status::ObjectStatus;

/// The fleet at one moment.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Fleet {
    /// The revision rendered.
    pub revision: String,
    /// Every declared member, by name.
    pub members: BTreeMap<String, Member>,
    /// Every object placed anywhere, in key order.
    pub workloads: Vec<Workload>,
}

/// One member.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Member {
    /// `Push` or `Pull`.
    pub sync_mode: String,
    /// Why it could not be read, if it could not.
    pub error: Option<String>,
    /// Objects the plan places there.
    pub objects: usize,
}

/// One object across the fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Its key.
    pub key: ObjectKey,
    /// Its labels (as the template declares them).
    pub labels: Labels,
    /// Per member it is placed in.
    pub cells: BTreeMap<String, Cell>,
    /// Healthy wherever it is placed (and observed).
    pub healthy: bool,
}

/// An object in one member.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Cell {
    /// Replicas the plan gives it there (a workload's).
    pub desired: Option<i64>,
    /// Ready of desired, as the member reports it (`3/4`).
    pub ready: Option<String>,
    /// `Healthy`, `Progressing (…)`, `Degraded (…)`, `Missing`, or `Unknown` when the
    /// member was not read.
    pub health: String,
}

impl Workload {
    /// `KIND/NAMESPACE/NAME` (`KIND/NAME` when cluster-scoped): how `why` and the page's
    /// URLs name it.
    pub fn path(&self) -> String {
        path(&self.key)
    }
}

/// `KIND/NAMESPACE/NAME`, or `KIND/NAME`.
pub fn path(key: &ObjectKey) -> String {
    match &key.namespace {
        Some(ns) => format!("{}/{ns}/{}", key.kind, key.name),
        None => format!("{}/{}", key.kind, key.name),
    }
}

/// The fleet: `plan` with what each member reported (`observed`, from
/// `clusters::status::objects`), and the members that could not be read (`errors`).
pub fn fleet(plan: &Plan, observed: &[ObjectStatus], errors: &BTreeMap<String, String>) -> Fleet {
    let seen: BTreeMap<&ObjectKey, &ObjectStatus> = observed.iter().map(|o| (&o.key, o)).collect();
    let mut rows: BTreeMap<&ObjectKey, (&Labels, BTreeMap<String, Cell>)> = BTreeMap::new();
    let mut members = BTreeMap::new();
    for cluster in &plan.loaded.clusters {
        let items = plan.clusters.get(&cluster.name).map(Vec::as_slice).unwrap_or_default();
        let sync_mode = format!("{:?}", cluster.spec.sync_mode);
        let error = errors.get(&cluster.name).cloned();
        members.insert(cluster.name.clone(), Member { sync_mode, error, objects: items.len() });
        for item in items {
            let template = &plan.loaded.templates[item.template];
            let key = &template.key;
            let there = seen.get(key).and_then(|o| o.clusters.get(&cluster.name));
            let cell = Cell {
                desired: item.replicas,
                ready: there.and_then(|t| t.ready.clone()),
                health: there.map_or_else(|| "Unknown".to_owned(), |t| t.health.clone()),
            };
            rows.entry(key).or_insert_with(|| (&template.labels, BTreeMap::new())).1.insert(cluster.name.clone(), cell);
        }
    }
    let workloads = rows
        .into_iter()
        .map(|(key, (labels, cells))| {
            let healthy = cells.values().all(|c| c.health == "Healthy");
            Workload { key: key.clone(), labels: labels.clone(), cells, healthy }
        })
        .collect();
    Fleet { revision: plan.revision.clone(), members, workloads }
}

/// What the overview lists: filters from the query string, and a page.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(default)]
pub struct Filter {
    /// Only this namespace.
    pub namespace: Option<String>,
    /// Only objects placed in this member.
    pub member: Option<String>,
    /// `healthy` or `unhealthy`.
    pub health: Option<String>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only objects whose labels this selector selects (`kubectl -l`'s form).
    pub label: Option<String>,
    /// The page of rows, from 1.
    pub page: Option<usize>,
    /// The page of member columns, from 1.
    pub columns: Option<usize>,
}

/// Rows per page of the overview.
pub const PAGE: usize = 50;

/// Member columns per page of the overview: a page stays small (well under 200 KB) at a
/// thousand members, as rows do at thousands of objects.
pub const COLUMNS: usize = 20;

impl Filter {
    /// The label selector given, parsed (`Err` names what is wrong with it).
    pub fn selector(&self) -> Result<Option<LabelSelector>, String> {
        match self.label.as_deref().filter(|l| !l.trim().is_empty()) {
            Some(text) => text.parse().map(Some),
            None => Ok(None),
        }
    }

    fn keeps(&self, w: &Workload, selector: Option<&LabelSelector>) -> bool {
        fn given(v: &Option<String>) -> Option<&str> {
            v.as_deref().filter(|s| !s.is_empty())
        }
        given(&self.namespace).is_none_or(|ns| w.key.namespace.as_deref() == Some(ns))
            && given(&self.member).is_none_or(|m| w.cells.contains_key(m))
            && given(&self.kind).is_none_or(|k| w.key.kind.eq_ignore_ascii_case(k))
            && selector.is_none_or(|s| s.matches(&w.labels))
            && match given(&self.health) {
                Some("healthy") => w.healthy,
                Some("unhealthy") => !w.healthy,
                _ => true,
            }
    }

    /// The page of `fleet` this filter asks for, with the number of rows kept and of
    /// pages (none kept when the label selector is invalid).
    pub fn page<'f>(&self, fleet: &'f Fleet) -> (Vec<&'f Workload>, usize, usize) {
        let selector = self.selector();
        let kept: Vec<&Workload> = match &selector {
            Ok(selector) => fleet.workloads.iter().filter(|w| self.keeps(w, selector.as_ref())).collect(),
            Err(_) => Vec::new(),
        };
        let pages = kept.len().div_ceil(PAGE).max(1);
        let page = self.page.unwrap_or(1).clamp(1, pages);
        let shown = kept.iter().skip((page - 1) * PAGE).take(PAGE).copied().collect();
        (shown, kept.len(), pages)
    }

    /// The member columns this filter shows: only the filtered member when one is
    /// given, else a page of [`COLUMNS`]; with that page and the number of pages.
    pub fn columns<'f>(&self, fleet: &'f Fleet) -> (Vec<&'f str>, usize, usize) {
        if let Some(m) = self.member.as_deref().filter(|m| !m.is_empty()) {
            let one: Vec<&str> = fleet.members.get_key_value(m).map(|(k, _)| k.as_str()).into_iter().collect();
            return (one, 1, 1);
        }
        let pages = fleet.members.len().div_ceil(COLUMNS).max(1);
        let page = self.columns.unwrap_or(1).clamp(1, pages);
        let shown = fleet.members.keys().skip((page - 1) * COLUMNS).take(COLUMNS).map(String::as_str).collect();
        (shown, page, pages)
    }
}
