//! One replay of a canary given as bytes, as the `replay` command runs it.
//!
//! The canary is read with its program commitments deferred
//! ([`read_canary_deferred`]); they are rechecked on another core while the
//! replay already runs (a `rayon::join`), and a mismatch still fails the run.
//! The result holds the report's sections and, when asked, the replay itself
//! for sample columns.

use super::{Section, sections};
use crate::canary::read::{Canary, read_canary_deferred, verify_program_digests};
use crate::error::Result;
use crate::sim::{Replay, Settings, replay, signature_json};

/// A finished replay and its report sections.
#[derive(Debug, Clone)]
pub struct ReplayRun {
    /// The report's sections, in key order.
    pub sections: Vec<Section>,
    /// The replay, kept when samples were asked for.
    pub replay: Option<Replay>,
    /// Occurrences per iteration.
    pub per_iteration: usize,
    /// Canonical JSON of each signature samples refer to.
    pub signatures: Vec<Vec<u8>>,
    /// Scheduler resource of each signature.
    pub resources: Vec<String>,
    /// The exposed latency of every occurrence, as stored (see
    /// [`super::exposed_column`]), for a run whose replay is not kept (its
    /// report carries no samples); empty when `replay` is kept.
    pub exposed_us: Vec<f64>,
}

/// Replays the canary `bytes` under `settings`.
///
/// # Errors
/// An invalid canary (including a commitment mismatch), invalid settings, or
/// a replay the model refuses.
pub fn replay_canary_bytes(
    bytes: &[u8],
    settings: &Settings,
    include_samples: bool,
) -> Result<ReplayRun> {
    let canary = read_canary_deferred(bytes)?;
    let (digests, run) = rayon::join(
        || verify_program_digests(&canary),
        || replay_canary(&canary, settings, include_samples),
    );
    digests?;
    run
}

/// Replays an already validated canary.
///
/// # Errors
/// Invalid settings, or a replay the model refuses.
pub fn replay_canary(
    canary: &Canary,
    settings: &Settings,
    include_samples: bool,
) -> Result<ReplayRun> {
    let named;
    let settings = if settings.label_from_canary {
        let backend = (canary.member("system"))
            .and_then(|system| system.get("kineto_backend"))
            .and_then(|b| b.as_str());
        named = Settings {
            label: settings.label_for(backend),
            label_from_canary: false,
            ..settings.clone()
        };
        &named
    } else {
        settings
    };
    let r = replay(&canary.program, settings)?;
    Ok(ReplayRun {
        sections: sections(canary, &r, settings, include_samples),
        per_iteration: r.per_iteration,
        signatures: r.signatures.iter().map(signature_json).collect(),
        resources: r.resources.clone(),
        exposed_us: super::exposed_unless_kept(&r, include_samples),
        replay: include_samples.then_some(r),
    })
}
