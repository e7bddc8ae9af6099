//! ResourceInterpreterCustomization: a target, and scripts that compile in the sandbox.

use super::{Check, ensure};
use crate::interpret::{CustomizationSpec, Operation, lua};

/// A target named whole; every script compiles (a syntax error is the customization's,
/// found on load rather than on the first object).
pub fn customization(spec: &mut CustomizationSpec, _namespace: Option<&str>) -> Check {
    ensure(!spec.target.api_version.is_empty(), || "spec.target.apiVersion is required".into())?;
    ensure(!spec.target.kind.is_empty(), || "spec.target.kind is required".into())?;
    for operation in Operation::ALL {
        if let Some(script) = operation.script(&spec.customizations) {
            lua::compile(&script.lua_script).map_err(|e| {
                format!("spec.customizations: the {} script does not compile: {e}", operation.function())
            })?;
        }
    }
    Ok(())
}
