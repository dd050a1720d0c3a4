//! Reading and structurally validating a report.
//!
//! Validation checks the shape of every section, the internal arithmetic of
//! the numbers (quantile order, counts, breakdowns adding up to the metrics,
//! the protocol hash) and, when samples are embedded, that every sample is
//! consistent with the scheduling equations and that every metric, breakdown
//! row and calibration figure recomputes from the samples. The first problem
//! found is reported naming the section, row and field, e.g. `report by_op
//! row 'all_reduce' median_us does not match samples`.
//!
//! Samples are big; callers that only need the summary sections (comparison)
//! ask for [`SampleMode::Skip`], which validates their syntax without
//! materialising them.

use super::{QUANTILE_METHOD, REPORT_FORMAT, protocol_sha256};
use crate::error::{Error, ErrorKind, Result};
use crate::json::{CLOSE_BRACE, Doc, JsonLimits, NodeId, OPEN_BRACE, Parser, Value, canon};
use crate::sim::metrics::{Calibration, Metrics, Summary, breakdown, calibration, metrics};
use crate::sim::{Ablations, Settings};

/// What to do with embedded samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleMode {
    /// Check their structure only (balanced, closed, no NaN).
    Skip,
    /// Parse and reconcile them.
    Parse,
}

/// Embedded samples, column-wise.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    /// Number of samples.
    pub count: usize,
    /// Samples per iteration.
    pub per_iteration: usize,
    /// Signature index per sample.
    pub signature: Vec<u32>,
    /// Float columns by name.
    pub columns: Vec<(String, Vec<f64>)>,
    /// Uncertainty flags, when present.
    pub uncertain: Option<Vec<bool>>,
    /// Canonical JSON of each signature.
    pub signatures: Vec<Vec<u8>>,
    /// Phase of each signature.
    pub phases: Vec<Vec<u8>>,
    /// Operation of each signature.
    pub ops: Vec<Vec<u8>>,
    /// Scheduler resource of each signature.
    pub resources: Vec<String>,
    /// Canonical JSON of `scheduler_resources`.
    pub resources_json: Vec<u8>,
}

impl Samples {
    /// A float column by name.
    #[must_use]
    pub fn column(&self, name: &str) -> Option<&[f64]> {
        self.columns
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }
}

/// A structurally valid report.
#[derive(Debug, Clone)]
pub struct Report {
    /// All sections but `samples`, parsed.
    pub doc: Doc,
    /// Section name → node.
    pub sections: Vec<(String, NodeId)>,
    /// Whether the report embeds samples.
    pub has_samples: bool,
    /// The samples, when parsed.
    pub samples: Option<Samples>,
    /// Settings to recompute the report with.
    pub settings: Settings,
}

impl Report {
    /// A section's value.
    #[must_use]
    pub fn section(&self, name: &str) -> Option<Value<'_>> {
        self.sections
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, id)| self.doc.value(*id))
    }

    /// Canonical JSON of a section (`None` when absent).
    #[must_use]
    pub fn section_json(&self, name: &str) -> Option<Vec<u8>> {
        self.section(name).map(canon::to_vec)
    }
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("report {what}"))
}

fn num(v: Option<Value<'_>>, path: &str) -> Result<f64> {
    v.and_then(|v| match v.node() {
        crate::json::Node::Int(i) => Some(i as f64),
        crate::json::Node::Float { value, .. } => Some(value),
        _ => None,
    })
    .ok_or_else(|| bad(format_args!("{path} must be a number")))
}

fn int(v: Option<Value<'_>>, path: &str, min: i64) -> Result<i64> {
    match v.and_then(|v| v.as_i64()) {
        Some(i) if i >= min => Ok(i),
        _ => Err(bad(format_args!("{path} must be an integer >= {min}"))),
    }
}

fn text<'a>(v: Option<Value<'a>>, path: &str) -> Result<&'a str> {
    v.and_then(|v| v.as_str())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| bad(format_args!("{path} must be a non-empty string")))
}

fn object<'a>(v: Option<Value<'a>>, path: &str) -> Result<Value<'a>> {
    v.filter(Value::is_object)
        .ok_or_else(|| bad(format_args!("section '{path}' must be an object")))
}

fn is_sha(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A breakdown row's name and summary.
type NamedSummary = (Vec<u8>, Summary);

/// Reads the latency summary fields of a metrics object or breakdown row.
fn summary(v: Value<'_>, path: &str) -> Result<Summary> {
    let f = |k: &str| num(v.get(k), &format!("{path} {k}"));
    let s = Summary {
        count: int(v.get("count"), &format!("{path} count"), 0)? as u64,
        median_us: f("median_us")?,
        p95_us: f("p95_us")?,
        p99_us: f("p99_us")?,
        max_us: f("max_us")?,
        mean_us: f("mean_us")?,
    };
    for (k, x) in [
        ("median_us", s.median_us),
        ("p95_us", s.p95_us),
        ("p99_us", s.p99_us),
        ("max_us", s.max_us),
        ("mean_us", s.mean_us),
    ] {
        if x < 0.0 {
            return Err(bad(format_args!("{path} {k} must be non-negative")));
        }
    }
    if !(s.median_us <= s.p95_us && s.p95_us <= s.p99_us && s.p99_us <= s.max_us) {
        return Err(bad(format_args!(
            "{path} quantiles must satisfy median <= p95 <= p99 <= max"
        )));
    }
    if s.mean_us > s.max_us {
        return Err(bad(format_args!("{path} mean_us must not exceed max_us")));
    }
    Ok(s)
}

/// Parses and validates report `bytes`.
///
/// # Errors
/// JSON errors, limits, and the first structural problem found.
pub fn read_report(bytes: &[u8], mode: SampleMode) -> Result<Report> {
    let limits = JsonLimits {
        max_items: 400_000_000,
        ..JsonLimits::default()
    };
    let mut p = Parser::new(bytes, limits)?;
    p.skip_ws();
    if p.peek() != Some(OPEN_BRACE) {
        let mut scratch = Doc::new();
        p.parse_value(&mut scratch, 1)?;
        p.finish()?;
        return Err(Error::new(ErrorKind::Json, "must contain a JSON object"));
    }
    p.expect(OPEN_BRACE, "")?;
    let mut doc = Doc::new();
    let mut sections: Vec<(String, NodeId)> = Vec::new();
    let mut samples = None;
    let mut has_samples = false;
    p.skip_ws();
    if p.peek() == Some(CLOSE_BRACE) {
        p.expect(CLOSE_BRACE, "")?;
    } else {
        loop {
            p.skip_ws();
            p.count_item()?;
            let mut key = Vec::new();
            p.read_string_into(&mut key)?;
            let key = String::from_utf8_lossy(&key).into_owned();
            if key == "samples" && has_samples || sections.iter().any(|(k, _)| *k == key) {
                return Err(p.error(&format!("duplicate object key {key:?} at")));
            }
            p.expect(b':', "Expecting ':' delimiter")?;
            p.skip_ws();
            if key == "samples" {
                has_samples = true;
                match mode {
                    SampleMode::Skip => p.skim_value(2)?,
                    SampleMode::Parse => samples = Some(parse_samples(&mut p)?),
                }
            } else {
                let id = p.parse_value(&mut doc, 2)?;
                sections.push((key, id));
            }
            p.skip_ws();
            match p.peek() {
                Some(b',') => p.expect(b',', "")?,
                Some(CLOSE_BRACE) => {
                    p.expect(CLOSE_BRACE, "")?;
                    break;
                }
                _ => return Err(p.error("Expecting ',' delimiter")),
            }
        }
    }
    p.finish()?;
    let report = Report {
        doc,
        sections,
        has_samples,
        samples,
        settings: Settings::default(),
    };
    let format = report.section("format").and_then(|v| v.as_str());
    crate::document::expect_format(format, REPORT_FORMAT)?;
    let settings = validate(&report)?;
    Ok(Report { settings, ..report })
}

/// Node ids of the small members of `samples` (parsed into a side document)
/// and whether `columns` was seen.
#[derive(Default)]
struct SampleMembers {
    count: Option<NodeId>,
    per_iteration: Option<NodeId>,
    signatures: Option<NodeId>,
    resources: Option<NodeId>,
    seen_columns: bool,
}

/// Reads the `samples` object at the cursor: columns straight into vectors,
/// the small members into a side document, then checks those.
fn parse_samples(p: &mut Parser<'_>) -> Result<Samples> {
    p.check_depth(2)?;
    p.expect(OPEN_BRACE, "Expecting value")?;
    let mut s = Samples::default();
    let mut small = Doc::new();
    let mut members = SampleMembers::default();
    loop {
        p.skip_ws();
        if p.peek() == Some(CLOSE_BRACE) {
            p.expect(CLOSE_BRACE, "")?;
            break;
        }
        p.count_item()?;
        let mut key = Vec::new();
        p.read_string_into(&mut key)?;
        p.expect(b':', "Expecting ':' delimiter")?;
        p.skip_ws();
        match key.as_slice() {
            b"columns" => {
                members.seen_columns = true;
                parse_sample_columns(p, &mut s, &mut small)?;
            }
            b"count" => members.count = Some(p.parse_value(&mut small, 3)?),
            b"events_per_iteration" => members.per_iteration = Some(p.parse_value(&mut small, 3)?),
            b"signatures" => members.signatures = Some(p.parse_value(&mut small, 3)?),
            b"scheduler_resources" => members.resources = Some(p.parse_value(&mut small, 3)?),
            other => {
                return Err(bad(format_args!(
                    "samples has unknown field '{}'",
                    String::from_utf8_lossy(other)
                )));
            }
        }
        p.skip_ws();
        if p.peek() == Some(b',') {
            p.expect(b',', "")?;
        }
    }
    finish_samples(s, &small, &members)
}

/// Samples stage 1: the `columns` object at the cursor, each column read as
/// a number array (the uncertainty flags as booleans) into `s`.
fn parse_sample_columns(p: &mut Parser<'_>, s: &mut Samples, small: &mut Doc) -> Result<()> {
    p.check_depth(3)?;
    p.expect(OPEN_BRACE, "Expecting value")?;
    loop {
        p.skip_ws();
        if p.peek() == Some(CLOSE_BRACE) {
            p.expect(CLOSE_BRACE, "")?;
            return Ok(());
        }
        p.count_item()?;
        let mut name = Vec::new();
        p.read_string_into(&mut name)?;
        let name = String::from_utf8_lossy(&name).into_owned();
        p.expect(b':', "Expecting ':' delimiter")?;
        p.skip_ws();
        let what = format!("report samples.{name}");
        if name == "compute_fields_uncertain" {
            let id = p.parse_value(small, 4)?;
            let flags: Option<Vec<bool>> =
                small.value(id).elements().map(|v| v.as_bool()).collect();
            s.uncertain =
                Some(flags.ok_or_else(|| bad(format_args!("samples.{name} must be booleans")))?);
        } else {
            let mut values = Vec::new();
            p.read_number_array(4, &mut values, &what)?;
            if name == "signature" {
                s.signature = values
                    .iter()
                    .map(|&v| {
                        (v >= 0.0 && v.fract() == 0.0 && v < 4e9)
                            .then_some(v as u32)
                            .ok_or_else(|| bad("samples.signature must hold signature indices"))
                    })
                    .collect::<Result<_>>()?;
            } else {
                if s.columns.iter().any(|(n, _)| *n == name) {
                    return Err(bad(format_args!("samples.{name} appears twice")));
                }
                s.columns.push((name, values));
            }
        }
        p.skip_ws();
        if p.peek() == Some(b',') {
            p.expect(b',', "")?;
        }
    }
}

/// Samples stage 2: the small members (count, iteration size, signatures,
/// scheduler resources) checked and moved into `s`.
fn finish_samples(mut s: Samples, small: &Doc, members: &SampleMembers) -> Result<Samples> {
    if !members.seen_columns {
        return Err(bad("samples.columns is required"));
    }
    s.count = int(members.count.map(|c| small.value(c)), "samples.count", 0)? as usize;
    s.per_iteration = int(
        members.per_iteration.map(|c| small.value(c)),
        "samples.events_per_iteration",
        0,
    )? as usize;
    let sigs = members
        .signatures
        .map(|id| small.value(id))
        .filter(Value::is_array)
        .ok_or_else(|| bad("samples.signatures must be a list"))?;
    for (i, sig) in sigs.elements().enumerate() {
        let path = format!("samples.signatures[{i}]");
        s.phases
            .push(text(sig.get("phase"), &path)?.as_bytes().to_vec());
        s.ops.push(text(sig.get("op"), &path)?.as_bytes().to_vec());
        s.signatures.push(canon::to_vec(sig));
    }
    let res = members
        .resources
        .map(|id| small.value(id))
        .filter(Value::is_array)
        .ok_or_else(|| bad("samples.scheduler_resources must be a list"))?;
    s.resources_json = canon::to_vec(res);
    for r in res.elements() {
        s.resources
            .push(text(Some(r), "samples.scheduler_resources")?.to_owned());
    }
    if s.resources.len() != s.signatures.len() {
        return Err(bad(
            "samples.scheduler_resources must have one entry per signature",
        ));
    }
    Ok(s)
}

/// What a report's summary sections declare, for checking against its
/// samples.
struct Declared {
    /// The `metrics` section.
    metrics: Metrics,
    /// `by_phase` and `by_op`, rows in report order.
    breakdowns: Vec<(&'static str, Vec<NamedSummary>)>,
    /// The `calibration` section, when present.
    calibration: Option<Calibration>,
}

/// The structural checks; returns the settings the report declares.
///
/// Stages, in order (the first problem found is the error): the report's
/// identity, its settings, its metrics, breakdowns and calibration, and
/// when samples are embedded, everything recomputed from them.
fn validate(r: &Report) -> Result<Settings> {
    let source_events = check_identity(r)?;
    let settings = declared_settings(r)?;
    let metrics = declared_metrics(r, &settings, source_events)?;
    let breakdowns = declared_breakdowns(r, &metrics.exposed)?;
    let calibration = declared_calibration(r, metrics.exposed.count)?;
    if let Some(s) = &r.samples {
        let declared = Declared {
            metrics,
            breakdowns,
            calibration,
        };
        let measured = super::measured::is_measured(r);
        check_against_samples(s, &settings, &declared, measured)?;
    }
    Ok(settings)
}

/// Validation stage 1: the format, the required sections and the canary
/// reference. Returns `canary.source_events`.
fn check_identity(r: &Report) -> Result<u64> {
    match r.section("format").and_then(|f| f.as_str()) {
        Some(REPORT_FORMAT) => {}
        Some(other) => {
            return Err(bad(format_args!(
                "format must be '{REPORT_FORMAT}', got '{other}'"
            )));
        }
        None => return Err(bad(format_args!("format must be '{REPORT_FORMAT}'"))),
    }
    for required in [
        "backend",
        "by_op",
        "by_phase",
        "canary",
        "canary_summary",
        "metrics",
        "replay_protocol",
        "simulation_model",
        "workload",
    ] {
        if r.section(required).is_none() {
            return Err(bad(format_args!("section '{required}' is missing")));
        }
    }
    let canary = object(r.section("canary"), "canary")?;
    let sha = text(canary.get("sha256"), "canary.sha256")?;
    if !is_sha(sha) {
        return Err(bad("canary.sha256 must be 64 lowercase hex digits"));
    }
    let source_events = int(canary.get("source_events"), "canary.source_events", 0)? as u64;
    object(r.section("canary_summary"), "canary_summary")?;
    object(r.section("workload"), "workload")?;
    Ok(source_events)
}

/// Validation stage 2: the settings that `simulation_model`,
/// `replay_protocol` and `backend` declare, including the protocol hash.
fn declared_settings(r: &Report) -> Result<Settings> {
    if super::measured::is_measured(r) {
        return super::measured::declared_settings(r);
    }
    let model = object(r.section("simulation_model"), "simulation_model")?;
    let protocol = object(r.section("replay_protocol"), "replay_protocol")?;
    check_model(model, protocol)?;
    let ablations = declared_ablations(protocol)?;
    let seed = protocol
        .get("seed")
        .and_then(|v| v.as_i64())
        .ok_or_else(|| bad("replay_protocol.seed must be an integer"))?;
    let iterations = int(protocol.get("iterations"), "replay_protocol.iterations", 1)?;
    let max_replay_events = int(
        protocol.get("max_replay_events"),
        "replay_protocol.max_replay_events",
        1,
    )?;
    let backend = object(r.section("backend"), "backend")?;
    let mut settings = Settings {
        iterations: u32::try_from(iterations)
            .map_err(|_| bad("replay_protocol.iterations is too large"))?,
        seed,
        max_replay_events: max_replay_events as u64,
        ablations,
        ..Settings::default()
    };
    crate::sim::settings::codec::read_report_backend(backend, &mut settings).map_err(bad)?;
    settings
        .validate()
        .map_err(|e| bad(format_args!("backend: {e}")))?;
    if text(backend.get("bandwidth_unit"), "backend.bandwidth_unit")? != "Gbit/s"
        || text(backend.get("mode"), "backend.mode")? != "deterministic-simulation"
    {
        return Err(bad("backend bandwidth_unit/mode are not the model's"));
    }
    if text(protocol.get("sha256"), "replay_protocol.sha256")? != protocol_sha256(&settings)
        && crate::fault::CHECK_DIGESTS
    {
        return Err(bad("replay_protocol.sha256 does not match the protocol"));
    }
    Ok(settings)
}

/// Settings stage 1: the model named twice the same way, and the protocol's
/// quantile method and bandwidth unit.
fn check_model(model: Value<'_>, protocol: Value<'_>) -> Result<()> {
    let model_name = text(model.get("name"), "simulation_model.name")?;
    let model_version = text(model.get("version"), "simulation_model.version")?;
    if text(protocol.get("model_name"), "replay_protocol.model_name")? != model_name
        || text(
            protocol.get("model_version"),
            "replay_protocol.model_version",
        )? != model_version
    {
        return Err(bad(
            "simulation_model does not match replay_protocol model_name/model_version",
        ));
    }
    if text(
        protocol.get("quantile_method"),
        "replay_protocol.quantile_method",
    )? != QUANTILE_METHOD
    {
        return Err(bad(format_args!(
            "replay_protocol.quantile_method must be '{QUANTILE_METHOD}'"
        )));
    }
    if text(
        protocol.get("bandwidth_unit"),
        "replay_protocol.bandwidth_unit",
    )? != "Gbit/s"
    {
        return Err(bad("replay_protocol.bandwidth_unit must be 'Gbit/s'"));
    }
    Ok(())
}

/// Settings stage 2: the protocol's ablations, known, sorted and unique.
fn declared_ablations(protocol: Value<'_>) -> Result<Ablations> {
    let ablation_list = protocol
        .get("ablations")
        .filter(Value::is_array)
        .ok_or_else(|| bad("replay_protocol.ablations must be a list"))?;
    let names: Vec<&str> = ablation_list
        .elements()
        .map(|v| {
            v.as_str()
                .ok_or_else(|| bad("replay_protocol.ablations must list names"))
        })
        .collect::<Result<_>>()?;
    let ablations = Ablations::parse(names.iter().copied())
        .map_err(|e| bad(format_args!("replay_protocol: {e}")))?;
    if ablations.names() != names {
        return Err(bad("replay_protocol.ablations must be sorted and unique"));
    }
    Ok(ablations)
}

/// Validation stage 3: the `metrics` section, internally consistent and
/// counting `source_events` × iterations events.
fn declared_metrics(r: &Report, settings: &Settings, source_events: u64) -> Result<Metrics> {
    let m = object(r.section("metrics"), "metrics")?;
    let exposed = summary(m, "metrics")?;
    let mf = |k: &str| num(m.get(k), &format!("metrics.{k}"));
    let declared = Metrics {
        exposed,
        arrival_skew_median_us: mf("arrival_skew_median_us")?,
        arrival_skew_p95_us: mf("arrival_skew_p95_us")?,
        arrival_skew_max_us: mf("arrival_skew_max_us")?,
        avg_rank_wait_median_us: mf("avg_rank_wait_median_us")?,
        communication_hidden_pct: mf("communication_hidden_pct")?,
    };
    let (skew_median, skew_p95, skew_max) = (
        declared.arrival_skew_median_us,
        declared.arrival_skew_p95_us,
        declared.arrival_skew_max_us,
    );
    if !(0.0..=100.0).contains(&declared.communication_hidden_pct) {
        return Err(bad(
            "metrics.communication_hidden_pct must be between 0 and 100",
        ));
    }
    if !(0.0 <= skew_median && skew_median <= skew_p95 && skew_p95 <= skew_max)
        || declared.avg_rank_wait_median_us < 0.0
    {
        return Err(bad(
            "metrics arrival skew statistics must satisfy 0 <= median <= p95 <= max",
        ));
    }
    let expected_count = source_events.saturating_mul(settings.iterations.into());
    if declared.exposed.count != expected_count {
        return Err(bad(format_args!(
            "metrics.count={} must equal canary.source_events x iterations ({expected_count})",
            declared.exposed.count
        )));
    }
    Ok(declared)
}

/// Validation stage 4: `by_phase` then `by_op`, each adding up to `metrics`.
fn declared_breakdowns(
    r: &Report,
    metrics: &Summary,
) -> Result<Vec<(&'static str, Vec<NamedSummary>)>> {
    ["by_phase", "by_op"]
        .into_iter()
        .map(|section| Ok((section, declared_breakdown(r, section, metrics)?)))
        .collect()
}

/// One breakdown section: named, valid, unique rows whose counts, means and
/// maxima add up to `metrics`.
fn declared_breakdown(r: &Report, section: &str, metrics: &Summary) -> Result<Vec<NamedSummary>> {
    let rows = r
        .section(section)
        .filter(Value::is_array)
        .ok_or_else(|| bad(format_args!("section '{section}' must be a list")))?;
    let mut parsed: Vec<NamedSummary> = Vec::new();
    for (i, row) in rows.elements().enumerate() {
        let name = row
            .get("name")
            .and_then(|v| v.as_wtf8())
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                bad(format_args!(
                    "{section} row {i} name must be a non-empty string"
                ))
            })?;
        let label = format!("{section} row '{}'", String::from_utf8_lossy(name));
        let s = summary(row, &label)?;
        if s.count == 0 {
            return Err(bad(format_args!("{label} count must be positive")));
        }
        if parsed.iter().any(|(n, _)| n == name) {
            return Err(bad(format_args!("{label} appears twice")));
        }
        parsed.push((name.to_vec(), s));
    }
    let total: u64 = parsed.iter().map(|(_, s)| s.count).sum();
    if total != metrics.count {
        return Err(bad(format_args!(
            "{section} counts do not add up to metrics.count"
        )));
    }
    if !parsed.is_empty() {
        let weighted = parsed
            .iter()
            .map(|(_, s)| s.mean_us * s.count as f64)
            .sum::<f64>()
            / total as f64;
        if (weighted - metrics.mean_us).abs() > 0.0021 {
            return Err(bad(format_args!(
                "{section} row means do not add up to metrics.mean_us"
            )));
        }
        let max = parsed.iter().map(|(_, s)| s.max_us).fold(0.0f64, f64::max);
        if (max - metrics.max_us).abs() > 0.0011 {
            return Err(bad(format_args!(
                "{section} row maxima do not match metrics.max_us"
            )));
        }
    }
    Ok(parsed)
}

/// Validation stage 5: the optional `calibration` section, ordered and
/// counting `count` samples.
fn declared_calibration(r: &Report, count: u64) -> Result<Option<Calibration>> {
    let Some(c) = r.section("calibration") else {
        return Ok(None);
    };
    let c = object(Some(c), "calibration")?;
    if c.get("signal").and_then(|v| v.as_str()) != Some("observed_exposed_us") {
        return Err(bad("calibration.signal must be 'observed_exposed_us'"));
    }
    let cf = |k: &str| num(c.get(k), &format!("calibration.{k}"));
    let cal = Calibration {
        count: int(c.get("count"), "calibration.count", 1)? as u64,
        mean_absolute_error_us: cf("mean_absolute_error_us")?,
        median_absolute_error_us: cf("median_absolute_error_us")?,
        p95_absolute_error_us: cf("p95_absolute_error_us")?,
        max_absolute_error_us: cf("max_absolute_error_us")?,
        mean_bias_us: cf("mean_bias_us")?,
        mean_absolute_percentage_error_pct: cf("mean_absolute_percentage_error_pct")?,
        percentage_count: int(c.get("percentage_count"), "calibration.percentage_count", 0)? as u64,
    };
    if cal.percentage_count > cal.count || cal.count != count {
        return Err(bad("calibration counts do not match metrics.count"));
    }
    if !(0.0 <= cal.median_absolute_error_us
        && cal.median_absolute_error_us <= cal.p95_absolute_error_us
        && cal.p95_absolute_error_us <= cal.max_absolute_error_us)
        || cal.mean_absolute_error_us < 0.0
    {
        return Err(bad(
            "calibration errors must satisfy 0 <= median <= p95 <= max",
        ));
    }
    Ok(Some(cal))
}

/// Whether `a` and `b` are within `tol`.
fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

/// Validation stage 6: reconciles each sample, then recomputes every
/// metric, breakdown row and calibration figure from the samples.
fn check_against_samples(
    s: &Samples,
    settings: &Settings,
    declared: &Declared,
    measured: bool,
) -> Result<()> {
    reconcile_samples(s, settings, declared.metrics.exposed.count, measured)?;
    let col = |n: &str| s.column(n).expect("checked by reconcile_samples");
    let exposed = col("exposed_us");
    let recomputed = metrics(
        exposed,
        col("arrival_skew_us"),
        col("avg_rank_wait_us"),
        col("hidden_us"),
        col("total_us"),
    );
    check_metrics_match(&declared.metrics, &recomputed)?;
    check_breakdowns_match(s, exposed, &declared.breakdowns)?;
    check_calibration_match(s, exposed, declared.calibration.as_ref())
}

/// Samples check: the declared metrics equal the recomputed ones.
fn check_metrics_match(declared: &Metrics, recomputed: &Metrics) -> Result<()> {
    let (d, e) = (&declared.exposed, &recomputed.exposed);
    for (field, got, want) in [
        ("median_us", d.median_us, e.median_us),
        ("p95_us", d.p95_us, e.p95_us),
        ("p99_us", d.p99_us, e.p99_us),
        ("max_us", d.max_us, e.max_us),
        ("mean_us", d.mean_us, e.mean_us),
        (
            "arrival_skew_median_us",
            declared.arrival_skew_median_us,
            recomputed.arrival_skew_median_us,
        ),
        (
            "arrival_skew_p95_us",
            declared.arrival_skew_p95_us,
            recomputed.arrival_skew_p95_us,
        ),
        (
            "arrival_skew_max_us",
            declared.arrival_skew_max_us,
            recomputed.arrival_skew_max_us,
        ),
        (
            "avg_rank_wait_median_us",
            declared.avg_rank_wait_median_us,
            recomputed.avg_rank_wait_median_us,
        ),
    ] {
        if !close(got, want, 0.0021) {
            return Err(bad(format_args!(
                "metrics.{field} does not match included samples"
            )));
        }
    }
    if !close(
        declared.communication_hidden_pct,
        recomputed.communication_hidden_pct,
        0.02,
    ) {
        return Err(bad(
            "metrics.communication_hidden_pct does not match included samples",
        ));
    }
    Ok(())
}

/// Samples check: each breakdown's rows recompute from the samples.
fn check_breakdowns_match(
    s: &Samples,
    exposed: &[f64],
    breakdowns: &[(&'static str, Vec<NamedSummary>)],
) -> Result<()> {
    for (section, rows) in breakdowns {
        let names = if *section == "by_phase" {
            &s.phases
        } else {
            &s.ops
        };
        let fresh = breakdown(exposed, |i| names[s.signature[i] as usize].as_slice());
        if fresh.len() != rows.len()
            || fresh
                .iter()
                .zip(rows.iter())
                .any(|(f, (n, _))| &f.name != n)
        {
            return Err(bad(format_args!(
                "{section} row names do not match samples"
            )));
        }
        for (f, (name, declared)) in fresh.iter().zip(rows.iter()) {
            let label = String::from_utf8_lossy(name);
            if f.summary.count != declared.count {
                return Err(bad(format_args!(
                    "{section} row '{label}' count does not match samples"
                )));
            }
            for (field, got, want) in [
                ("median_us", declared.median_us, f.summary.median_us),
                ("p95_us", declared.p95_us, f.summary.p95_us),
                ("p99_us", declared.p99_us, f.summary.p99_us),
                ("max_us", declared.max_us, f.summary.max_us),
                ("mean_us", declared.mean_us, f.summary.mean_us),
            ] {
                if !close(got, want, 0.0021) {
                    return Err(bad(format_args!(
                        "{section} row '{label}' {field} does not match samples"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Samples check: a declared calibration recomputes from the observed
/// column, and exactly one of them being present is an error.
fn check_calibration_match(
    s: &Samples,
    exposed: &[f64],
    declared: Option<&Calibration>,
) -> Result<()> {
    match (declared, s.column("observed_exposed_us")) {
        (None, None) => Ok(()),
        (Some(declared), Some(observed)) => {
            let fresh = calibration(exposed, observed);
            for (field, got, want) in [
                (
                    "mean_absolute_error_us",
                    declared.mean_absolute_error_us,
                    fresh.mean_absolute_error_us,
                ),
                (
                    "median_absolute_error_us",
                    declared.median_absolute_error_us,
                    fresh.median_absolute_error_us,
                ),
                (
                    "p95_absolute_error_us",
                    declared.p95_absolute_error_us,
                    fresh.p95_absolute_error_us,
                ),
                (
                    "max_absolute_error_us",
                    declared.max_absolute_error_us,
                    fresh.max_absolute_error_us,
                ),
                ("mean_bias_us", declared.mean_bias_us, fresh.mean_bias_us),
            ] {
                if !close(got, want, 0.01) {
                    return Err(bad(format_args!(
                        "calibration.{field} does not match samples"
                    )));
                }
            }
            if declared.count != fresh.count || declared.percentage_count != fresh.percentage_count
            {
                return Err(bad("calibration counts do not match samples"));
            }
            Ok(())
        }
        _ => Err(bad(
            "calibration and observed samples must be present together",
        )),
    }
}

/// Per-sample consistency with the scheduling equations (tolerance 0.0051
/// on rounded values): first the columns' shapes, then each sample. In a
/// `measured` run, and under `serialize_ranks`, a collective may start after
/// its last member was ready and its communicator free (a member was busy
/// elsewhere); recomputation checks the exact start of a simulated one.
fn reconcile_samples(s: &Samples, settings: &Settings, count: u64, measured: bool) -> Result<()> {
    check_sample_shapes(s, count)?;
    let relaxed = measured || settings.serialize_ranks;
    check_sample_equations(s, settings.overlap_efficiency, relaxed)
}

/// Reconciliation stage 1: `count` samples, every required column (and no
/// unknown one) with one value per sample, valid signature indices, and
/// whole iterations.
fn check_sample_shapes(s: &Samples, count: u64) -> Result<()> {
    let required = super::SAMPLE_FLOAT_COLUMNS;
    let n = s.count;
    if n as u64 != count {
        return Err(bad(format_args!(
            "samples.count={n} must equal metrics.count ({count})"
        )));
    }
    for name in required {
        match s.column(name) {
            Some(v) if v.len() == n => {}
            Some(_) => return Err(bad(format_args!("samples.{name} must have {n} values"))),
            None => return Err(bad(format_args!("samples.{name} is missing"))),
        }
    }
    for (name, values) in &s.columns {
        if !required.contains(&name.as_str()) && name != "observed_exposed_us" {
            return Err(bad(format_args!("samples has unknown column '{name}'")));
        }
        if values.len() != n {
            return Err(bad(format_args!("samples.{name} must have {n} values")));
        }
    }
    if s.signature.len() != n
        || s.signature
            .iter()
            .any(|&g| g as usize >= s.signatures.len())
    {
        return Err(bad(
            "samples.signature must give a valid signature for every sample",
        ));
    }
    if s.uncertain.as_ref().is_some_and(|u| u.len() != n) {
        return Err(bad(format_args!(
            "samples.compute_fields_uncertain must have {n} values"
        )));
    }
    if s.per_iteration == 0 && n > 0 || s.per_iteration > 0 && n % s.per_iteration != 0 {
        return Err(bad(
            "samples.events_per_iteration does not divide samples.count",
        ));
    }
    Ok(())
}

/// Reconciliation stage 2: each sample against the scheduling equations,
/// with the previous completion tracked per (iteration, resource) and hidden
/// time bounded by `eta` (the backend's overlap efficiency). `relaxed`
/// lets the start be at or after max(last arrival, previous completion).
fn check_sample_equations(s: &Samples, eta: f64, relaxed: bool) -> Result<()> {
    const TOL: f64 = 0.0051;
    let n = s.count;
    let c = |name: &str| s.column(name).expect("checked above");
    let (skew, wait, start, collective) = (
        c("arrival_skew_us"),
        c("avg_rank_wait_us"),
        c("collective_start_us"),
        c("collective_us"),
    );
    let (overlap, exposed, first, hidden, queue, total) = (
        c("compute_overlap_us"),
        c("exposed_us"),
        c("first_arrival_us"),
        c("hidden_us"),
        c("queue_wait_us"),
        c("total_us"),
    );
    // Previous completion per (iteration, resource).
    let mut first_of: rustc_hash::FxHashMap<&str, usize> = rustc_hash::FxHashMap::default();
    let resource_ids: Vec<usize> = s
        .resources
        .iter()
        .enumerate()
        .map(|(i, r)| *first_of.entry(r.as_str()).or_insert(i))
        .collect();
    let mut previous = vec![f64::NEG_INFINITY; s.resources.len()];
    for i in 0..n {
        if s.per_iteration > 0 && i % s.per_iteration == 0 {
            previous.iter_mut().for_each(|p| *p = f64::NEG_INFINITY);
        }
        let fail = |what: &str| Err(bad(format_args!("sample {i} {what}")));
        let values = [
            skew[i],
            wait[i],
            start[i],
            collective[i],
            overlap[i],
            exposed[i],
            first[i],
            hidden[i],
            queue[i],
            total[i],
        ];
        if values.iter().any(|v| *v < 0.0) {
            return fail("has a negative value");
        }
        if wait[i] > skew[i] + TOL {
            return fail("avg_rank_wait_us exceeds arrival_skew_us");
        }
        let last = first[i] + skew[i];
        let completion = start[i] + collective[i];
        let slot = &mut previous[resource_ids[s.signature[i] as usize]];
        let expected_start = last.max(*slot);
        if relaxed && start[i] < expected_start - TOL {
            return fail(
                "collective_start_us is before max(last arrival, previous completion on its resource)",
            );
        }
        if !relaxed && (start[i] - expected_start).abs() > TOL {
            return fail(
                "collective_start_us is not max(last arrival, previous completion on its resource)",
            );
        }
        *slot = completion;
        if ((start[i] - last) - queue[i]).abs() > TOL {
            return fail(
                "queue_wait_us does not equal collective_start_us - (first_arrival_us + arrival_skew_us)",
            );
        }
        if ((skew[i] + queue[i] + collective[i]) - total[i]).abs() > TOL {
            return fail("total_us does not equal skew + queue wait + collective");
        }
        if hidden[i] > total[i] + TOL || ((hidden[i] + exposed[i]) - total[i]).abs() > 0.0021 {
            return fail("hidden_us and exposed_us do not split total_us");
        }
        if (hidden[i] - total[i].min(overlap[i].max(0.0) * eta)).abs() > TOL {
            return fail(
                "hidden_us does not equal min(total_us, compute_overlap_us x backend.overlap_efficiency)",
            );
        }
    }
    Ok(())
}
