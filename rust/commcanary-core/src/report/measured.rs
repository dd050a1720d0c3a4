//! Reports of measured runs: a canary executed on real process groups
//! (`replay --physical`), in the model report's layout so `compare` gates on
//! them as on simulated ones.
//!
//! What differs is what produced the numbers: `backend.mode` is
//! `physical-measurement` and names the engine (`gloo`, `nccl`), the host,
//! the torch version, the processes and the compute fill; `simulation_model`
//! and `replay_protocol` name `commcanary.physical` and the measurement
//! protocol (iterations, warm-up iterations, fill mode), whose `sha256`
//! covers the protocol's other members. A measured report cannot be
//! recomputed; its reader checks the structure, that the metrics and
//! breakdowns recompute from the samples, and that every sample satisfies
//! the scheduler's equations (which [`crate::sim::measured`] builds them to
//! satisfy, nothing hidden).

use sha2::{Digest, Sha256};

use super::read::Report;
use super::run::ReplayRun;
use super::{Header, QUANTILE_METHOD, sections_with};
use crate::canary::read::read_canary;
use crate::error::{Error, ErrorKind, Result};
use crate::json::Value;
use crate::json::canon::ObjectWriter;
use crate::sim::measured::{MeasuredTimes, measured_replay};
use crate::sim::{Settings, signature_json};
use crate::trace::hex;

/// `backend.mode` of a measured report.
pub const MEASURED_MODE: &str = "physical-measurement";
/// `simulation_model.name` of a measured report.
pub const MEASURED_MODEL: &str = "commcanary.physical";
/// `simulation_model.version`: the measurement method.
pub const MEASURED_VERSION: &str = "measured-v1";

/// How a run was measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// `gloo` or `nccl`.
    pub engine: String,
    /// The host (or `N hosts` under a launcher).
    pub host: String,
    /// The torch version that ran it.
    pub torch_version: String,
    /// Processes.
    pub nproc: u32,
    /// Measured iterations.
    pub iterations: u32,
    /// Warm-up iterations run first and excluded.
    pub warmup: u32,
    /// `sleep` or `spin`.
    pub compute_fill: String,
    /// Multiplier on every gap.
    pub compute_fill_scale: f64,
    /// Multiplier on every message's bytes.
    pub bytes_scale: f64,
    /// The cores this run's processes could use on its one host (0:
    /// unknown, or several hosts); `calibrate` models the sharing.
    pub host_cpus: u32,
    /// The share of a core each rank kept busy inside its collectives
    /// (process CPU time over wall time, summed over ranks and calls; 0:
    /// not measured).
    pub rank_cpu_share: f64,
}

fn protocol_members(m: &Measurement, o: &mut ObjectWriter<'_>) {
    o.str("compute_fill", &m.compute_fill);
    o.i64("iterations", i64::from(m.iterations));
    o.str("model_name", MEASURED_MODEL);
    o.str("model_version", MEASURED_VERSION);
    o.str("quantile_method", QUANTILE_METHOD);
}

fn protocol_sha(m: &Measurement, warmup: i64) -> String {
    let mut out = Vec::new();
    let mut o = ObjectWriter::new(&mut out);
    protocol_members(m, &mut o);
    o.i64("warmup_iterations", warmup);
    o.end();
    hex(&Sha256::digest(&out))
}

/// The three header sections of a measured report.
#[must_use]
pub fn header(m: &Measurement) -> Header {
    let mut backend = Vec::new();
    let mut o = ObjectWriter::new(&mut backend);
    o.f64("bytes_scale", m.bytes_scale);
    o.f64("compute_fill_scale", m.compute_fill_scale);
    o.str("engine", &m.engine);
    o.str("host", &m.host);
    if m.host_cpus > 0 {
        o.i64("host_cpus", i64::from(m.host_cpus));
    }
    o.str("label", &format!("{} on {}", m.engine, m.host));
    o.str("mode", MEASURED_MODE);
    o.i64("nproc", i64::from(m.nproc));
    if m.rank_cpu_share > 0.0 {
        o.f64("rank_cpu_share", m.rank_cpu_share);
    }
    o.str("torch_version", &m.torch_version);
    o.end();
    let mut protocol = Vec::new();
    let mut o = ObjectWriter::new(&mut protocol);
    protocol_members(m, &mut o);
    o.str("sha256", &protocol_sha(m, i64::from(m.warmup)));
    o.i64("warmup_iterations", i64::from(m.warmup));
    o.end();
    let mut model = Vec::new();
    let mut o = ObjectWriter::new(&mut model);
    o.str("engine", &m.engine);
    o.str("host", &m.host);
    o.str("name", MEASURED_MODEL);
    o.str("version", MEASURED_VERSION);
    o.end();
    Header {
        backend,
        protocol,
        model,
    }
}

/// The report of a measured run of the canary `bytes`.
///
/// # Errors
/// An invalid canary, or times that do not fit its program.
pub fn measured_run(
    bytes: &[u8],
    m: &Measurement,
    times: MeasuredTimes<'_>,
    include_samples: bool,
) -> Result<ReplayRun> {
    if m.iterations == 0 {
        return Err(Error::option("iterations", "must be at least 1"));
    }
    let canary = read_canary(bytes)?;
    let r = measured_replay(&canary.program, m.iterations, times)?;
    Ok(ReplayRun {
        sections: sections_with(&canary, &r, header(m), include_samples),
        per_iteration: r.per_iteration,
        signatures: r.signatures.iter().map(signature_json).collect(),
        resources: r.resources.clone(),
        exposed_us: super::exposed_unless_kept(&r, include_samples),
        replay: include_samples.then_some(r),
    })
}

/// Whether a report is a measured run's.
#[must_use]
pub fn is_measured(r: &Report) -> bool {
    r.section("backend")
        .and_then(|b| b.get("mode"))
        .and_then(|m| m.as_str())
        == Some(MEASURED_MODE)
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Invalid, format!("report {what}"))
}

fn text<'a>(v: Option<Value<'a>>, path: &str) -> Result<&'a str> {
    v.and_then(|v| v.as_str())
        .ok_or_else(|| bad(format_args!("{path} must be a string")))
}

/// The reader's settings for a measured report (iterations; nothing
/// hidden), after checking its header sections agree with each other.
///
/// # Errors
/// A model or protocol that is not the measurement's, a protocol hash that
/// does not match.
pub fn declared_settings(r: &Report) -> Result<Settings> {
    let section = |name: &str| {
        r.section(name)
            .filter(Value::is_object)
            .ok_or_else(|| bad(format_args!("section '{name}' must be an object")))
    };
    let (model, protocol, backend) = (
        section("simulation_model")?,
        section("replay_protocol")?,
        section("backend")?,
    );
    for (v, path) in [
        (model.get("name"), "simulation_model.name"),
        (protocol.get("model_name"), "replay_protocol.model_name"),
    ] {
        if text(v, path)? != MEASURED_MODEL {
            return Err(bad(format_args!(
                "{path} must be '{MEASURED_MODEL}' for a measured run"
            )));
        }
    }
    if text(model.get("version"), "simulation_model.version")?
        != text(
            protocol.get("model_version"),
            "replay_protocol.model_version",
        )?
        || text(
            protocol.get("quantile_method"),
            "replay_protocol.quantile_method",
        )? != QUANTILE_METHOD
    {
        return Err(bad("simulation_model does not match replay_protocol"));
    }
    let int = |k: &str| {
        protocol
            .get(k)
            .and_then(|v| v.as_i64())
            .filter(|&x| x >= 0)
            .ok_or_else(|| {
                bad(format_args!(
                    "replay_protocol.{k} must be a non-negative integer"
                ))
            })
    };
    let (iterations, warmup) = (int("iterations")?, int("warmup_iterations")?);
    let m = Measurement {
        engine: text(backend.get("engine"), "backend.engine")?.to_owned(),
        host: String::new(),
        torch_version: String::new(),
        nproc: 0,
        iterations: u32::try_from(iterations)
            .map_err(|_| bad("replay_protocol.iterations is too large"))?,
        warmup: 0,
        compute_fill: text(protocol.get("compute_fill"), "replay_protocol.compute_fill")?
            .to_owned(),
        compute_fill_scale: 1.0,
        bytes_scale: 1.0,
        host_cpus: 0,
        rank_cpu_share: 0.0,
    };
    if m.iterations == 0 {
        return Err(bad("replay_protocol.iterations must be at least 1"));
    }
    if text(protocol.get("sha256"), "replay_protocol.sha256")? != protocol_sha(&m, warmup) {
        return Err(bad("replay_protocol.sha256 does not match the protocol"));
    }
    Ok(Settings {
        label: text(backend.get("label"), "backend.label")?.to_owned(),
        iterations: m.iterations,
        overlap_efficiency: 0.0,
        ..Settings::default()
    })
}

/// What can be checked of a measured report against its canary (it cannot
/// be recomputed): the canary it names, its workload and canary summary,
/// and, when it embeds samples, that they reconciled (the reader checked
/// every sample against the scheduler's equations and every metric and
/// breakdown against the samples).
#[must_use]
pub fn verify(report: &Report, canary: &crate::canary::read::Canary) -> Vec<super::Check> {
    let same = |name: &'static str, fresh: Vec<u8>| {
        let actual = report.section_json(name);
        let pass = actual.as_deref() == Some(fresh.as_slice());
        super::Check {
            name,
            pass,
            expected: (!pass).then_some(fresh),
            actual: if pass { None } else { actual },
        }
    };
    vec![
        same("canary", super::canary_ref_json(canary)),
        same("workload", canary.member_json("workload")),
        same("canary_summary", canary.member_json("compiler")),
        super::Check {
            name: "samples",
            pass: report.has_samples,
            expected: None,
            actual: None,
        },
    ]
}
