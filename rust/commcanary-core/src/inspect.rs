//! What a commcanary document is, checked by the core's own readers: the
//! one question a store of artifacts asks of each upload (`commcanary
//! serve`), answered without trusting the upload.
//!
//! A trace, canary, report or hang diagnosis is read by the reader every
//! command uses ([`crate::trace::load_bytes`], [`crate::canary::read::read_canary`],
//! [`crate::report::read::read_report`],
//! [`crate::export::timeline::read_hang_document`]). The documents no
//! command reads back (comparison, straggler diagnosis, step recovery,
//! timeline) are checked for the members their schemas require, each of its
//! JSON type. [`Inspected::facts`] are the few values a listing shows: a
//! verdict, counts, and a comparison's deltas and thresholds (the gate's
//! history is drawn from them).

use crate::document;
use crate::error::{Error, Result};
use crate::json::{JsonLimits, Node, Value, parse};

/// What a document is.
#[derive(Debug, Clone, PartialEq)]
pub struct Inspected {
    /// Its `format`.
    pub format: String,
    /// The noun a person reads (`trace`, `canary`, `comparison`, ...).
    pub kind: &'static str,
    /// A few of its values, by name: numbers as canonical JSON, strings as
    /// they are.
    pub facts: Vec<(String, String)>,
}

/// A JSON type a required member must have.
#[derive(Clone, Copy)]
enum Kind {
    Object,
    Array,
    Str,
    Int,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Object => "dict",
            Kind::Array => "list",
            Kind::Str => "str",
            Kind::Int => "int",
        }
    }

    fn fits(self, v: Value<'_>) -> bool {
        match self {
            Kind::Object => v.is_object(),
            Kind::Array => v.is_array(),
            Kind::Str => v.as_str().is_some(),
            Kind::Int => matches!(v.node(), Node::Int(_)),
        }
    }
}

/// The members a document without a reader must have (its schema's
/// `required`), with their types.
fn required(format: &str) -> Option<&'static [(&'static str, Kind)]> {
    use Kind::{Array, Int, Object, Str};
    Some(match format {
        document::COMPARISON => &[
            ("verdict", Str),
            ("reasons", Array),
            ("thresholds", Object),
            ("compatibility", Object),
            ("uncertainty", Object),
            ("baseline", Object),
            ("candidate", Object),
            ("delta", Object),
            ("breakdown_delta", Object),
            ("worst_regressions", Object),
            ("evaluations", Array),
        ],
        document::STRAGGLERS => &[
            ("verdict", Str),
            ("step_source", Str),
            ("world", Int),
            ("groups", Array),
            ("steps", Array),
            ("findings", Array),
            ("ranks", Array),
            ("detector", Object),
            ("evidence", Object),
            ("communication", Array),
        ],
        document::STEPS => &[
            ("method", Str),
            ("step_count", Int),
            ("clock_origin_ns", Int),
            ("steps", Array),
            ("ranks", Array),
            ("evidence", Object),
        ],
        _ => return None,
    })
}

/// The verdicts a document may give, where it gives one.
fn verdicts(format: &str) -> &'static [&'static str] {
    match format {
        document::COMPARISON => &["pass", "warn", "fail", "inconclusive"],
        document::STRAGGLERS => &["stragglers", "none"],
        document::HANG => &["hang", "no_hang", "inconclusive"],
        _ => &[],
    }
}

/// A comparison's statistics kept as facts, each `delta.NAME` and
/// `thresholds.NAME`.
const COMPARISON_DELTAS: [&str; 3] = ["median_pct", "p95_pct", "p99_pct"];
const COMPARISON_THRESHOLDS: [&str; 3] = [
    "median_threshold_pct",
    "p95_threshold_pct",
    "p99_threshold_pct",
];

/// What a document says of its job and its making, as facts: a canary's
/// workload, source coverage and timing bounds; a diagnosis' world, groups,
/// steps and roots.
fn job_facts(format: &str, root: Value<'_>) -> Vec<(String, String)> {
    let text = |v: Option<Value<'_>>| -> Option<String> {
        v.and_then(|v| v.as_str().map(str::to_owned).or_else(|| number_text(v)))
    };
    let count = |v: Option<Value<'_>>| {
        v.filter(|v| v.is_array())
            .map(|v| v.elements().count().to_string())
    };
    let path = |keys: &[&str]| keys.iter().try_fold(root, |v, k| v.get(k));
    let wanted: Vec<(&str, Option<String>)> = match format {
        document::CANARY | document::CANARY_LOOP => vec![
            ("workload", text(path(&["workload", "name"]))),
            (
                "source_coverage",
                text(path(&["compiler", "source_coverage_status"])),
            ),
            ("timing", text(path(&["compiler", "fidelity", "mode"]))),
            (
                "max_gap_error_us",
                text(path(&["compiler", "fidelity", "max_gap_error_us"])),
            ),
            (
                "total_gap_error_us",
                text(path(&["compiler", "fidelity", "total_gap_error_us"])),
            ),
            ("canary_events", text(path(&["compiler", "canary_events"]))),
        ],
        document::HANG => vec![
            ("world_size", text(root.get("world_size"))),
            ("groups", count(root.get("groups"))),
            (
                "root_ranks",
                root.get("root").filter(|v| v.is_array()).map(|r| {
                    r.elements()
                        .filter_map(|e| e.get("rank").and_then(|x| x.as_i64()))
                        .map(|x| x.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                }),
            ),
        ],
        document::STRAGGLERS => vec![
            ("world_size", text(root.get("world"))),
            ("groups", count(root.get("groups"))),
            ("steps", count(root.get("steps"))),
            ("findings", count(root.get("findings"))),
        ],
        document::STEPS => vec![("steps", text(root.get("step_count")))],
        _ => Vec::new(),
    };
    wanted
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v)))
        .collect()
}

fn invalid(message: impl Into<String>) -> Error {
    Error::invalid(message.into())
}

fn number_text(v: Value<'_>) -> Option<String> {
    v.as_number()
        .map(|_| String::from_utf8_lossy(&crate::json::canon::to_vec(v)).into_owned())
}

/// What `bytes` is, read by the core's readers.
///
/// # Errors
/// Not JSON (within the resource limits), no `format` this version knows,
/// or a document its reader refuses (the message names the field).
pub fn inspect(bytes: &[u8]) -> Result<Inspected> {
    let doc = parse(bytes, JsonLimits::default())
        .map_err(|e| invalid(format!("not JSON: {}", e.message())))?;
    let root = doc
        .root()
        .filter(Value::is_object)
        .ok_or_else(|| invalid("expected a JSON object"))?;
    let format = match root.get("format").and_then(|f| f.as_str()) {
        Some(f) => f.to_owned(),
        None => root
            .get("otherData")
            .and_then(|m| m.get("format"))
            .and_then(|f| f.as_str())
            .filter(|f| *f == document::TIMELINE)
            .map(str::to_owned)
            .ok_or_else(|| invalid("format: missing (not a commcanary document)"))?,
    };
    let kind = document::KINDS
        .iter()
        .find(|(f, _)| *f == format)
        .map(|(_, noun)| *noun)
        .ok_or_else(|| {
            invalid(format!(
                "format: {format} is not a format this version reads"
            ))
        })?;
    let mut facts: Vec<(String, String)> = Vec::new();
    match format.as_str() {
        document::TRACE => {
            let trace = crate::trace::load_bytes(bytes, &crate::trace::LoadOptions::default())?;
            facts.push(("events".into(), trace.events.len().to_string()));
        }
        document::CANARY | document::CANARY_LOOP => {
            let canary = crate::canary::read::read_canary(bytes)?;
            facts.push(("source_events".into(), canary.source_events.to_string()));
            facts.push(("sha256".into(), canary.sha256));
        }
        document::REPORT => {
            crate::report::read::read_report(bytes, crate::report::read::SampleMode::Skip)?;
        }
        document::HANG => {
            crate::export::timeline::read_hang_document(bytes)?;
        }
        document::TIMELINE => {
            if !root.get("traceEvents").is_some_and(|v| v.is_array()) {
                return Err(invalid("traceEvents: expected list"));
            }
        }
        other => {
            let Some(members) = required(other) else {
                return Err(invalid(format!(
                    "format: {other} ({kind}) is not a document the server stores"
                )));
            };
            for (name, want) in members {
                if !root.get(name).is_some_and(|v| want.fits(v)) {
                    return Err(invalid(format!("{name}: expected {}", want.name())));
                }
            }
        }
    }
    let allowed = verdicts(&format);
    if !allowed.is_empty() {
        let verdict = root
            .get("verdict")
            .and_then(|v| v.as_str())
            .filter(|v| allowed.contains(v))
            .ok_or_else(|| invalid(format!("verdict: expected one of {}", allowed.join(", "))))?;
        facts.push(("verdict".into(), verdict.to_owned()));
    }
    facts.extend(job_facts(&format, root));
    if format == document::COMPARISON {
        for (section, names) in [
            ("delta", &COMPARISON_DELTAS),
            ("thresholds", &COMPARISON_THRESHOLDS),
        ] {
            for name in names {
                if let Some(text) = root
                    .get(section)
                    .and_then(|s| s.get(name))
                    .and_then(number_text)
                {
                    facts.push((format!("{section}.{name}"), text));
                }
            }
        }
    }
    Ok(Inspected {
        format,
        kind,
        facts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact<'a>(i: &'a Inspected, name: &str) -> Option<&'a str> {
        i.facts
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn documents_are_told_apart_and_checked() {
        let comparison = br#"{"format":"commcanary.compare.v3","verdict":"fail","reasons":[],
            "thresholds":{"p99_threshold_pct":10.0},"compatibility":{},"uncertainty":{},
            "baseline":{},"candidate":{},"delta":{"p99_pct":12.5,"median_pct":-1},
            "breakdown_delta":{},"worst_regressions":{},"evaluations":[]}"#;
        let got = inspect(comparison).unwrap();
        assert_eq!(
            (got.kind, fact(&got, "verdict")),
            ("comparison", Some("fail"))
        );
        assert_eq!(fact(&got, "delta.p99_pct"), Some("12.5"));
        assert_eq!(fact(&got, "delta.median_pct"), Some("-1"));
        assert_eq!(fact(&got, "thresholds.p99_threshold_pct"), Some("10.0"));
        let wrong_verdict = String::from_utf8_lossy(comparison).replace("\"fail\"", "\"maybe\"");
        assert!(
            inspect(wrong_verdict.as_bytes())
                .unwrap_err()
                .message()
                .contains("verdict")
        );
        let no_delta = String::from_utf8_lossy(comparison).replace("\"delta\"", "\"d\"");
        assert_eq!(
            inspect(no_delta.as_bytes()).unwrap_err().message(),
            "delta: expected dict"
        );
        let straggling = br#"{"format":"commcanary.stragglers.v1","verdict":"stragglers",
            "step_source":"ProfilerStep","world":4,"groups":[{},{}],"steps":[1,2,3],"findings":[{}],
            "ranks":[],"detector":{},"evidence":{},"communication":[]}"#;
        let got = inspect(straggling).unwrap();
        assert_eq!(fact(&got, "world_size"), Some("4"));
        assert_eq!(fact(&got, "groups"), Some("2"));
        assert_eq!(fact(&got, "steps"), Some("3"));
        let timeline = br#"{"traceEvents":[],"otherData":{"format":"commcanary.timeline.v1"}}"#;
        assert_eq!(inspect(timeline).unwrap().kind, "timeline");
        for bad in [
            &b"[1]"[..],
            b"not json",
            br#"{"format":"commcanary.nothing.v9"}"#,
            br#"{"format":"commcanary.trace.v1"}"#,
            br#"{"format":"commcanary.hang.v1","verdict":"hang"}"#,
            br#"{"traceEvents":[]}"#,
        ] {
            assert!(inspect(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
