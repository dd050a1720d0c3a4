//! Replay reports: `commcanary.report.v3`.
//!
//! A report is canonical JSON with these sections (see
//! `docs/formats/report.md`): `backend`, `by_op`, `by_phase`, optional
//! `calibration`, `canary`, `canary_summary`, `format`, `metrics`,
//! `replay_protocol`, optional `samples`, `simulation_model`, `workload`.
//! [`sections`] renders each section on its own so that verification can
//! compare a fresh recomputation with a report section by section, byte for
//! byte. Samples are stored column-wise.

pub mod measured;
pub mod read;
pub mod run;

use sha2::{Digest, Sha256};

use crate::canary::read::Canary;
use crate::json::OPEN_BRACE;
use crate::json::canon::{self, ObjectWriter};
use crate::pyfloat::round;
use crate::sim::metrics::{Calibration, Metrics, Row, Summary, breakdown, calibration, metrics};
use crate::sim::{MODEL_NAME, MODEL_VERSION, Replay, Settings, signature_json};
use crate::trace::hex;

/// The report format string.
pub const REPORT_FORMAT: &str = crate::document::REPORT;
/// Quantile method name.
pub const QUANTILE_METHOD: &str = "linear-interpolated-sorted";

/// Metrics, breakdowns and calibration of a replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregates {
    /// Report metrics.
    pub metrics: Metrics,
    /// By phase.
    pub by_phase: Vec<Row>,
    /// By operation.
    pub by_op: Vec<Row>,
    /// Calibration, when observed latencies exist.
    pub calibration: Option<Calibration>,
}

/// Aggregates full-precision replay values.
#[must_use]
pub fn aggregate(r: &Replay) -> Aggregates {
    let phase = |i: usize| r.signatures[r.signature[i] as usize].phase.as_slice();
    let op = |i: usize| r.signatures[r.signature[i] as usize].op.as_slice();
    Aggregates {
        metrics: metrics(
            &r.exposed_us,
            &r.arrival_skew_us,
            &r.avg_rank_wait_us,
            &r.hidden_us,
            &r.total_us,
        ),
        by_phase: breakdown(&r.exposed_us, phase),
        by_op: breakdown(&r.exposed_us, op),
        calibration: r
            .has_observed()
            .then(|| calibration(&r.exposed_us, &r.observed_exposed_us)),
    }
}

fn write_summary_fields(o: &mut ObjectWriter<'_>, s: &Summary) {
    o.i64("count", s.count as i64);
    o.f64("max_us", s.max_us);
    o.f64("mean_us", s.mean_us);
    o.f64("median_us", s.median_us);
}

/// Canonical `metrics` section.
#[must_use]
pub fn metrics_json(m: &Metrics) -> Vec<u8> {
    let mut out = Vec::new();
    let mut o = ObjectWriter::new(&mut out);
    o.f64("arrival_skew_max_us", m.arrival_skew_max_us);
    o.f64("arrival_skew_median_us", m.arrival_skew_median_us);
    o.f64("arrival_skew_p95_us", m.arrival_skew_p95_us);
    o.f64("avg_rank_wait_median_us", m.avg_rank_wait_median_us);
    o.f64("communication_hidden_pct", m.communication_hidden_pct);
    write_summary_fields(&mut o, &m.exposed);
    o.f64("p95_us", m.exposed.p95_us);
    o.f64("p99_us", m.exposed.p99_us);
    o.end();
    out
}

/// Canonical breakdown section (`by_phase` / `by_op`).
#[must_use]
pub fn rows_json(rows: &[Row]) -> Vec<u8> {
    let mut out = vec![b'['];
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let mut o = ObjectWriter::new(&mut out);
        write_summary_fields(&mut o, &row.summary);
        canon::write_wtf8(o.key("name"), &row.name);
        o.f64("p95_us", row.summary.p95_us);
        o.f64("p99_us", row.summary.p99_us);
        o.end();
    }
    out.push(b']');
    out
}

/// Canonical `calibration` section.
#[must_use]
pub fn calibration_json(c: &Calibration) -> Vec<u8> {
    let mut out = Vec::new();
    let mut o = ObjectWriter::new(&mut out);
    o.i64("count", c.count as i64);
    o.f64("max_absolute_error_us", c.max_absolute_error_us);
    o.f64("mean_absolute_error_us", c.mean_absolute_error_us);
    o.f64(
        "mean_absolute_percentage_error_pct",
        c.mean_absolute_percentage_error_pct,
    );
    o.f64("mean_bias_us", c.mean_bias_us);
    o.f64("median_absolute_error_us", c.median_absolute_error_us);
    o.f64("p95_absolute_error_us", c.p95_absolute_error_us);
    o.i64("percentage_count", c.percentage_count as i64);
    o.str("signal", "observed_exposed_us");
    o.end();
    out
}

/// The replay protocol object without `sha256` and `max_replay_events` (the
/// projection its hash covers).
fn protocol_core(s: &Settings, out: &mut ObjectWriter<'_>) {
    out.str_list("ablations", &s.ablations.names());
    out.str("bandwidth_unit", "Gbit/s");
    out.i64("iterations", i64::from(s.iterations));
}

/// SHA-256 of the protocol projection.
#[must_use]
pub fn protocol_sha256(s: &Settings) -> String {
    let mut out = Vec::new();
    let mut o = ObjectWriter::new(&mut out);
    protocol_core(s, &mut o);
    o.str("model_name", MODEL_NAME);
    o.str("model_version", MODEL_VERSION);
    o.str("quantile_method", QUANTILE_METHOD);
    o.i64("seed", s.seed);
    o.end();
    hex(&Sha256::digest(&out))
}

/// Canonical `replay_protocol` section.
#[must_use]
pub fn protocol_json(s: &Settings) -> Vec<u8> {
    let mut out = Vec::new();
    let mut o = ObjectWriter::new(&mut out);
    protocol_core(s, &mut o);
    o.i64("max_replay_events", s.max_replay_events as i64);
    o.str("model_name", MODEL_NAME);
    o.str("model_version", MODEL_VERSION);
    o.str("quantile_method", QUANTILE_METHOD);
    o.i64("seed", s.seed);
    o.str("sha256", &protocol_sha256(s));
    o.end();
    out
}

/// Canonical `backend` section (the settings codec's).
#[must_use]
pub fn backend_json(s: &Settings) -> Vec<u8> {
    crate::sim::settings::codec::backend_json(s)
}

/// Canonical `simulation_model` section.
#[must_use]
pub fn model_json() -> Vec<u8> {
    let mut out = Vec::new();
    let mut o = ObjectWriter::new(&mut out);
    o.str("name", MODEL_NAME);
    o.str("version", MODEL_VERSION);
    o.end();
    out
}

/// Canonical `canary` section.
#[must_use]
pub fn canary_ref_json(c: &Canary) -> Vec<u8> {
    let mut out = Vec::new();
    let mut o = ObjectWriter::new(&mut out);
    o.str(
        "calibration_evaluation_sha256",
        &c.calibration_evaluation_sha256,
    );
    o.str("execution_semantic_sha256", &c.execution_semantic_sha256);
    o.str("format", c.program.format());
    o.str("sha256", &c.sha256);
    o.i64("source_events", c.source_events as i64);
    o.end();
    out
}

/// Rounded sample columns, as stored in a report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampleColumns {
    /// Signature per sample.
    pub signature: Vec<u32>,
    /// Named float columns, in storage order.
    pub floats: Vec<(&'static str, Vec<f64>)>,
    /// Uncertainty flags (present only when any sample is uncertain).
    pub uncertain: Option<Vec<bool>>,
}

/// The sample columns a report does not store but every reader derives:
/// `last_arrival_us = first_arrival_us + arrival_skew_us` and
/// `completion_us = collective_start_us + collective_us` (empty when a
/// stored column is missing).
#[must_use]
pub fn derived_sample_columns<S: AsRef<str>>(
    stored: &[(S, Vec<f64>)],
) -> Vec<(&'static str, Vec<f64>)> {
    let column = |name: &str| {
        stored
            .iter()
            .find(|(n, _)| n.as_ref() == name)
            .map(|(_, v)| v.as_slice())
    };
    let sum = |a: &str, b: &str| match (column(a), column(b)) {
        (Some(a), Some(b)) => a.iter().zip(b).map(|(x, y)| x + y).collect(),
        _ => Vec::new(),
    };
    vec![
        ("completion_us", sum("collective_start_us", "collective_us")),
        (
            "last_arrival_us",
            sum("first_arrival_us", "arrival_skew_us"),
        ),
    ]
}

/// Float sample columns in storage (sorted) order. `last_arrival_us` and
/// `completion_us` are not stored: they are `first_arrival_us +
/// arrival_skew_us` and `collective_start_us + collective_us`.
pub const SAMPLE_FLOAT_COLUMNS: [&str; 12] = [
    "arrival_skew_us",
    "avg_rank_wait_us",
    "collective_start_us",
    "collective_us",
    "compute_before_us",
    "compute_overlap_us",
    "exposed_us",
    "first_arrival_us",
    "gap_us",
    "hidden_us",
    "queue_wait_us",
    "total_us",
];

/// Rounds replay values the way reports store them: 3 decimals (gaps 9),
/// `hidden = min(total, round(hidden))`, `exposed = round(total − hidden)`.
#[must_use]
pub fn sample_columns(r: &Replay) -> SampleColumns {
    let floats = sample_specs(r)
        .into_iter()
        .map(|(name, _, value)| (name, (0..r.len()).map(|i| value(r, i)).collect()))
        .collect();
    SampleColumns {
        signature: r.signature.clone(),
        floats,
        uncertain: r.uncertain.iter().any(|&u| u).then(|| r.uncertain.clone()),
    }
}

/// The exposed latency of every occurrence, rounded as a report stores it:
/// the one column a page draws, kept for a run whose report carries no
/// samples (a few bytes per occurrence, not the whole replay).
#[must_use]
pub fn exposed_column(r: &Replay) -> Vec<f64> {
    (0..r.len())
        .map(|i| r3(stored_total(r, i) - stored_hidden(r, i)))
        .collect()
}

/// [`exposed_column`] for a run that does not keep its replay; empty when
/// it does (the column is then computed from the replay when asked).
#[must_use]
pub fn exposed_unless_kept(r: &Replay, kept: bool) -> Vec<f64> {
    if kept { Vec::new() } else { exposed_column(r) }
}

/// One stored float column of the samples: its name, its decimals and how to
/// compute value `i` from the replay (rounded exactly as `sample_columns`).
type ColumnSpec = (&'static str, u32, fn(&Replay, usize) -> f64);

fn r3(x: f64) -> f64 {
    round(x, 3)
}

fn stored_total(r: &Replay, i: usize) -> f64 {
    r3(r.total_us[i])
}

fn stored_hidden(r: &Replay, i: usize) -> f64 {
    stored_total(r, i).min(r3(r.hidden_us[i]))
}

fn sample_specs(r: &Replay) -> Vec<ColumnSpec> {
    let mut specs: Vec<ColumnSpec> = vec![
        ("arrival_skew_us", 3, |r, i| r3(r.arrival_skew_us[i])),
        ("avg_rank_wait_us", 3, |r, i| r3(r.avg_rank_wait_us[i])),
        (
            "collective_start_us",
            3,
            |r, i| r3(r.collective_start_us[i]),
        ),
        ("collective_us", 3, |r, i| r3(r.collective_us[i])),
        ("compute_before_us", 3, |r, i| r3(r.compute_before_us[i])),
        ("compute_overlap_us", 3, |r, i| r3(r.compute_overlap_us[i])),
        ("exposed_us", 3, |r, i| {
            r3(stored_total(r, i) - stored_hidden(r, i))
        }),
        ("first_arrival_us", 3, |r, i| r3(r.first_arrival_us[i])),
        ("gap_us", 9, |r, i| round(r.gap_us[i], 9)),
        ("hidden_us", 3, stored_hidden),
        ("queue_wait_us", 3, |r, i| r3(r.queue_wait_us[i])),
        ("total_us", 3, stored_total),
    ];
    if r.has_observed() {
        specs.push((
            "observed_exposed_us",
            3,
            |r, i| r3(r.observed_exposed_us[i]),
        ));
    }
    specs
}

/// The `samples` section as pieces (concatenated, they are its canonical
/// JSON); columns are formatted straight from the replay on two threads.
#[must_use]
pub fn samples_pieces(r: &Replay) -> Vec<Vec<u8>> {
    let specs = sample_specs(r);
    let format = |specs: &[ColumnSpec]| -> Vec<(&'static str, Vec<u8>)> {
        specs
            .iter()
            .map(|(name, decimals, value)| {
                let mut out = Vec::with_capacity(r.len() * 10 + 2);
                out.push(b'[');
                for i in 0..r.len() {
                    if i > 0 {
                        out.push(b',');
                    }
                    canon::write_f64_rounded(&mut out, value(r, i), *decimals);
                }
                out.push(b']');
                (*name, out)
            })
            .collect()
    };
    let mut entries = if r.len() < 20_000 {
        format(&specs)
    } else {
        let (a, b) = specs.split_at(specs.len() / 2);
        let (mut first, second) = rayon::join(|| format(a), || format(b));
        first.extend(second);
        first
    };
    let mut signature = Vec::with_capacity(r.len() * 3 + 2);
    signature.push(b'[');
    for (i, s) in r.signature.iter().enumerate() {
        if i > 0 {
            signature.push(b',');
        }
        canon::write_i64(&mut signature, i64::from(*s));
    }
    signature.push(b']');
    entries.push(("signature", signature));
    if r.uncertain.iter().any(|&u| u) {
        let mut json = vec![b'['];
        for (i, f) in r.uncertain.iter().enumerate() {
            if i > 0 {
                json.push(b',');
            }
            json.extend_from_slice(if *f { b"true" } else { b"false" });
        }
        json.push(b']');
        entries.push(("compute_fields_uncertain", json));
    }
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let mut pieces = Vec::with_capacity(entries.len() * 2 + 2);
    for (i, (name, json)) in entries.into_iter().enumerate() {
        let mut key = Vec::new();
        key.extend_from_slice(if i == 0 { b"{\"columns\":{" } else { b"," });
        canon::write_str(&mut key, name);
        key.push(b':');
        pieces.push(key);
        pieces.push(json);
    }
    let mut tail = Vec::new();
    tail.extend_from_slice(b"},\"count\":");
    canon::write_i64(&mut tail, r.len() as i64);
    tail.extend_from_slice(b",\"events_per_iteration\":");
    canon::write_i64(&mut tail, r.per_iteration as i64);
    tail.extend_from_slice(b",\"scheduler_resources\":[");
    for (i, res) in r.resources.iter().enumerate() {
        if i > 0 {
            tail.push(b',');
        }
        canon::write_str(&mut tail, res);
    }
    tail.extend_from_slice(b"],\"signatures\":[");
    for (i, sig) in r.signatures.iter().enumerate() {
        if i > 0 {
            tail.push(b',');
        }
        tail.extend_from_slice(&signature_json(sig));
    }
    tail.extend_from_slice(b"]}");
    pieces.push(tail);
    pieces
}

/// A report section: canonical JSON as one or more pieces.
pub type Section = (&'static str, Vec<Vec<u8>>);

/// Every section of a report, in key order, as canonical JSON pieces.
#[must_use]
pub fn sections(
    canary: &Canary,
    replay: &Replay,
    settings: &Settings,
    include_samples: bool,
) -> Vec<Section> {
    let header = Header {
        backend: backend_json(settings),
        protocol: protocol_json(settings),
        model: model_json(),
    };
    sections_with(canary, replay, header, include_samples)
}

/// What a report says produced its numbers: the `backend`,
/// `replay_protocol` and `simulation_model` sections (the model's, or a
/// measured run's, [`measured`]).
#[derive(Debug, Clone)]
pub struct Header {
    /// Canonical `backend`.
    pub backend: Vec<u8>,
    /// Canonical `replay_protocol`.
    pub protocol: Vec<u8>,
    /// Canonical `simulation_model`.
    pub model: Vec<u8>,
}

/// Every section of a report of `replay` under `header`, in key order.
#[must_use]
pub fn sections_with(
    canary: &Canary,
    replay: &Replay,
    header: Header,
    include_samples: bool,
) -> Vec<Section> {
    // Aggregation (sorting) and sample formatting run side by side.
    let (agg, samples) = rayon::join(
        || aggregate(replay),
        || include_samples.then(|| samples_pieces(replay)),
    );
    let one = |name: &'static str, json: Vec<u8>| (name, vec![json]);
    let mut out: Vec<Section> = vec![
        one("backend", header.backend),
        one("by_op", rows_json(&agg.by_op)),
        one("by_phase", rows_json(&agg.by_phase)),
    ];
    if let Some(c) = &agg.calibration {
        out.push(one("calibration", calibration_json(c)));
    }
    out.push(one("canary", canary_ref_json(canary)));
    out.push(one("canary_summary", canary.member_json("compiler")));
    let mut format = Vec::new();
    canon::write_str(&mut format, REPORT_FORMAT);
    out.push(one("format", format));
    out.push(one("metrics", metrics_json(&agg.metrics)));
    out.push(one("replay_protocol", header.protocol));
    if let Some(samples) = samples {
        out.push(("samples", samples));
    }
    out.push(one("simulation_model", header.model));
    out.push(one("workload", canary.member_json("workload")));
    out
}

/// The pieces whose concatenation is the report's canonical bytes (for
/// writing without joining).
#[must_use]
pub fn section_pieces<'a>(sections: &'a [Section], keys: &'a mut Vec<Vec<u8>>) -> Vec<&'a [u8]> {
    keys.clear();
    for (i, (key, _)) in sections.iter().enumerate() {
        let mut k = Vec::new();
        k.push(if i == 0 { OPEN_BRACE } else { b',' });
        canon::write_str(&mut k, key);
        k.push(b':');
        keys.push(k);
    }
    let mut pieces: Vec<&[u8]> = Vec::with_capacity(sections.len() * 3 + 1);
    for (k, (_, parts)) in keys.iter().zip(sections) {
        pieces.push(k);
        pieces.extend(parts.iter().map(Vec::as_slice));
    }
    pieces.push(if sections.is_empty() { b"{}" } else { b"}" });
    pieces
}

/// Joins sections into the report's canonical bytes.
#[must_use]
pub fn join_sections(sections: &[Section]) -> Vec<u8> {
    let mut keys = Vec::new();
    let pieces = section_pieces(sections, &mut keys);
    let mut out = Vec::with_capacity(pieces.iter().map(|p| p.len()).sum());
    for p in pieces {
        out.extend_from_slice(p);
    }
    out
}

/// The canonical JSON of a section, joined.
#[must_use]
pub fn section_json(section: &Section) -> Vec<u8> {
    section.1.concat()
}

/// One line of a report verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// Section name.
    pub name: &'static str,
    /// Whether the fresh recomputation equals the report.
    pub pass: bool,
    /// Canonical JSON of the recomputed value (failing checks only).
    pub expected: Option<Vec<u8>>,
    /// Canonical JSON of the report's value (failing checks only).
    pub actual: Option<Vec<u8>>,
}

/// Re-runs the report's declared model over `canary` and compares every
/// section with the report, in the fixed order `canary, simulation_model,
/// replay_protocol, backend, workload, canary_summary, metrics, by_phase,
/// by_op, calibration` (+ `samples` when the report embeds them).
///
/// # Errors
/// A canary that is not the one the report was produced from, or a replay
/// error.
pub fn verify(report: &read::Report, canary: &Canary) -> crate::Result<Vec<Check>> {
    check_belongs(report, canary)?;
    if measured::is_measured(report) {
        return Ok(measured::verify(report, canary));
    }
    let replay = crate::sim::replay(&canary.program, &report.settings)?;
    let fresh = sections(canary, &replay, &report.settings, false);
    let columns = sample_columns(&replay);
    let contradicted = backend_contradicted(report.samples.as_ref(), &columns);
    let mut checks = section_checks(report, &fresh, contradicted);
    if report.has_samples {
        checks.push(samples_check(report.samples.as_ref(), &replay, &columns));
    }
    Ok(checks)
}

/// The exposed latency of every occurrence of a model report, recomputed:
/// the report's declared model re-run over `canary` (the replay is
/// deterministic, so these are the values its samples would have held).
/// What a page draws for a report written without samples.
///
/// # Errors
/// A canary that is not the report's, a measured report (a measurement
/// cannot be re-run), or a replay error.
pub fn recomputed_exposed(report: &read::Report, canary: &Canary) -> crate::Result<Vec<f64>> {
    check_belongs(report, canary)?;
    if measured::is_measured(report) {
        return Err(crate::Error::invalid(
            "is a measured report: its latencies cannot be recomputed from the canary (measure it again with --include-samples to draw them)",
        ));
    }
    let replay = crate::sim::replay(&canary.program, &report.settings)?;
    Ok(exposed_column(&replay))
}

/// Verification stage 1: the report names `canary` (by its SHA-256).
fn check_belongs(report: &read::Report, canary: &Canary) -> crate::Result<()> {
    let claimed = report
        .section("canary")
        .and_then(|c| c.get("sha256"))
        .and_then(|v| v.as_str())
        .unwrap_or("");
    if claimed != canary.sha256 {
        return Err(crate::Error::invalid(format!(
            "report canary.sha256 {claimed} does not match the canary given ({}); they do not belong together",
            canary.sha256
        )));
    }
    Ok(())
}

/// Verification stage 2: whether embedded samples show a backend edited
/// after the replay: collective latencies that no longer match while
/// everything the canary determines (gaps, skew, overlap) still does.
fn backend_contradicted(samples: Option<&read::Samples>, columns: &SampleColumns) -> bool {
    samples.is_some_and(|s| {
        let same = |name: &str| {
            let fresh = columns
                .floats
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_slice());
            match (fresh, s.column(name)) {
                (Some(a), Some(b)) => {
                    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
                }
                _ => false,
            }
        };
        same("gap_us")
            && same("arrival_skew_us")
            && same("compute_overlap_us")
            && !same("collective_us")
    })
}

/// Verification stage 3: one check per summary section, the `fresh`
/// recomputation against the report, in [`verify`]'s order.
fn section_checks(
    report: &read::Report,
    fresh: &[Section],
    backend_contradicted: bool,
) -> Vec<Check> {
    let fresh_of = |name: &str| fresh.iter().find(|(n, _)| *n == name).map(section_json);
    let mut checks = Vec::new();
    for name in [
        "canary",
        "simulation_model",
        "replay_protocol",
        "backend",
        "workload",
        "canary_summary",
        "metrics",
        "by_phase",
        "by_op",
        "calibration",
    ] {
        let expected = fresh_of(name);
        let actual = report.section_json(name);
        let pass = expected == actual && !(name == "backend" && backend_contradicted);
        if name == "backend" && !pass && expected == actual {
            let mut note = Vec::new();
            canon::write_str(
                &mut note,
                "the samples' collective latencies were not produced under this backend (bandwidth, latency floor or compute pressure)",
            );
            checks.push(Check {
                name,
                pass,
                expected: Some(note),
                actual,
            });
            continue;
        }
        checks.push(Check {
            name,
            pass,
            expected: (!pass).then(|| expected.unwrap_or_else(|| b"null".to_vec())),
            actual: (!pass).then(|| actual.unwrap_or_else(|| b"null".to_vec())),
        });
    }
    checks
}

/// Verification stage 4: the `samples` check. Missing samples fail; a
/// mismatch fails with its description as both `expected` and `actual`.
fn samples_check(
    samples: Option<&read::Samples>,
    replay: &Replay,
    columns: &SampleColumns,
) -> Check {
    let mut check = Check {
        name: "samples",
        pass: true,
        expected: None,
        actual: None,
    };
    match samples {
        None => check.pass = false,
        Some(s) => {
            if let Some(m) = samples_mismatch(s, replay, columns) {
                check.pass = false;
                let mut note = Vec::new();
                canon::write_str(&mut note, &m);
                check.expected = Some(note.clone());
                check.actual = Some(note);
            }
        }
    }
    check
}

/// The first part of embedded samples that differs from the fresh replay
/// (shape, signatures, resources, flags, column set, then each column's
/// first differing value), described; `None` when they are identical.
fn samples_mismatch(s: &read::Samples, replay: &Replay, columns: &SampleColumns) -> Option<String> {
    if s.count != replay.len()
        || s.per_iteration != replay.per_iteration
        || s.signature != columns.signature
    {
        return Some("sample count, iteration size or signatures".to_owned());
    }
    let signatures: Vec<Vec<u8>> = replay.signatures.iter().map(signature_json).collect();
    if s.signatures != signatures {
        return Some("samples.signatures".to_owned());
    }
    if s.resources != replay.resources {
        return Some("samples.scheduler_resources".to_owned());
    }
    if s.uncertain != columns.uncertain {
        return Some("samples.compute_fields_uncertain".to_owned());
    }
    if s.columns.len() != columns.floats.len() {
        return Some("the set of sample columns".to_owned());
    }
    for (name, want) in &columns.floats {
        match s.column(name) {
            Some(got)
                if got
                    .iter()
                    .zip(want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()) => {}
            Some(got) => {
                let i = got
                    .iter()
                    .zip(want)
                    .position(|(a, b)| a.to_bits() != b.to_bits())
                    .unwrap_or(0);
                return Some(format!(
                    "samples.{name}[{i}]: recomputed {} vs report {}",
                    crate::pyfloat::repr(want[i]),
                    crate::pyfloat::repr(got[i])
                ));
            }
            None => return Some(format!("samples.{name} is missing")),
        }
    }
    None
}
