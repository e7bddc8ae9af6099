//! Surgical edits of YAML text for the autoscaler's write-back: one integer field of
//! one document is set and nothing else changes — comments, key order, quoting, blank
//! lines and the other documents stay byte for byte. A missing field is inserted as the
//! first key of its parent mapping, at that mapping's indentation.

use granit_parser::{Event, Parser, ScalarStyle, Span};

use crate::load::split;

/// Why an edit cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// The file has fewer documents.
    #[error("document {0} does not exist")]
    NoDocument(usize),
    /// The document does not parse.
    #[error("document {document} does not parse: {message}")]
    Parse {
        /// 1-based document index.
        document: usize,
        /// The parser's message.
        message: String,
    },
    /// A value on the path is not a mapping (or the field is not a plain scalar).
    #[error("{path} is not a mapping or plain scalar that can be edited")]
    Shape {
        /// The path.
        path: String,
    },
}

/// Where things are in one document: for each mapping on `path`, where it starts and
/// the indentation of its keys; and the span of the target scalar, if present.
#[derive(Default)]
struct Found {
    /// (depth on path, mapping is flow, byte offset of its first key or of `{`, key column).
    mappings: Vec<(usize, bool, usize, usize)>,
    scalar: Option<(usize, usize, ScalarStyle)>,
}

/// Sets `path` (e.g. `["spec", "replicas"]`) to `value` in document `document` (1-based,
/// as [`split`] counts) of `text`.
pub fn set_int(text: &str, document: usize, path: &[&str], value: i64) -> Result<String, EditError> {
    let chunks = split(text);
    let chunk = chunks.iter().find(|c| c.document == document).ok_or(EditError::NoDocument(document))?;
    let base = chunk.text.as_ptr() as usize - text.as_ptr() as usize;
    let found = locate(chunk.text, document, path)?;
    let dotted = path.join(".");
    let shape = || EditError::Shape { path: dotted.clone() };
    let mut out = String::with_capacity(text.len() + 16);
    match found.scalar {
        Some((start, end, style)) => {
            if !matches!(style, ScalarStyle::Plain | ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted) {
                return Err(shape());
            }
            out.push_str(&text[..base + start]);
            out.push_str(&value.to_string());
            out.push_str(&text[base + end..]);
        }
        None => {
            // The deepest mapping on the path gets the rest of the path.
            let (depth, flow, at, column) = *found.mappings.last().ok_or_else(shape)?;
            let rest = &path[depth..];
            let insertion = if flow {
                let mut s = String::new();
                for key in &rest[..rest.len() - 1] {
                    s.push_str(&format!("{key}: {{"));
                }
                s.push_str(&format!("{}: {value}", rest[rest.len() - 1]));
                s.push_str(&"}".repeat(rest.len() - 1));
                // After `{`: separate from an existing first entry.
                let empty = chunk.text[at + 1..].trim_start().starts_with('}');
                format!("{s}{}", if empty { "" } else { ", " })
            } else {
                let mut s = String::new();
                for (i, key) in rest.iter().enumerate() {
                    let indent = " ".repeat(column + 2 * i);
                    let tail = if i + 1 == rest.len() { format!(" {value}") } else { String::new() };
                    s.push_str(&format!("{indent}{key}:{tail}\n"));
                }
                s
            };
            // Block: before the first key's line; flow: right after `{`.
            let offset = if flow { at + 1 } else { chunk.text[..at].rfind('\n').map_or(0, |n| n + 1) };
            out.push_str(&text[..base + offset]);
            out.push_str(&insertion);
            out.push_str(&text[base + offset..]);
        }
    }
    Ok(out)
}

/// A marker's byte offset in `text`.
fn offset(marker: &granit_parser::Marker, text: &str) -> usize {
    marker.byte_offset().unwrap_or_else(|| text.char_indices().nth(marker.index()).map_or(text.len(), |(b, _)| b))
}

/// Walks the events of one document, following `path` through mappings.
/// An open collection while [`locate`] walks the events: whether a mapping expecting a
/// key, and how deep into the path it is (None when off the path).
struct Open {
    mapping: bool,
    key_next: bool,
    on_path: Option<usize>,
}

/// A collection starts inside the top of `stack`: the depth of the path it completes
/// (the root is depth 0; a matched key's value completes `pending`), and a mapping it is
/// the value of expects a key again.
fn enter(stack: &mut [Open], pending: Option<usize>) -> Option<usize> {
    let Some(top) = stack.last_mut() else { return Some(0) };
    if !top.mapping || top.key_next {
        return None;
    }
    top.key_next = true;
    pending
}

fn locate(text: &str, document: usize, path: &[&str]) -> Result<Found, EditError> {
    let mut found = Found::default();
    let parse = |e: granit_parser::ScanError| EditError::Parse { document, message: e.to_string() };
    let events: Vec<(Event<'_>, Span)> = Parser::new_from_str(text).collect::<Result<_, _>>().map_err(parse)?;
    let mut stack: Vec<Open> = Vec::new();
    // A matched key waiting for its value: the depth it completes.
    let mut pending: Option<usize> = None;
    for (i, (event, span)) in events.iter().enumerate() {
        match event {
            Event::MappingStart(style, ..) | Event::SequenceStart(style, ..) => {
                let is_map = matches!(event, Event::MappingStart(..));
                let depth = enter(&mut stack, pending.take());
                let on_path = if is_map { depth } else { None };
                if let Some(d) = on_path {
                    let flow = matches!(style, granit_parser::StructureStyle::Flow);
                    if flow {
                        found.mappings.push((d, true, offset(&span.start, text), 0));
                    } else if let Some((Event::Scalar(..), key_span)) = events.get(i + 1) {
                        found.mappings.push((d, false, offset(&key_span.start, text), key_span.start.col()));
                    }
                }
                stack.push(Open { mapping: is_map, key_next: true, on_path });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
            }
            Event::Scalar(value, style, ..) => {
                let Some(top) = stack.last_mut() else { continue };
                if top.mapping && top.key_next {
                    top.key_next = false;
                    pending = top.on_path.filter(|d| *d < path.len() && value == path[*d]).map(|d| d + 1);
                } else {
                    if top.mapping {
                        top.key_next = true;
                        if pending == Some(path.len()) {
                            found.scalar = Some((offset(&span.start, text), offset(&span.end, text), *style));
                        } else if pending.is_some() {
                            // A scalar where the path needs a mapping (`spec: null`).
                            return Err(EditError::Shape { path: path.join(".") });
                        }
                    }
                    pending = None;
                }
            }
            _ => {}
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
# nginx, scaled by the FederatedHPA below
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx   # keep me
  labels: {app: nginx}
spec:
  # how many
  replicas: 1 # the autoscaler writes this
  selector:
    matchLabels: {app: nginx}
---
apiVersion: autoscaling.karmada.io/v1alpha1
kind: FederatedHPA
metadata: {name: nginx}
spec:
    scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: nginx}
    minReplicas: 1
    maxReplicas: 10
";

    #[test]
    fn a_scalar_is_replaced_in_place() {
        let edited = set_int(FILE, 1, &["spec", "replicas"], 10).unwrap();
        assert_eq!(edited, FILE.replace("  replicas: 1 # the", "  replicas: 10 # the"));
        let edited = set_int(FILE, 2, &["spec", "maxReplicas"], 12).unwrap();
        assert_eq!(edited, FILE.replace("maxReplicas: 10", "maxReplicas: 12"));
        // Not `metadata.name` or a nested `replicas` elsewhere.
        let quoted = FILE.replace("replicas: 1 #", "replicas: \"1\" #");
        assert_eq!(
            set_int(&quoted, 1, &["spec", "replicas"], 3).unwrap(),
            FILE.replace("replicas: 1 #", "replicas: 3 #")
        );
    }

    #[test]
    fn a_missing_field_is_inserted_at_its_mapping_indentation() {
        let without = FILE.replace("  replicas: 1 # the autoscaler writes this\n", "");
        let edited = set_int(&without, 1, &["spec", "replicas"], 4).unwrap();
        assert_eq!(edited, without.replace("  # how many\n  selector:", "  # how many\n  replicas: 4\n  selector:"));
        let edited = set_int(FILE, 2, &["spec", "replicas"], 2).unwrap();
        assert!(edited.contains("spec:\n    replicas: 2\n    scaleTargetRef:"), "{edited}");
        let flow = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {selector: {}}\n";
        assert_eq!(
            set_int(flow, 1, &["spec", "replicas"], 3).unwrap(),
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {replicas: 3, selector: {}}\n"
        );
        let no_spec = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\n";
        assert_eq!(
            set_int(no_spec, 1, &["spec", "replicas"], 3).unwrap(),
            "spec:\n  replicas: 3\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\n"
        );
    }

    #[test]
    fn what_cannot_be_edited_is_refused() {
        assert_eq!(set_int(FILE, 3, &["spec", "replicas"], 1), Err(EditError::NoDocument(3)));
        let null_spec = "kind: Deployment\nspec: null\n";
        assert!(matches!(set_int(null_spec, 1, &["spec", "replicas"], 1), Err(EditError::Shape { .. })));
        assert!(matches!(set_int("a: [1\n", 1, &["spec"], 1), Err(EditError::Parse { .. })));
    }
}
