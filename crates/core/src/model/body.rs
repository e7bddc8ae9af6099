//! A template's object held compact: its JSON text, parsed again where a tree is needed.
//!
//! A parsed JSON tree costs about 24 bytes of memory per byte of YAML (a heap string per
//! key and scalar, a B-tree node per mapping); the text costs about one. The controller
//! holds every template of a revision for as long as that revision is current, and the
//! CLI holds every template of the repository while it plans, so templates are kept as
//! text and the few facts placement reads are taken out once, when the document is
//! parsed (see [`super::object::Facts`]). Trees are built where the object is changed
//! (overrides, the finished manifest) and dropped with it.

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

/// An object's compact JSON text; cheap to clone and shared between revisions by the
/// parse cache. `Debug` prints its size only: a Secret's data never reaches a log
/// through it.
#[derive(Clone, PartialEq, Eq)]
pub struct Body(Arc<str>);

impl Body {
    /// The compact text of `object`.
    pub fn new(object: &Value) -> Self {
        Body(serde_json::to_string(object).expect("a JSON tree always serialises").into())
    }

    /// The object as a tree of its own. Nesting is bounded where the text came from (the
    /// YAML budget [`crate::model::Limits::max_depth`]), so serde_json's own recursion
    /// limit, lower than a budget may be set to, is not applied twice.
    pub fn tree(&self) -> Value {
        let mut de = serde_json::Deserializer::from_str(&self.0);
        de.disable_recursion_limit();
        Value::deserialize(&mut de).expect("written by Body::new")
    }

    /// Whether both are the very same text (shared, not compared): a template the parse
    /// cache carried from one revision to the next.
    pub fn same(&self, other: &Body) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Bytes of text held.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the text is empty (never, for a body made by [`Body::new`]).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Body({} bytes)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tree_reads_back_as_written() {
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"a": "b"}},
            "data": {"mode": "0644", "n": 420, "f": 1.5, "big": 9_007_199_254_740_993_u64, "neg": -3,
                     "none": null, "yes": true, "list": [1, "two", {"three": [3]}], "empty": {}, "unicode": "ñ ☃"},
        });
        let body = Body::new(&object);
        assert_eq!(body.tree(), object);
        assert!(body.len() < 300, "compact: {} bytes", body.len());
    }

    #[test]
    fn nesting_past_serde_json_default_limit_reads_back() {
        let mut object = json!("leaf");
        for _ in 0..200 {
            object = json!({ "a": [object] });
        }
        assert_eq!(Body::new(&object).tree(), object);
    }

    #[test]
    fn debug_shows_no_content() {
        let body = Body::new(&json!({"kind": "Secret", "stringData": {"password": "hunter2"}}));
        let shown = format!("{body:?}");
        assert!(!shown.contains("hunter2") && shown.starts_with("Body("), "{shown}");
    }

    #[test]
    fn sameness_is_sharing() {
        let a = Body::new(&json!({"x": 1}));
        assert!(a.same(&a.clone()));
        assert!(!a.same(&Body::new(&json!({"x": 1}))));
    }
}
