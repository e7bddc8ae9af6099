//! The revision's interpreter, built from its customizations, and the facts of the
//! templates they interpret.

use std::sync::Arc;

use rayon::prelude::*;

use super::LoadError;
use crate::interpret::{Customization, Dependencies, InterpretError, Interpreter};
use crate::model::ObjectKey;
use crate::model::{Loaded, Template};

/// The revision's interpreter, and the facts of every template a customization
/// interprets taken from its scripts (`GetReplicas`, `GetDependencies`). A script that
/// fails fails the revision, naming the customization, the operation and the template.
pub(super) fn interpret_templates(loaded: &mut Loaded) -> Result<(), LoadError> {
    let repository = loaded
        .customizations
        .iter()
        .map(|c| Arc::new(Customization { name: c.name.clone(), spec: c.spec.clone() }))
        .collect();
    let interpreter = Arc::new(Interpreter::new(repository));
    let templates = &loaded.templates;
    let reinterpret = |template: &Arc<Template>| -> Result<Option<Arc<Template>>, LoadError> {
        if !interpreter.knows(&template.key.api_version, &template.key.kind) {
            return Ok(None);
        }
        let failed = |e: InterpretError| LoadError::Invalid { origin: template.origin.clone(), message: e.to_string() };
        let object = template.object();
        let mut facts = (*template.facts).clone();
        if let Some(workload) = interpreter.replicas(&template.key, &object) {
            facts.workload = workload.map_err(failed)?;
        }
        if let Some(deps) = interpreter.dependencies(&template.key, &object) {
            facts.interpreted = resolve(deps.map_err(failed)?, templates);
        }
        if facts == *template.facts {
            return Ok(None);
        }
        let mut changed = Template::clone(template);
        changed.facts = Arc::new(facts);
        Ok(Some(Arc::new(changed)))
    };
    let changed: Vec<Result<Option<Arc<Template>>, LoadError>> = templates.par_iter().map(reinterpret).collect();
    for (slot, changed) in loaded.templates.iter_mut().zip(changed) {
        if let Some(template) = changed? {
            *slot = template;
        }
    }
    loaded.interpreter = interpreter;
    Ok(())
}

/// The keys a script's dependencies name: those by name, and the revision's templates a
/// label selector picks (same apiVersion, kind and namespace), sorted, without repeats.
fn resolve(dependencies: Dependencies, templates: &[Arc<Template>]) -> Vec<ObjectKey> {
    let mut keys = dependencies.named;
    for selected in &dependencies.selected {
        let picked = templates.iter().filter(|t| {
            t.key.api_version == selected.api_version
                && t.key.kind == selected.kind
                && t.key.namespace == selected.namespace
                && selected.selector.matches(&t.labels)
        });
        keys.extend(picked.map(|t| t.key.clone()));
    }
    keys.sort();
    keys.dedup();
    keys
}
