//! The revision's interpreter, built from its customizations, and the facts of the
//! templates they interpret.

use std::sync::Arc;

use rayon::prelude::*;

use super::LoadError;
use crate::interpret::{Customization, InterpretError, Interpreter};
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
            facts.interpreted = deps.map_err(failed)?;
        }
        if facts == *template.facts {
            return Ok(None);
        }
        let mut changed = Template::clone(template);
        changed.facts = Arc::new(facts);
        Ok(Some(Arc::new(changed)))
    };
    let changed: Vec<Result<Option<Arc<Template>>, LoadError>> = loaded.templates.par_iter().map(reinterpret).collect();
    for (slot, changed) in loaded.templates.iter_mut().zip(changed) {
        if let Some(template) = changed? {
            *slot = template;
        }
    }
    loaded.interpreter = interpreter;
    Ok(())
}
