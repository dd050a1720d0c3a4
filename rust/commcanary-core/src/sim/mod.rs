//! The replay model `deterministic-scheduler-v4`.
//!
//! A canary expands into ordered occurrences ([`crate::canary::expand`]). Each
//! occurrence gets a collective latency from a closed-form cost model plus
//! deterministic noise, and is scheduled on its communicator's FIFO resource:
//!
//! ```text
//! clock += gap;  first = clock;  last = first + skew
//! start = max(last, available[resource]);  queue = start − last
//! completion = start + collective;  total = completion − first
//! hidden = min(total, max(0, overlap) · η);  exposed = total − hidden
//! ```
//!
//! with `collective = max(0.5, F + 1.15·log2(max(2,n)) + 4 +
//! (8·bytes/(1000·B))·op_factor·(1 + 0.22·(g−1))·(1 + 0.18·p) + noise)`.
//! Noise draws three uniforms from SplitMix64 seeded by the replay seed, the
//! iteration and the SHA-256 of the occurrence's identity, so results do not
//! depend on how the compiler grouped events. Everything is deterministic:
//! the same canary and settings give bit-identical results.

pub mod metrics;

use sha2::{Digest, Sha256};

use crate::canary::Program;
use crate::canary::expand::{LogicalEvent, for_each_logical_event, for_each_occurrence_of};
use crate::canary::write::write_signature;
use crate::error::{Error, Result};
use crate::json::canon;
use crate::pyfloat::{py_sum, round};
use crate::trace::Signature;

/// Model identity.
pub const MODEL_NAME: &str = "commcanary.replay";
/// Model version.
pub const MODEL_VERSION: &str = "deterministic-scheduler-v4";
/// Hard ceiling on occurrences × iterations.
pub const MAX_REPLAY_EVENTS_LIMIT: u64 = 10_000_000;

/// The ablations of the model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ablations {
    /// Arrival offsets forced to zero.
    pub arrival_skew: bool,
    /// Overlap forced to zero.
    pub compute_overlap: bool,
    /// Logical events sorted by operation identity.
    pub operation_ordering: bool,
    /// No exponential tail windows.
    pub rare_tail_windows: bool,
    /// Every gap zero.
    pub queue_reset_gaps: bool,
    /// Record pressure replaced by 0.55.
    pub pressure: bool,
    /// Observed latencies dropped.
    pub observed_exposed_us: bool,
}

/// Ablation names, sorted.
pub const ABLATION_NAMES: [&str; 7] = [
    "arrival_skew",
    "compute_overlap",
    "observed_exposed_us",
    "operation_ordering",
    "pressure",
    "queue_reset_gaps",
    "rare_tail_windows",
];

impl Ablations {
    /// Parses a list of names (any order, duplicates allowed).
    ///
    /// # Errors
    /// An unknown name: `unsupported replay ablation 'x'`.
    pub fn parse<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Self> {
        let mut a = Self::default();
        for name in names {
            match name {
                "arrival_skew" => a.arrival_skew = true,
                "compute_overlap" => a.compute_overlap = true,
                "operation_ordering" => a.operation_ordering = true,
                "rare_tail_windows" => a.rare_tail_windows = true,
                "queue_reset_gaps" => a.queue_reset_gaps = true,
                "pressure" => a.pressure = true,
                "observed_exposed_us" => a.observed_exposed_us = true,
                other => {
                    return Err(Error::invalid(format!(
                        "unsupported replay ablation '{other}'"
                    )));
                }
            }
        }
        Ok(a)
    }

    /// Active names, sorted.
    #[must_use]
    pub fn names(&self) -> Vec<&'static str> {
        let flags = [
            self.arrival_skew,
            self.compute_overlap,
            self.observed_exposed_us,
            self.operation_ordering,
            self.pressure,
            self.queue_reset_gaps,
            self.rare_tail_windows,
        ];
        ABLATION_NAMES
            .iter()
            .zip(flags)
            .filter_map(|(n, on)| on.then_some(*n))
            .collect()
    }
}

/// Replay settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Backend label (descriptive).
    pub label: String,
    /// B, Gbit/s (> 0).
    pub bandwidth_gbps: f64,
    /// F, µs (≥ 0).
    pub latency_floor_us: f64,
    /// C (≥ 0).
    pub compute_pressure: f64,
    /// η in [0, 1].
    pub overlap_efficiency: f64,
    /// Iterations (≥ 1).
    pub iterations: u32,
    /// Seed (any 64-bit integer).
    pub seed: i64,
    /// Ceiling on occurrences × iterations.
    pub max_replay_events: u64,
    /// Ablations.
    pub ablations: Ablations,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            label: "simulated-nccl".to_owned(),
            bandwidth_gbps: 55.0,
            latency_floor_us: 7.5,
            compute_pressure: 0.55,
            overlap_efficiency: 0.72,
            iterations: 1,
            seed: 7,
            max_replay_events: 1_000_000,
            ablations: Ablations::default(),
        }
    }
}

impl Settings {
    /// Checks the parameter ranges.
    ///
    /// # Errors
    /// The first parameter out of range, named.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::invalid(m.to_owned()));
        if self.label.is_empty() {
            return bad("backend_label must be non-empty");
        }
        if !(self.bandwidth_gbps > 0.0 && self.bandwidth_gbps.is_finite()) {
            return bad("bandwidth_gbps must be positive");
        }
        if !(self.latency_floor_us >= 0.0 && self.latency_floor_us.is_finite()) {
            return bad("latency_floor_us must be non-negative");
        }
        if !(self.compute_pressure >= 0.0 && self.compute_pressure.is_finite()) {
            return bad("compute_pressure must be non-negative");
        }
        if !(0.0..=1.0).contains(&self.overlap_efficiency) {
            return bad("overlap_efficiency must be between 0 and 1");
        }
        if self.iterations < 1 {
            return bad("iterations must be at least 1");
        }
        if self.max_replay_events < 1 || self.max_replay_events > MAX_REPLAY_EVENTS_LIMIT {
            return Err(Error::invalid(format!(
                "max_replay_events must be between 1 and {MAX_REPLAY_EVENTS_LIMIT}"
            )));
        }
        Ok(())
    }
}

/// The scheduler serialization key of a signature.
#[must_use]
pub fn resource(sig: &Signature) -> String {
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    if sig.op == b"point_to_point"
        && let (Some(from), Some(to)) = (sig.sender_rank, sig.receiver_rank)
    {
        return format!(
            "p2p:{}:{from}->{to}:channel={}:tag={}:seq={}",
            s(&sig.group),
            sig.channel
                .as_deref()
                .map_or_else(|| "default".to_owned(), s),
            sig.tag.as_deref().map_or_else(|| "default".to_owned(), s),
            sig.message_sequence
                .map_or_else(|| "unknown".to_owned(), |m| m.to_string()),
        );
    }
    if sig.group != b"default" {
        return s(&sig.group);
    }
    if !sig.ranks.is_empty() {
        let ranks: Vec<String> = sig.ranks.iter().map(i64::to_string).collect();
        return format!("default:ranks={}", ranks.join(","));
    }
    "default".to_owned()
}

fn op_factor(sig: &Signature, n: f64) -> f64 {
    match sig.op.as_slice() {
        b"all_reduce" => 2.0 * (n - 1.0) / n,
        b"reduce_scatter" | b"all_gather" => (n - 1.0) / n,
        b"all_to_all" => 1.6,
        b"broadcast" => 0.8,
        _ => 1.0,
    }
}

fn splitmix64(mut v: u64) -> u64 {
    v = v.wrapping_add(0x9E37_79B9_7F4A_7C15);
    v = (v ^ (v >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    v = (v ^ (v >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    v ^ (v >> 31)
}

/// The three deterministic uniforms of an occurrence.
#[must_use]
pub fn uniforms(seed: i64, iteration: u32, identity_hash: u64) -> [f64; 3] {
    let ctr = (seed as u64)
        ^ u64::from(iteration + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93)
        ^ identity_hash;
    let mut out = [0.0; 3];
    for (lane, u) in out.iter_mut().enumerate() {
        let x = splitmix64(ctr ^ (lane as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        *u = (x >> 11) as f64 / (1u64 << 53) as f64;
    }
    out
}

/// Static (iteration-independent) quantities of one occurrence.
#[derive(Debug, Clone, Copy)]
struct Static {
    signature: u32,
    gap: f64,
    skew: f64,
    wait: f64,
    overlap: f64,
    pressure: f64,
    before: f64,
    observed: f64,
    uncertain: bool,
    base_us: f64,
    identity_hash: u64,
}

/// The result of a replay: per-sample columns at full precision.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// Occurrences per iteration.
    pub per_iteration: usize,
    /// Iterations.
    pub iterations: u32,
    /// The program's signatures (samples refer to them by index).
    pub signatures: Vec<Signature>,
    /// Scheduler resource of each signature.
    pub resources: Vec<String>,
    /// Per-sample signature index.
    pub signature: Vec<u32>,
    /// Gap (9 decimals in samples).
    pub gap_us: Vec<f64>,
    /// Compute before (descriptive).
    pub compute_before_us: Vec<f64>,
    /// Arrival skew.
    pub arrival_skew_us: Vec<f64>,
    /// Mean rank wait.
    pub avg_rank_wait_us: Vec<f64>,
    /// Overlap after ablations.
    pub compute_overlap_us: Vec<f64>,
    /// Collective latency.
    pub collective_us: Vec<f64>,
    /// First arrival (= ready time).
    pub first_arrival_us: Vec<f64>,
    /// Last arrival.
    pub last_arrival_us: Vec<f64>,
    /// Collective start.
    pub collective_start_us: Vec<f64>,
    /// Queue wait.
    pub queue_wait_us: Vec<f64>,
    /// Completion.
    pub completion_us: Vec<f64>,
    /// Total (skew + queue + collective).
    pub total_us: Vec<f64>,
    /// Hidden behind compute.
    pub hidden_us: Vec<f64>,
    /// Exposed.
    pub exposed_us: Vec<f64>,
    /// Observed exposed latency (`NaN` when absent or ablated).
    pub observed_exposed_us: Vec<f64>,
    /// Uncertain compute fields.
    pub uncertain: Vec<bool>,
}

impl Replay {
    /// Number of samples.
    #[must_use]
    pub fn len(&self) -> usize {
        self.exposed_us.len()
    }

    /// `true` when nothing was replayed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.exposed_us.is_empty()
    }

    /// Whether samples carry observed latencies.
    #[must_use]
    pub fn has_observed(&self) -> bool {
        self.observed_exposed_us
            .first()
            .is_some_and(|v| !v.is_nan())
    }
}

fn sort_key(sig: &Signature) -> impl Ord + '_ {
    let int_text = |t: &Option<Vec<u8>>| {
        t.as_ref()
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or(-1)
    };
    (
        (
            sig.phase.as_slice(),
            sig.op.as_slice(),
            sig.dtype.as_deref().unwrap_or(b""),
        ),
        (
            sig.reduction_op.as_deref().unwrap_or(b""),
            sig.bytes,
            sig.group.as_slice(),
        ),
        (
            sig.ranks.as_slice(),
            int_text(&sig.root_rank),
            sig.sender_rank.unwrap_or(-1),
        ),
        (
            sig.receiver_rank.unwrap_or(-1),
            sig.tag.as_deref().unwrap_or(b""),
            sig.channel.as_deref().unwrap_or(b""),
        ),
    )
}

/// Canonical identity JSON of an occurrence, split around the parts that
/// vary: `{"arrival_offsets_us":[…],` + middle + `"occurrence":N,` + tail.
struct IdentityTemplate {
    middle: Vec<u8>,
    tail: Vec<u8>,
}

fn identity_template(sig: &Signature) -> IdentityTemplate {
    // Keys sorted: arrival_offsets_us, channel, group, message_sequence,
    // occurrence, op, phase, ranks, receiver_rank, reduction_op, root_rank,
    // sender_rank, tag.
    let mut middle = Vec::new();
    if let Some(c) = &sig.channel {
        middle.extend_from_slice(b"\"channel\":");
        canon::write_wtf8(&mut middle, c);
        middle.push(b',');
    }
    middle.extend_from_slice(b"\"group\":");
    canon::write_wtf8(&mut middle, &sig.group);
    middle.push(b',');
    if let Some(m) = sig.message_sequence {
        middle.extend_from_slice(b"\"message_sequence\":");
        canon::write_i64(&mut middle, m);
        middle.push(b',');
    }
    let mut tail = Vec::new();
    tail.extend_from_slice(b",\"op\":");
    canon::write_wtf8(&mut tail, &sig.op);
    tail.extend_from_slice(b",\"phase\":");
    canon::write_wtf8(&mut tail, &sig.phase);
    tail.extend_from_slice(b",\"ranks\":[");
    for (i, r) in sig.ranks.iter().enumerate() {
        if i > 0 {
            tail.push(b',');
        }
        canon::write_i64(&mut tail, *r);
    }
    tail.push(b']');
    if let Some(r) = sig.receiver_rank {
        tail.extend_from_slice(b",\"receiver_rank\":");
        canon::write_i64(&mut tail, r);
    }
    if let Some(r) = &sig.reduction_op {
        tail.extend_from_slice(b",\"reduction_op\":");
        tail.extend_from_slice(r);
    }
    if let Some(r) = &sig.root_rank {
        tail.extend_from_slice(b",\"root_rank\":");
        tail.extend_from_slice(r);
    }
    if let Some(s) = sig.sender_rank {
        tail.extend_from_slice(b",\"sender_rank\":");
        canon::write_i64(&mut tail, s);
    }
    if let Some(t) = &sig.tag {
        tail.extend_from_slice(b",\"tag\":");
        canon::write_wtf8(&mut tail, t);
    }
    tail.push(b'}');
    IdentityTemplate { middle, tail }
}

/// A pending occurrence before its static quantities are computed.
#[derive(Clone, Copy)]
struct Pending {
    signature: u32,
    occurrence: u64,
    gap: f64,
    point: u32,
    uncertain: bool,
}

/// Replays `program` under `settings`.
///
/// # Errors
/// Invalid settings, an expansion above `max_replay_events`, or a timeline
/// beyond 1e12 µs.
#[allow(clippy::too_many_lines)]
pub fn replay(program: &Program, settings: &Settings) -> Result<Replay> {
    settings.validate()?;
    let (_, occurrences) = crate::canary::expand::expanded_counts(program);
    let total = occurrences.saturating_mul(u64::from(settings.iterations));
    if total > settings.max_replay_events {
        return Err(Error::invalid(format!(
            "replay would execute {total} events, above max_replay_events={}",
            settings.max_replay_events
        )));
    }
    let ablate = settings.ablations;

    // Logical events, optionally reordered by identity (stable).
    let mut events: Vec<LogicalEvent> = Vec::new();
    for_each_logical_event(program, |e| events.push(*e));
    if ablate.operation_ordering {
        events.sort_by(|a, b| {
            sort_key(&program.signatures[a.signature as usize])
                .cmp(&sort_key(&program.signatures[b.signature as usize]))
        });
    }
    let mut pending: Vec<Pending> = Vec::with_capacity(occurrences as usize);
    for event in &events {
        for_each_occurrence_of(program, event, |o| {
            pending.push(Pending {
                signature: o.signature,
                occurrence: o.occurrence,
                gap: o.gap_us,
                point: o.point,
                uncertain: o.uncertain,
            });
        });
    }

    // Static quantities, identities hashed on two threads.
    let templates: Vec<IdentityTemplate> =
        program.signatures.iter().map(identity_template).collect();
    let statics = |chunk: &[Pending]| -> Vec<Static> {
        let mut buf = Vec::with_capacity(256);
        let mut offsets = Vec::with_capacity(64);
        chunk
            .iter()
            .map(|p| {
                let sig = &program.signatures[p.signature as usize];
                let point = &program.points[p.point as usize];
                let n = sig.rank_count();
                offsets.clear();
                if ablate.arrival_skew {
                    offsets.resize(n, 0.0);
                } else {
                    offsets.extend_from_slice(program.point_offsets(point, n));
                }
                let hi = offsets.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let lo = offsets.iter().copied().fold(f64::INFINITY, f64::min);
                let skew = hi - lo;
                let wait = py_sum(offsets.iter().map(|o| hi - o)) / n as f64;
                let p_rec = if ablate.pressure {
                    0.55
                } else {
                    point.compute_pressure
                };
                let pressure = (settings.compute_pressure * p_rec / 0.55).clamp(0.0, 1.5);
                let overlap = if ablate.compute_overlap {
                    0.0
                } else {
                    point.compute_overlap_us
                };
                let gap = if ablate.queue_reset_gaps { 0.0 } else { p.gap };
                let nf = n as f64;
                let log_ranks = nf.max(2.0).log2();
                let transfer = (sig.bytes as f64 * 8.0) / (settings.bandwidth_gbps * 1000.0);
                let g = (sig.concurrent_groups - 1).max(0) as f64;
                let contention = 1.0 + 0.22 * g;
                let penalty = 1.0 + 0.18 * pressure;
                let startup = settings.latency_floor_us + 1.15 * log_ranks + 4.0;
                let base_us = startup + transfer * op_factor(sig, nf) * contention * penalty;

                let t = &templates[p.signature as usize];
                buf.clear();
                buf.extend_from_slice(b"{\"arrival_offsets_us\":[");
                for (i, o) in offsets.iter().enumerate() {
                    if i > 0 {
                        buf.push(b',');
                    }
                    canon::write_f64_rounded(&mut buf, round(*o, 9), 9);
                }
                buf.extend_from_slice(b"],");
                buf.extend_from_slice(&t.middle);
                buf.extend_from_slice(b"\"occurrence\":");
                canon::write_i64(&mut buf, p.occurrence as i64);
                buf.extend_from_slice(&t.tail);
                let digest = Sha256::digest(&buf);
                let mut head = [0u8; 8];
                head.copy_from_slice(&digest[..8]);
                let observed = if ablate.observed_exposed_us {
                    f64::NAN
                } else {
                    point.observed_exposed_us
                };
                Static {
                    signature: p.signature,
                    gap,
                    skew,
                    wait,
                    overlap,
                    pressure,
                    before: point.compute_before_us,
                    observed,
                    uncertain: p.uncertain,
                    base_us,
                    identity_hash: u64::from_be_bytes(head),
                }
            })
            .collect()
    };
    let statics: Vec<Static> = if pending.len() >= 20_000 {
        let (a, b) = pending.split_at(pending.len() / 2);
        std::thread::scope(|scope| {
            let second = scope.spawn(|| statics(b));
            let mut first = statics(a);
            let second = second
                .join()
                .map_err(|_| Error::invalid("internal error: replay worker panicked"))?;
            first.extend(second);
            Ok::<_, Error>(first)
        })?
    } else {
        statics(&pending)
    };
    drop(pending);

    // Schedule every iteration.
    let resources: Vec<String> = program.signatures.iter().map(resource).collect();
    let mut resource_id: Vec<usize> = Vec::with_capacity(resources.len());
    {
        let mut names: Vec<&String> = Vec::new();
        for r in &resources {
            let id = names.iter().position(|n| *n == r).unwrap_or_else(|| {
                names.push(r);
                names.len() - 1
            });
            resource_id.push(id);
        }
    }
    let n = statics.len();
    let samples = n * settings.iterations as usize;
    let mut out = Replay {
        per_iteration: n,
        iterations: settings.iterations,
        signatures: program.signatures.clone(),
        resources,
        ..Replay::default()
    };
    macro_rules! reserve {
        ($($f:ident),*) => { $( out.$f.reserve_exact(samples); )* };
    }
    reserve!(
        signature,
        gap_us,
        compute_before_us,
        arrival_skew_us,
        avg_rank_wait_us,
        compute_overlap_us,
        collective_us,
        first_arrival_us,
        last_arrival_us,
        collective_start_us,
        queue_wait_us,
        completion_us,
        total_us,
        hidden_us,
        exposed_us,
        observed_exposed_us,
        uncertain
    );
    let eta = settings.overlap_efficiency;
    for iteration in 0..settings.iterations {
        let mut available = vec![0.0f64; resource_id.len()];
        let mut clock = 0.0f64;
        for s in &statics {
            let [u0, u1, u2] = uniforms(settings.seed, iteration, s.identity_hash);
            let g = (program.signatures[s.signature as usize].concurrent_groups - 1).max(0) as f64;
            let p_tail = (0.015 + s.skew / 180.0 + 0.035 * s.pressure + 0.04 * g).min(0.35);
            let jitter = -0.45 + 1.35 * u0;
            let noise = if ablate.rare_tail_windows || u1 > p_tail {
                jitter
            } else {
                jitter + (-(1.0 - u2).max(1e-15).ln()) * (3.5 + 8.0 * s.pressure + 0.08 * s.skew)
            };
            let collective = (s.base_us + noise).max(0.5);
            clock += s.gap;
            let first = clock;
            let last = first + s.skew;
            let slot = &mut available[resource_id[s.signature as usize]];
            let start = last.max(*slot);
            let queue = start - last;
            let completion = start + collective;
            if clock > 1e12 || completion > 1e12 {
                return Err(Error::invalid("replay timeline exceeds 1e12 us"));
            }
            let total = completion - first;
            let hidden = total.min(s.overlap.max(0.0) * eta);
            *slot = completion;
            out.signature.push(s.signature);
            out.gap_us.push(s.gap);
            out.compute_before_us.push(s.before);
            out.arrival_skew_us.push(s.skew);
            out.avg_rank_wait_us.push(s.wait);
            out.compute_overlap_us.push(s.overlap);
            out.collective_us.push(collective);
            out.first_arrival_us.push(first);
            out.last_arrival_us.push(last);
            out.collective_start_us.push(start);
            out.queue_wait_us.push(queue);
            out.completion_us.push(completion);
            out.total_us.push(total);
            out.hidden_us.push(hidden);
            out.exposed_us.push(total - hidden);
            out.observed_exposed_us.push(s.observed);
            out.uncertain.push(s.uncertain);
        }
    }
    Ok(out)
}

/// Canonical JSON of a signature (for reports).
#[must_use]
pub fn signature_json(sig: &Signature) -> Vec<u8> {
    let mut v = Vec::new();
    write_signature(&mut v, sig);
    v
}
