//! Image references and the image overrider (spec §4.3), after Karmada's
//! `pkg/util/imageparser`: no normalisation to docker.io.

use serde_json::Value;

use super::PatchOp;
use crate::model::policy::{ImageComponent, ImageOverrider, Operator};

/// A parsed image reference.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageRef {
    /// Host part, e.g. `registry.k8s.io`; empty when the first path segment is not a host.
    pub registry: String,
    /// Path, e.g. `library/nginx`.
    pub repository: String,
    /// Tag, e.g. `1.25`.
    pub tag: String,
    /// Digest, e.g. `sha256:…`.
    pub digest: String,
}

impl ImageRef {
    /// Parses `[registry/]repository[:tag][@digest]`. The first segment is a registry
    /// when it contains `.` or `:` or is `localhost`.
    pub fn parse(image: &str) -> Self {
        let (name, digest) = image.split_once('@').unwrap_or((image, ""));
        let (name, tag) = match name.rfind(':') {
            Some(i) if !name[i..].contains('/') => (&name[..i], &name[i + 1..]),
            _ => (name, ""),
        };
        let (registry, repository) = match name.split_once('/') {
            Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => (first, rest),
            _ => ("", name),
        };
        Self { registry: registry.into(), repository: repository.into(), tag: tag.into(), digest: digest.into() }
    }
}

impl std::fmt::Display for ImageRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.registry.is_empty() {
            write!(f, "{}/", self.registry)?;
        }
        write!(f, "{}", self.repository)?;
        if !self.tag.is_empty() {
            write!(f, ":{}", self.tag)
        } else if !self.digest.is_empty() {
            write!(f, "@{}", self.digest)
        } else {
            Ok(())
        }
    }
}

fn is_tag(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

fn is_digest(s: &str) -> bool {
    let Some((algorithm, hex)) = s.split_once(':') else {
        return false;
    };
    let algorithm_ok = algorithm.split(['-', '_', '+', '.']).all(|part| {
        part.as_bytes().first().is_some_and(u8::is_ascii_alphabetic) && part.bytes().all(|c| c.is_ascii_alphanumeric())
    });
    algorithm_ok && hex.len() >= 32 && hex.bytes().all(|c| c.is_ascii_hexdigit())
}

/// Applies one operation to a reference.
pub fn edit(image: &mut ImageRef, component: ImageComponent, operator: Operator, value: &str) {
    let field = match component {
        ImageComponent::Registry => &mut image.registry,
        ImageComponent::Repository => &mut image.repository,
        ImageComponent::Tag => return edit_tag(image, operator, value),
    };
    match operator {
        Operator::Add => field.push_str(value),
        Operator::Replace => *field = value.to_owned(),
        Operator::Remove => field.clear(),
    }
}

/// A new tag string is taken as a tag if it is one, else as a digest if it is one, and
/// otherwise ignored (Karmada leaves the image unchanged).
fn edit_tag(image: &mut ImageRef, operator: Operator, value: &str) {
    let candidate = match operator {
        Operator::Remove => {
            if image.tag.is_empty() {
                image.digest.clear()
            } else {
                image.tag.clear()
            }
            return;
        }
        Operator::Add => format!("{}{value}", if image.tag.is_empty() { &image.digest } else { &image.tag }),
        Operator::Replace => value.to_owned(),
    };
    if is_tag(&candidate) {
        (image.tag, image.digest) = (candidate, String::new());
    } else if is_digest(&candidate) {
        (image.tag, image.digest) = (String::new(), candidate);
    }
}

/// Where container lists live for the kinds Karmada's overriders know.
pub fn containers_path(kind: &str) -> Option<&'static str> {
    match kind {
        "Pod" => Some("/spec/containers"),
        "ReplicaSet" | "Deployment" | "DaemonSet" | "StatefulSet" | "Job" => Some("/spec/template/spec/containers"),
        _ => None,
    }
}

/// The `replace` patches one image overrider produces for an object.
pub fn patches(object: &Value, kind: &str, overrider: &ImageOverrider) -> Vec<PatchOp> {
    let paths: Vec<String> = match &overrider.predicate {
        Some(p) => vec![p.path.clone()],
        None => {
            let Some(base) = containers_path(kind) else {
                return Vec::new();
            };
            let count = object.pointer(base).and_then(Value::as_array).map_or(0, Vec::len);
            (0..count).map(|i| format!("{base}/{i}/image")).collect()
        }
    };
    let value = overrider.value.as_deref().unwrap_or("");
    paths
        .into_iter()
        .filter_map(|path| {
            let current = object.pointer(&path)?.as_str()?;
            let mut image = ImageRef::parse(current);
            edit(&mut image, overrider.component, overrider.operator, value);
            Some(PatchOp::replace(path, Value::String(image.to_string())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_round_trip() {
        for image in [
            "nginx",
            "nginx:1.25",
            "registry.k8s.io/pause:3.9",
            "localhost/app",
            "host:5000/a/b:tag",
            "x@sha256:0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(ImageRef::parse(image).to_string(), image);
        }
        let parsed = ImageRef::parse("library/nginx:1.25");
        assert_eq!((parsed.registry.as_str(), parsed.repository.as_str()), ("", "library/nginx"));
    }
}
