//! The kinds of document commcanary reads and writes, told apart by their
//! top-level `format` member.
//!
//! Every reader checks the `format` of its input through [`expect_format`]
//! before validating anything else, so a canary given where a trace is
//! expected is reported as such (`is a commcanary.canary.v3 document (a
//! canary); a commcanary.trace.v1 trace was expected`) instead of as the first
//! field the canary happens to lack. This module is a leaf: it knows format
//! identifiers, not the documents' contents.

use crate::error::{Error, ErrorKind, Result};

/// The canonical JSON every document is written as (and every digest is
/// taken over): `commcanary.canonical-json.v1`, CPython's `json.dumps` with
/// sorted keys, no spaces, ASCII escapes and `repr` floats.
pub const CANONICAL_JSON: &str = "commcanary.canonical-json.v1";
/// `commcanary.trace.v1`: a workload's collectives, one event each.
pub const TRACE: &str = "commcanary.trace.v1";
/// `commcanary.canary.v3`: a compiled canary.
pub const CANARY: &str = "commcanary.canary.v3";
/// `commcanary.canary.v4`: a compiled canary whose program is a step loop
/// (v3 plus the `loop` block; same execution semantics).
pub const CANARY_LOOP: &str = "commcanary.canary.v4";
/// `commcanary.report.v3`: a replay report.
pub const REPORT: &str = "commcanary.report.v3";
/// `commcanary.compare.v3`: a comparison of two reports.
pub const COMPARISON: &str = "commcanary.compare.v3";
/// `commcanary.report_verification.v1`.
pub const REPORT_VERIFICATION: &str = "commcanary.report_verification.v1";
/// `commcanary.fidelity_verification.v1`.
pub const FIDELITY_VERIFICATION: &str = "commcanary.fidelity_verification.v1";
/// `commcanary.behavior_verification.v1`.
pub const BEHAVIOR_VERIFICATION: &str = "commcanary.behavior_verification.v1";
/// `commcanary.behavior_search_evidence.v1`.
pub const BEHAVIOR_SEARCH_EVIDENCE: &str = "commcanary.behavior_search_evidence.v1";
/// A hang diagnosis.
pub const HANG: &str = "commcanary.hang.v1";
/// A straggler diagnosis.
pub const STRAGGLERS: &str = "commcanary.stragglers.v1";
/// Steps recovered from the collective sequence.
pub const STEPS: &str = "commcanary.steps.v1";
/// Communication performance from NCCL Inspector, against nccl-tests.
pub const COMM_PERF: &str = "commcanary.comm_perf.v1";
/// A Chrome-trace timeline (Perfetto, `chrome://tracing`); its `format`
/// member sits in `otherData`, which Chrome-trace readers ignore.
pub const TIMELINE: &str = "commcanary.timeline.v1";

/// A detached Ed25519 signature of an artifact.
pub const SIGNATURE: &str = "commcanary.signature.v1";
/// A calibrated backend (`commcanary calibrate`, `replay --backend-file`).
pub const BACKEND: &str = "commcanary.backend.v1";
/// A model validation (`commcanary validate-model`).
pub const MODEL_VALIDATION: &str = "commcanary.model_validation.v1";
/// A gate policy (`commcanary gate calibrate`, `compare --policy`).
pub const GATE_POLICY: &str = "commcanary.gate_policy.v1";
/// One recording process's capture shard (JSON Lines; this is its header's
/// `format`).
pub const CAPTURE_SHARD: &str = "commcanary.capture-shard.v1";
/// What `compile-many` compiled and what it could not.
pub const COMPILE_MANY: &str = "commcanary.compile_many.v1";
/// What `capture --preserve-on-failure` keeps about a failed program.
pub const CAPTURE_FAILURE: &str = "commcanary.capture_failure.v1";

/// Every document format this version knows, with the noun a person reads.
pub const KINDS: [(&str, &str); 21] = [
    (TRACE, "trace"),
    (CANARY, "canary"),
    (CANARY_LOOP, "canary"),
    (REPORT, "report"),
    (COMPARISON, "comparison"),
    (REPORT_VERIFICATION, "report verification"),
    (FIDELITY_VERIFICATION, "fidelity verification"),
    (BEHAVIOR_VERIFICATION, "behaviour verification"),
    (BEHAVIOR_SEARCH_EVIDENCE, "behaviour search evidence"),
    (HANG, "hang diagnosis"),
    (STRAGGLERS, "straggler diagnosis"),
    (STEPS, "step recovery"),
    (COMM_PERF, "communication performance"),
    (TIMELINE, "timeline"),
    (SIGNATURE, "signature"),
    (BACKEND, "backend"),
    (GATE_POLICY, "gate policy"),
    (MODEL_VALIDATION, "model validation"),
    (COMPILE_MANY, "compile many"),
    (CAPTURE_SHARD, "capture shard"),
    (CAPTURE_FAILURE, "capture failure"),
];

/// The noun for a known format identifier.
#[must_use]
pub fn noun(format: &str) -> Option<&'static str> {
    KINDS.iter().find(|(f, _)| *f == format).map(|(_, n)| *n)
}

/// Checks a document's `format` value against the one a reader expects.
///
/// `found` is the decoded `format` string (`None` when the member is absent
/// or not a string). Returns `Ok(())` when it matches; an
/// [`ErrorKind::WrongDocument`] error when it names another known document
/// kind; `Ok(())` otherwise, so the reader's own validation reports a missing,
/// foreign or other-version `format` in its usual words.
///
/// # Errors
/// As described above.
pub fn expect_format(found: Option<&str>, expected: &str) -> Result<()> {
    let Some(found) = found else {
        return Ok(());
    };
    if found == expected {
        return Ok(());
    }
    let wanted = noun(expected).unwrap_or("document");
    let article = if wanted.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    if let Some(kind) = noun(found) {
        let article_found = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        };
        return Err(Error::new(
            ErrorKind::WrongDocument,
            format!(
                "is a {found} document ({article_found} {kind}); {article} {expected} {wanted} was expected"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_and_unknown_formats_pass_through() {
        assert!(expect_format(Some(TRACE), TRACE).is_ok());
        assert!(expect_format(None, TRACE).is_ok());
        assert!(expect_format(Some("something.else"), TRACE).is_ok());
    }

    #[test]
    fn a_known_kind_is_named() {
        let e = expect_format(Some(CANARY), TRACE).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WrongDocument);
        assert_eq!(
            e.with_path("c.json"),
            "c.json is a commcanary.canary.v3 document (a canary); a commcanary.trace.v1 trace was expected"
        );
        let e = expect_format(Some(REPORT_VERIFICATION), REPORT).unwrap_err();
        assert!(
            e.message()
                .contains("(a report verification); a commcanary.report.v3 report")
        );
    }
}
