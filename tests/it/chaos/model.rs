//! What the soak's repository holds, as the test itself decides it: ConfigMaps placed
//! by name on members, changed at random. The expected content of every member comes
//! from this model, never from flotilla's render.

use std::collections::{BTreeMap, BTreeSet};

use proptest::test_runner::TestRng;
use rand::RngExt;

/// The member clusters of the soak's fleet; the last one is a Pull member.
pub const MEMBERS: [&str; 4] = ["member1", "member2", "member3", "member4"];
/// The namespace every soak object lives in.
pub const NS: &str = "chaos";
/// The label on the model's ConfigMaps.
pub const LABEL: &str = "chaos=soak";

/// One ConfigMap: its value and the members it is placed on.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    pub value: u32,
    pub members: BTreeSet<usize>,
}

/// The ConfigMaps of one good revision.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Model {
    pub items: BTreeMap<String, Item>,
    next: u32,
}

impl Model {
    /// A first revision: four items, on random members.
    pub fn initial(rng: &mut TestRng) -> Self {
        let mut model = Self::default();
        for _ in 0..4 {
            model.add(rng);
        }
        model
    }

    /// What `member` must hold: name → value.
    pub fn expected(&self, member: usize) -> BTreeMap<String, String> {
        self.items
            .iter()
            .filter(|(_, item)| item.members.contains(&member))
            .map(|(name, item)| (name.clone(), item.value.to_string()))
            .collect()
    }

    /// Changes one thing at random; says what.
    pub fn change(&mut self, rng: &mut TestRng) -> String {
        let names: Vec<String> = self.items.keys().cloned().collect();
        let pick = names.get(rng.random_range(0..names.len().max(1))).cloned();
        match (rng.random_range(0..10u32), pick) {
            (0..=3, Some(name)) => {
                let item = self.items.get_mut(&name).unwrap();
                item.value += 1;
                format!("edit {name} to {}", item.value)
            }
            (4..=5, Some(name)) => {
                let members = placement(rng);
                let said = format!("move {name} to {}", names_of(&members));
                self.items.get_mut(&name).unwrap().members = members;
                said
            }
            (6, Some(name)) if self.items.len() > 2 => {
                self.items.remove(&name);
                format!("remove {name}")
            }
            _ => self.add(rng),
        }
    }

    fn add(&mut self, rng: &mut TestRng) -> String {
        let name = format!("item-{}", self.next);
        self.next += 1;
        let members = placement(rng);
        let said = format!("add {name} on {}", names_of(&members));
        self.items.insert(name, Item { value: 0, members });
        said
    }

    /// The repository's `fleet.yaml` for this revision: the namespace, the four
    /// Clusters, and each item with its PropagationPolicy.
    pub fn render(&self) -> String {
        let mut docs = vec![format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n")];
        for (i, member) in MEMBERS.iter().enumerate() {
            let mode = if i == MEMBERS.len() - 1 { "Pull" } else { "Push" };
            docs.push(format!(
                "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {member}}}\nspec: {{syncMode: {mode}}}\n"
            ));
        }
        for (name, item) in &self.items {
            docs.push(format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {NS}, labels: {{chaos: soak}}}}\ndata: {{value: \"{}\"}}\n",
                item.value
            ));
            docs.push(format!(
                "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap, name: {name}}}]\n  placement: {{clusterAffinity: {{clusterNames: [{}]}}}}\n",
                names_of(&item.members)
            ));
        }
        docs.join("---\n")
    }
}

/// One to four distinct members.
fn placement(rng: &mut TestRng) -> BTreeSet<usize> {
    let mut members = BTreeSet::new();
    while members.is_empty() {
        members = (0..MEMBERS.len()).filter(|_| rng.random_bool(0.5)).collect();
    }
    members
}

fn names_of(members: &BTreeSet<usize>) -> String {
    members.iter().map(|&m| MEMBERS[m]).collect::<Vec<_>>().join(", ")
}
