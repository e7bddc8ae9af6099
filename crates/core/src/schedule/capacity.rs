//! How many more replicas of a workload a cluster can take: Karmada's general
//! estimator over `status.resourceSummary` (spec §3.7), or a number given outright.

use std::collections::BTreeMap;

use crate::model::cluster::ClusterCapacity;

/// Parses a Kubernetes quantity (`250m`, `1.5`, `64Mi`, `2G`, `1e3`) into thousandths
/// of a unit, rounding up. `None` when it does not parse or overflows.
pub fn milli(quantity: &str) -> Option<i128> {
    let (number, factor, power) = suffix(quantity.trim());
    let (mantissa, exponent) = match number.find(['e', 'E']) {
        Some(i) => (&number[..i], number[i + 1..].parse::<i32>().ok()?),
        None => (number, 0),
    };
    let negative = mantissa.starts_with('-');
    let (int, frac) = mantissa
        .trim_start_matches(['+', '-'])
        .split_once('.')
        .unwrap_or((mantissa.trim_start_matches(['+', '-']), ""));
    if (int.is_empty() && frac.is_empty()) || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits: i128 = format!("{int}{frac}").parse().ok()?;
    // value in thousandths = digits × factor × 10^(exponent + power + 3 − len(frac))
    let shift = exponent + power + 3 - frac.len() as i32;
    let scaled = digits.checked_mul(factor)?;
    let value = if shift >= 0 {
        scaled.checked_mul(10i128.checked_pow(shift as u32)?)?
    } else {
        let d = 10i128.checked_pow((-shift) as u32)?;
        (scaled + d - 1) / d
    };
    Some(if negative { -value } else { value })
}

/// Splits the suffix off: binary suffixes give a factor, decimal ones a power of ten.
fn suffix(q: &str) -> (&str, i128, i32) {
    const BINARY: &[(&str, u32)] = &[("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60)];
    const DECIMAL: &[(&str, i32)] =
        &[("n", -9), ("u", -6), ("m", -3), ("k", 3), ("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18)];
    for (s, bits) in BINARY {
        if let Some(n) = q.strip_suffix(s) {
            return (n, 1i128 << bits, 0);
        }
    }
    for (s, power) in DECIMAL {
        // `1E3` is an exponent, not the exa suffix.
        if let Some(n) = q.strip_suffix(s).filter(|n| !(n.contains(['e', 'E']) && *s == "E")) {
            return (n, 1, *power);
        }
    }
    (q, 1, 0)
}

/// Requests of one pod, in thousandths, summed over its containers.
pub type Requests = BTreeMap<String, i128>;

/// Free replicas of a workload with `requests` in one cluster. `None` when nothing is
/// known, which callers treat as the workload's own replica count (spec §3.7).
pub fn available_replicas(capacity: Option<&ClusterCapacity>, requests: &Requests) -> Option<i64> {
    let capacity = capacity?;
    if let Some(n) = capacity.available_replicas {
        return Some(n.max(0));
    }
    let summary = capacity.resource_summary.as_ref()?;
    let free = |resource: &str| -> Option<i128> {
        let get = |m: &BTreeMap<String, String>| m.get(resource).and_then(|q| milli(q)).unwrap_or(0);
        summary.allocatable.get(resource)?;
        Some((get(&summary.allocatable) - get(&summary.allocated) - get(&summary.allocating)).max(0))
    };
    let pods = free("pods").map_or(i64::MAX, |p| (p / 1000) as i64);
    let by_resource = requests
        .iter()
        .filter(|(_, r)| **r > 0)
        .map(|(name, request)| free(name).map_or(0, |f| i64::try_from(f / request).unwrap_or(i64::MAX)));
    Some(by_resource.fold(pods, i64::min))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cluster::ResourceSummary;

    #[test]
    fn quantities_parse_to_thousandths() {
        let cases = [
            ("250m", 250),
            ("1", 1000),
            ("1.5", 1500),
            ("64Mi", 64 * 1024 * 1024 * 1000),
            ("2G", 2_000_000_000_000),
            ("1e3", 1_000_000),
            ("100n", 1),
            ("0.0001", 1),
        ];
        for (q, want) in cases {
            assert_eq!(milli(q), Some(want), "{q}");
        }
        assert_eq!(milli("abc"), None);
        assert_eq!(milli(""), None);
    }

    #[test]
    fn the_scarcest_resource_bounds_the_replicas() {
        let summary = ResourceSummary {
            allocatable: [("cpu", "4"), ("memory", "8Gi"), ("pods", "110")].map(|(k, v)| (k.into(), v.into())).into(),
            allocated: [("cpu", "1"), ("pods", "10")].map(|(k, v)| (k.into(), v.into())).into(),
            allocating: BTreeMap::new(),
        };
        let capacity = ClusterCapacity { available_replicas: None, resource_summary: Some(summary) };
        let requests: Requests = [("cpu".to_owned(), 500), ("memory".to_owned(), 1024 * 1024 * 1024 * 1000)].into();
        // cpu: 3 / 0.5 = 6; memory: 8Gi / 1Gi = 8; pods: 100.
        assert_eq!(available_replicas(Some(&capacity), &requests), Some(6));
        assert_eq!(available_replicas(Some(&capacity), &Requests::new()), Some(100));
        let gpu: Requests = [("nvidia.com/gpu".to_owned(), 1000)].into();
        assert_eq!(available_replicas(Some(&capacity), &gpu), Some(0));
        assert_eq!(available_replicas(None, &requests), None);
    }
}
