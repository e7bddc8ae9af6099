//! A rollout's metric gates: each an instant query to Prometheus's HTTP API
//! (`GET <address>/api/v1/query?query=…`), whose one sample must stay within the gate's
//! `min` and `max`. A query that fails, returns nothing, or returns several samples does
//! not pass (docs/rollouts.md). The address comes from the repository: the controller
//! only ever sends this GET there, and shows a number or a short reason, never the
//! answer's body.

use std::collections::BTreeMap;

use flotilla_core::model::rollout::Gate;
use serde_json::Value;

use crate::forge::http::Http;

/// One gate's last reading.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reading {
    /// The value read, if one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Whether it passes.
    pub passing: bool,
    /// Why there is no value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Reads every gate; returns the readings by name, and the first failing gate with why.
pub async fn read(http: &Http, gates: &[Gate]) -> (BTreeMap<String, Reading>, Option<String>) {
    let mut readings = BTreeMap::new();
    let mut failing = None;
    for gate in gates {
        let value = query(http, &gate.prometheus.address, &gate.prometheus.query).await;
        let passing = gate.passes(value.as_ref().ok().copied());
        if !passing && failing.is_none() {
            failing = Some(match &value {
                Ok(v) => format!("{} = {v}{}", gate.name, bounds(gate)),
                Err(e) => format!("{}: {e}", gate.name),
            });
        }
        let (value, error) = match value {
            Ok(v) => (Some(v), None),
            Err(e) => (None, Some(e)),
        };
        readings.insert(gate.name.clone(), Reading { value, passing, error });
    }
    (readings, failing)
}

/// ` (max 1)`, ` (min 0.9, max 1)`.
fn bounds(gate: &Gate) -> String {
    let parts: Vec<String> =
        [("min", gate.min), ("max", gate.max)].into_iter().filter_map(|(n, v)| Some(format!("{n} {}", v?))).collect();
    format!(" ({})", parts.join(", "))
}

/// The one sample `query` returns at `address`.
async fn query(http: &Http, address: &str, query: &str) -> Result<f64, String> {
    let encoded: String = form_urlencoded::byte_serialize(query.as_bytes()).collect();
    let url = format!("{}/api/v1/query?query={encoded}", address.trim_end_matches('/'));
    let answer = http.json(http::Method::GET, &url, "/api/v1/query", None).await.map_err(|e| e.to_string())?;
    sample(&answer)
}

/// The one sample of an instant query's answer: a scalar, or a vector of one element.
fn sample(answer: &Value) -> Result<f64, String> {
    if answer["status"] != "success" {
        return Err("the query failed".into());
    }
    let data = &answer["data"];
    let value = match data["resultType"].as_str() {
        Some("scalar") => &data["result"],
        Some("vector") => match data["result"].as_array().map(Vec::as_slice) {
            Some([one]) => &one["value"],
            Some([]) => return Err("no sample".into()),
            Some(many) => return Err(format!("{} samples, not one", many.len())),
            None => return Err("no result".into()),
        },
        _ => return Err("neither a scalar nor a vector".into()),
    };
    value[1].as_str().and_then(|v| v.parse::<f64>().ok()).ok_or_else(|| "no number in the sample".into())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn one_sample_is_read_from_a_scalar_or_a_vector_of_one() {
        let vector = |result: Value| json!({"status": "success", "data": {"resultType": "vector", "result": result}});
        let one = vector(json!([{"metric": {}, "value": [1.7e9, "0.25"]}]));
        assert_eq!(sample(&one), Ok(0.25));
        let scalar = json!({"status": "success", "data": {"resultType": "scalar", "result": [1.7e9, "3"]}});
        assert_eq!(sample(&scalar), Ok(3.0));
        assert_eq!(sample(&vector(json!([]))), Err("no sample".into()));
        let two = vector(json!([{"value": [1, "1"]}, {"value": [1, "2"]}]));
        assert_eq!(sample(&two), Err("2 samples, not one".into()));
        assert!(sample(&json!({"status": "error", "error": "bad"})).is_err());
        assert!(sample(&vector(json!([{"value": [1, "NaN"]}]))).is_ok_and(f64::is_nan));
    }

    #[test]
    fn a_failing_gate_says_its_value_and_bounds() {
        let gate: Gate = serde_saphyr::from_str(
            "{name: errors, prometheus: {address: 'http://p:9090', query: 'x'}, max: 1, min: 0}",
        )
        .unwrap();
        assert_eq!(format!("{} = 3{}", gate.name, bounds(&gate)), "errors = 3 (min 0, max 1)");
    }
}
