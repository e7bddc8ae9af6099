//! Durations as Kubernetes writes them (Go's `time.ParseDuration`), shared by the
//! command line and the kinds flotilla declares in Git.

use std::time::Duration;

/// A duration as Kubernetes tools write them: a sequence of decimal numbers with units
/// `ns`, `us` (or `µs`), `ms`, `s`, `m`, `h`, such as `30s`, `1.5h` or `2h45m`. A bare
/// number is seconds.
pub fn parse(text: &str) -> Result<Duration, String> {
    let invalid = || format!("invalid duration {text:?}: use a number of seconds or units like 30s, 5m, 1h30m");
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    if text.is_empty() {
        return Err(invalid());
    }
    let mut rest = text;
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(invalid)?;
        let number: f64 = rest[..number_end].parse().map_err(|_| invalid())?;
        rest = &rest[number_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(invalid()),
        };
        total += number * scale;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| invalid())
}

/// Deserializes a [`parse`]d duration (a string, or a number of seconds).
pub fn deserialize<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Written {
        Seconds(u64),
        Text(String),
    }
    match serde::Deserialize::deserialize(deserializer)? {
        Written::Seconds(s) => Ok(Duration::from_secs(s)),
        Written::Text(text) => parse(&text).map_err(serde::de::Error::custom),
    }
}

/// [`deserialize`] for an optional field.
pub fn deserialize_option<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Duration>, D::Error> {
    deserialize(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_kubernetes_tools_write_them() {
        let ok = [
            ("30", 30_000),
            ("2s", 2_000),
            ("500ms", 500),
            ("5m", 300_000),
            ("1h", 3_600_000),
            ("1h30m", 5_400_000),
            ("1.5h", 5_400_000),
            ("2m3.5s", 123_500),
            ("0", 0),
        ];
        for (text, millis) in ok {
            assert_eq!(parse(text), Ok(Duration::from_millis(millis)), "{text}");
        }
        for bad in ["", "s", "5x", "-1s", "1h-", "5 m", "1..5s", "1e3s"] {
            assert!(parse(bad).is_err(), "{bad} should be refused");
        }
    }
}
