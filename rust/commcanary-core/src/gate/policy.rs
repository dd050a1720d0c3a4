//! The gate policy (`commcanary.gate_policy.v1`): a predeclared, portable
//! statement of how a comparison of repeated runs is judged — the nine
//! thresholds, the runs each side needs, the confidence level, the
//! bootstrap's resamples and seed — and, opaque to the gate, how it was
//! calibrated. Read and written only here; a comparison records the
//! SHA-256 of the policy file it applied.

use sha2::{Digest, Sha256};

use crate::document::GATE_POLICY;
use crate::error::{Error, Result};
use crate::json::canon::{self, ObjectWriter};
use crate::json::{JsonLimits, Value, parse};

/// The thresholds a policy sets, in the comparison's order.
pub const THRESHOLD_NAMES: [&str; 9] = [
    "breakdown_absolute_threshold_us",
    "breakdown_threshold_pct",
    "hidden_drop_threshold_points",
    "median_absolute_threshold_us",
    "median_threshold_pct",
    "p95_absolute_threshold_us",
    "p95_threshold_pct",
    "p99_absolute_threshold_us",
    "p99_threshold_pct",
];

/// A gate policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Confidence level of every interval, in (0, 1).
    pub confidence: f64,
    /// Bootstrap resamples (1 to 100000).
    pub resamples: u32,
    /// Bootstrap seed.
    pub seed: u64,
    /// Runs each measured side needs (≥ 1).
    pub min_runs: u32,
    /// The thresholds, one per [`THRESHOLD_NAMES`] entry, in its order.
    pub thresholds: [f64; 9],
    /// How the policy was calibrated (canonical JSON object), if it was.
    pub calibration: Option<Vec<u8>>,
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("is not a usable gate policy: {what}"))
}

impl Policy {
    /// Checks every value's range.
    ///
    /// # Errors
    /// The first value out of range, named as the file spells it.
    pub fn check(&self) -> Result<()> {
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err(bad(
                "field 'confidence' must be between 0 and 1 (exclusive)",
            ));
        }
        if !(1..=100_000).contains(&self.resamples) {
            return Err(bad("field 'resamples' must be between 1 and 100000"));
        }
        if self.min_runs == 0 || self.min_runs > 10_000 {
            return Err(bad("field 'min_runs' must be between 1 and 10000"));
        }
        for (name, v) in THRESHOLD_NAMES.iter().zip(self.thresholds) {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(bad(format_args!(
                    "field 'thresholds.{name}' must be a non-negative number"
                )));
            }
        }
        Ok(())
    }
}

/// Reads a policy file's bytes.
///
/// # Errors
/// Not JSON, another document kind, a missing or unknown member, or a value
/// out of range, named.
pub fn read_policy(bytes: &[u8]) -> Result<Policy> {
    let doc = parse(bytes, JsonLimits::default())?;
    let root = doc.root().filter(Value::is_object);
    let format = root.and_then(|r| r.get("format")).and_then(|f| f.as_str());
    crate::document::expect_format(format, GATE_POLICY)?;
    let Some(root) = root.filter(|_| format == Some(GATE_POLICY)) else {
        return Err(bad(format_args!("field 'format' must be '{GATE_POLICY}'")));
    };
    const MEMBERS: [&str; 7] = [
        "calibration",
        "confidence",
        "format",
        "min_runs",
        "resamples",
        "seed",
        "thresholds",
    ];
    if let Some((key, _)) = root
        .members()
        .find(|(k, _)| !MEMBERS.iter().any(|m| m.as_bytes() == *k))
    {
        return Err(bad(format_args!(
            "field '{}' is not a policy member",
            String::from_utf8_lossy(key)
        )));
    }
    let number = |k: &str| {
        root.get(k)
            .and_then(|v| v.as_number())
            .ok_or_else(|| bad(format_args!("field '{k}' must be a number")))
    };
    let integer = |k: &str| {
        root.get(k)
            .and_then(|v| v.as_i64())
            .filter(|&i| i >= 0)
            .ok_or_else(|| bad(format_args!("field '{k}' must be a non-negative integer")))
    };
    let table = root
        .get("thresholds")
        .filter(Value::is_object)
        .ok_or_else(|| bad("field 'thresholds' must be an object"))?;
    let mut thresholds = [0.0; 9];
    for (slot, name) in thresholds.iter_mut().zip(THRESHOLD_NAMES) {
        *slot = table
            .get(name)
            .and_then(|v| v.as_number())
            .ok_or_else(|| bad(format_args!("field 'thresholds.{name}' must be a number")))?;
    }
    if table.len() != Some(THRESHOLD_NAMES.len()) {
        return Err(bad(format_args!(
            "field 'thresholds' must have exactly {}",
            THRESHOLD_NAMES.join(", ")
        )));
    }
    let calibration = match root.get("calibration") {
        None => None,
        Some(v) if v.is_object() => Some(canon::to_vec(v)),
        Some(_) => return Err(bad("field 'calibration' must be an object")),
    };
    let policy = Policy {
        confidence: number("confidence")?,
        resamples: u32::try_from(integer("resamples")?).unwrap_or(u32::MAX),
        seed: integer("seed")?.unsigned_abs(),
        min_runs: u32::try_from(integer("min_runs")?).unwrap_or(u32::MAX),
        thresholds,
        calibration,
    };
    policy.check()?;
    Ok(policy)
}

/// A policy as canonical JSON.
///
/// # Errors
/// A value out of range.
pub fn policy_json(policy: &Policy) -> Result<Vec<u8>> {
    policy.check()?;
    let mut out = Vec::new();
    let mut o = ObjectWriter::new(&mut out);
    if let Some(c) = &policy.calibration {
        o.raw("calibration", c);
    }
    o.f64("confidence", policy.confidence);
    o.str("format", GATE_POLICY);
    o.i64("min_runs", i64::from(policy.min_runs));
    o.i64("resamples", i64::from(policy.resamples));
    o.i64("seed", i64::try_from(policy.seed).unwrap_or(i64::MAX));
    let mut table = Vec::new();
    let mut t = ObjectWriter::new(&mut table);
    for (name, v) in THRESHOLD_NAMES.iter().zip(policy.thresholds) {
        t.f64(name, v);
    }
    t.end();
    o.raw("thresholds", &table);
    o.end();
    Ok(out)
}

/// A calibration record (any JSON object) as a policy carries it:
/// canonical JSON.
///
/// # Errors
/// Not JSON, or not an object.
pub fn calibration_object(bytes: &[u8]) -> Result<Vec<u8>> {
    let doc = parse(bytes, JsonLimits::default())?;
    doc.root()
        .filter(Value::is_object)
        .map(canon::to_vec)
        .ok_or_else(|| bad("field 'calibration' must be an object"))
}

/// The SHA-256 (hex) a comparison records of the policy file it applied.
#[must_use]
pub fn policy_digest(bytes: &[u8]) -> String {
    crate::trace::hex(&Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy {
            confidence: 0.95,
            resamples: 2000,
            seed: 3,
            min_runs: 5,
            thresholds: [1.0, 8.0, 5.0, 1.0, 4.5, 1.0, 6.0, 1.0, 9.0],
            calibration: Some(br#"{"runs":10}"#.to_vec()),
        }
    }

    #[test]
    fn round_trips() {
        let text = policy_json(&policy()).unwrap();
        assert_eq!(read_policy(&text).unwrap(), policy());
        assert_eq!(policy_digest(&text).len(), 64);
    }

    #[test]
    fn refuses_what_it_cannot_apply() {
        let text = String::from_utf8(policy_json(&policy()).unwrap()).unwrap();
        let cases = [
            (text.replace("0.95", "1.5"), "'confidence'"),
            (
                text.replace("\"min_runs\":5", "\"min_runs\":0"),
                "'min_runs'",
            ),
            (
                text.replace("\"p99_threshold_pct\":9.0", "\"p99_threshold_pct\":-1.0"),
                "p99_threshold_pct",
            ),
            (
                text.replace(",\"p99_threshold_pct\":9.0", ""),
                "p99_threshold_pct",
            ),
            (
                text.replace("\"seed\":3", "\"seed\":3,\"extra\":1"),
                "'extra'",
            ),
        ];
        for (doc, field) in cases {
            let e = read_policy(doc.as_bytes()).unwrap_err();
            assert!(e.message().contains(field), "{}: {}", field, e.message());
        }
        let e = read_policy(br#"{"format":"commcanary.trace.v1","events":[]}"#).unwrap_err();
        assert!(
            e.message().contains("gate policy was expected"),
            "{}",
            e.message()
        );
    }
}
