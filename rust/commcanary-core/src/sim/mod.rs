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
//!
//! A calibrated backend may add five terms, all off by default (the
//! spec's model): pipelined steps (an op's floors and transfer overlap,
//! `max` rather than their sum, [`cost::BaseTerms::latency`]); host
//! stalls (an exponential delay on a share of occurrences,
//! [`cost::stall_us`]); a spread of the transfer rate (the
//! bandwidth term times a lognormal factor of median 1,
//! [`cost::rate_factor`]); a host shared by more ranks than
//! cores, which stretches each base latency and stall by
//! [`cost::host_stretch`] of the ranks running when it starts (its
//! members and those of every occurrence in flight then); and
//! `serialize_ranks`, under which `available` also holds each rank:
//! `start = max(last, available[resource], free[r] for every member r)`,
//! and every member is busy until `completion`.

pub mod cost;
mod identity;
pub mod measured;
pub mod metrics;
pub mod settings;

pub use settings::{
    ABLATION_NAMES, Ablations, BACKEND_SETTINGS, BackendSetting, FileRole, MAX_OP_OVERRIDES,
    MAX_REPLAY_EVENTS_LIMIT, OpOverride, SettingValue, Settings,
};

use rayon::prelude::*;

use crate::canary::Program;
use crate::canary::expand::{LogicalEvent, for_each_logical_event, for_each_occurrence_of};
use crate::canary::write::write_signature;
use crate::error::{Error, Result};
use crate::pyfloat::py_sum;
use crate::trace::Signature;
use identity::{IdentityTemplate, identity_template};

/// Model identity.
pub const MODEL_NAME: &str = "commcanary.replay";
/// Model version.
pub const MODEL_VERSION: &str = "deterministic-scheduler-v4";

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
    /// The noise-free cost in its terms.
    terms: cost::BaseTerms,
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
    fn reserve(&mut self, samples: usize) {
        macro_rules! reserve {
            ($($f:ident),*) => { $( self.$f.reserve_exact(samples); )* };
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
    }

    /// Appends one scheduled occurrence.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        s: &Static,
        collective: f64,
        first: f64,
        last: f64,
        start: f64,
        completion: f64,
        eta: f64,
    ) {
        let total = completion - first;
        let hidden = total.min(s.overlap.max(0.0) * eta);
        self.signature.push(s.signature);
        self.gap_us.push(s.gap);
        self.compute_before_us.push(s.before);
        self.arrival_skew_us.push(s.skew);
        self.avg_rank_wait_us.push(s.wait);
        self.compute_overlap_us.push(s.overlap);
        self.collective_us.push(collective);
        self.first_arrival_us.push(first);
        self.last_arrival_us.push(last);
        self.collective_start_us.push(start);
        self.queue_wait_us.push(start - last);
        self.completion_us.push(completion);
        self.total_us.push(total);
        self.hidden_us.push(hidden);
        self.exposed_us.push(total - hidden);
        self.observed_exposed_us.push(s.observed);
        self.uncertain.push(s.uncertain);
    }

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
    let pending = pending_occurrences(program, settings.ablations, occurrences as usize);
    let statics = static_quantities(program, settings, &pending);
    drop(pending);
    schedule(program, settings, &statics)
}

/// Stage 1: the occurrences in replay order (logical events optionally
/// reordered by identity, stably, then expanded).
fn pending_occurrences(program: &Program, ablate: Ablations, occurrences: usize) -> Vec<Pending> {
    let mut events: Vec<LogicalEvent> = Vec::new();
    for_each_logical_event(program, |e| events.push(*e));
    if ablate.operation_ordering {
        events.sort_by(|a, b| {
            sort_key(&program.signatures[a.signature as usize])
                .cmp(&sort_key(&program.signatures[b.signature as usize]))
        });
    }
    let mut pending: Vec<Pending> = Vec::with_capacity(occurrences);
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
    pending
}

/// Fewest occurrences worth computing in parallel, and the smallest piece a
/// worker takes.
const PARALLEL_MIN: usize = 20_000;
const PIECE_MIN: usize = 4096;

/// Stage 2: the iteration-independent quantities of every occurrence
/// (offsets, skew, wait, pressure, base latency, identity hash), computed in
/// parallel pieces and collected in order.
fn static_quantities(program: &Program, settings: &Settings, pending: &[Pending]) -> Vec<Static> {
    let templates: Vec<IdentityTemplate> =
        program.signatures.iter().map(identity_template).collect();
    let one = |scratch: &mut StaticScratch, p: &Pending| {
        static_of(program, settings, &templates, p, scratch)
    };
    if pending.len() < PARALLEL_MIN {
        let mut scratch = StaticScratch::default();
        return pending.iter().map(|p| one(&mut scratch, p)).collect();
    }
    let mut out = Vec::with_capacity(pending.len());
    pending
        .par_iter()
        .with_min_len(PIECE_MIN)
        .map_init(StaticScratch::default, one)
        .collect_into_vec(&mut out);
    out
}

/// Buffers reused across the occurrences of one chunk.
#[derive(Default)]
struct StaticScratch {
    identity: Vec<u8>,
    offsets: Vec<f64>,
}

/// The static quantities of one occurrence.
#[inline]
fn static_of(
    program: &Program,
    settings: &Settings,
    templates: &[IdentityTemplate],
    p: &Pending,
    scratch: &mut StaticScratch,
) -> Static {
    let ablate = settings.ablations;
    let sig = &program.signatures[p.signature as usize];
    let point = &program.points[p.point as usize];
    let n = sig.rank_count();
    let offsets = &mut scratch.offsets;
    offsets.clear();
    if ablate.arrival_skew {
        offsets.resize(n, 0.0);
    } else {
        offsets.extend_from_slice(program.point_offsets(point, n));
    }
    let hi = offsets.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let lo = offsets.iter().copied().fold(f64::INFINITY, f64::min);
    let wait = py_sum(offsets.iter().map(|o| hi - o)) / n as f64;
    let record_pressure = if ablate.pressure {
        0.55
    } else {
        point.compute_pressure
    };
    let pressure = cost::effective_pressure(settings.compute_pressure, record_pressure);
    let identity_hash =
        templates[p.signature as usize].hash(offsets, p.occurrence, &mut scratch.identity);
    let terms = cost::base_terms(sig, settings, pressure);
    Static {
        signature: p.signature,
        gap: if ablate.queue_reset_gaps {
            0.0
        } else {
            p.gap * settings.gap_scale
        },
        skew: hi - lo,
        wait,
        overlap: if ablate.compute_overlap {
            0.0
        } else {
            point.compute_overlap_us
        },
        pressure,
        before: point.compute_before_us,
        observed: if ablate.observed_exposed_us {
            f64::NAN
        } else {
            point.observed_exposed_us
        },
        uncertain: p.uncertain,
        terms,
        identity_hash,
    }
}

/// Dense resource ids: the first signature naming a resource fixes its id.
fn resource_ids(resources: &[String]) -> Vec<usize> {
    let mut names = Vec::new();
    resources.iter().map(|r| dense_id(&mut names, r)).collect()
}

/// The id of `item` among `seen` (its first position), adding it when new.
fn dense_id<'a, T: PartialEq + ?Sized>(seen: &mut Vec<&'a T>, item: &'a T) -> usize {
    seen.iter().position(|x| *x == item).unwrap_or_else(|| {
        seen.push(item);
        seen.len() - 1
    })
}

/// Stage 3: every iteration scheduled on the FIFO resources.
fn schedule(program: &Program, settings: &Settings, statics: &[Static]) -> Result<Replay> {
    let resources: Vec<String> = if settings.serialize_groups {
        vec!["serialized".to_owned(); program.signatures.len()]
    } else {
        program.signatures.iter().map(resource).collect()
    };
    let resource_id = resource_ids(&resources);
    let n = statics.len();
    let mut out = Replay {
        per_iteration: n,
        iterations: settings.iterations,
        signatures: program.signatures.clone(),
        resources,
        ..Replay::default()
    };
    out.reserve(n * settings.iterations as usize);
    let other_groups: Vec<f64> = (program.signatures.iter())
        .map(|s| cost::other_groups_under(s, settings))
        .collect();
    let stall_steps: Vec<u32> = (program.signatures.iter())
        .map(|s| cost::stall_steps(s, settings))
        .collect();
    let no_tail = settings.ablations.rare_tail_windows;
    let eta = settings.overlap_efficiency;
    let members = rank_members(
        program,
        settings.serialize_ranks || settings.host_cpus > 0.0,
    );
    // With no more ranks than cores nothing is ever stretched.
    let cores = settings.shared_cores();
    let sharing = cores > 0.0 && members.ranks as f64 > cores;
    for iteration in 0..settings.iterations {
        let mut available = vec![0.0f64; resource_id.len()];
        let mut ranks = RankTimes::new(members.ranks);
        let mut clock = 0.0f64;
        for s in statics {
            clock += s.gap;
            let first = clock;
            let last = first + s.skew;
            let slot = &mut available[resource_id[s.signature as usize]];
            let mine = &members.of[s.signature as usize];
            // Busy members enter late: max over members of max(ready, free).
            let busy = match settings.serialize_ranks {
                true => mine.iter().fold(*slot, |t, &r| t.max(ranks.free[r])),
                false => *slot,
            };
            let start = last.max(busy);
            let stretch = match sharing {
                true => cost::host_stretch(ranks.busy_at(start, mine), cores),
                false => 1.0,
            };
            let u = cost::uniforms(settings.seed, iteration, s.identity_hash);
            let g = other_groups[s.signature as usize];
            let base = s.terms.latency(match settings.rate_spread > 0.0 {
                true => cost::rate_factor(settings, iteration, s.identity_hash),
                false => 1.0,
            });
            let mut collective = base * stretch + cost::noise_us(u, s.skew, s.pressure, g, no_tail);
            if settings.stall_probability > 0.0 {
                let steps = stall_steps[s.signature as usize];
                collective += cost::stall_us(settings, iteration, s.identity_hash, steps) * stretch;
            }
            let collective = collective.max(0.5);
            let completion = start + collective;
            if clock > 1e12 || completion > 1e12 {
                return Err(Error::invalid("replay timeline exceeds 1e12 us"));
            }
            *slot = completion;
            ranks.hold(mine, start, completion);
            out.push(s, collective, first, last, start, completion, eta);
        }
    }
    Ok(out)
}

/// Dense rank ids per signature, for `serialize_ranks` and the host
/// sharing term (empty lists, and no ranks, without either).
struct RankMembers {
    ranks: usize,
    of: Vec<Vec<usize>>,
}

fn rank_members(program: &Program, per_rank: bool) -> RankMembers {
    let mut seen: Vec<&i64> = Vec::new();
    let of = (program.signatures.iter())
        .map(|sig| match per_rank {
            true => (sig.ranks.iter()).map(|r| dense_id(&mut seen, r)).collect(),
            false => Vec::new(),
        })
        .collect();
    RankMembers {
        ranks: seen.len(),
        of,
    }
}

/// Per rank, the start and completion of the last occurrence it took
/// part in: when it is free again, and whether it is running at an instant.
struct RankTimes {
    from: Vec<f64>,
    free: Vec<f64>,
}

impl RankTimes {
    fn new(ranks: usize) -> Self {
        Self {
            from: vec![0.0; ranks],
            free: vec![0.0; ranks],
        }
    }

    /// The ranks running at `t` if `mine` starts then: `mine`, and every
    /// other rank whose last occurrence started by `t` and completes after.
    fn busy_at(&self, t: f64, mine: &[usize]) -> usize {
        let running = |&r: &usize| self.from[r] <= t && t < self.free[r];
        let all = (0..self.free.len()).filter(running).count();
        mine.len() + all - mine.iter().filter(|r| running(r)).count()
    }

    fn hold(&mut self, mine: &[usize], start: f64, completion: f64) {
        for &r in mine {
            self.from[r] = start;
            self.free[r] = completion;
        }
    }
}

/// Canonical JSON of a signature (for reports).
#[must_use]
pub fn signature_json(sig: &Signature) -> Vec<u8> {
    let mut v = Vec::new();
    write_signature(&mut v, sig);
    v
}

#[cfg(test)]
mod tests {
    use super::RankTimes;

    #[test]
    fn ranks_inside_an_occurrence_at_an_instant_are_running() {
        let mut ranks = RankTimes::new(4);
        ranks.hold(&[0, 1], 10.0, 20.0);
        // Ranks 2 and 3 starting at 15 share the host with 0 and 1.
        assert_eq!(ranks.busy_at(15.0, &[2, 3]), 4);
        // At 20 the first occurrence is done; before 10 it had not begun.
        assert_eq!(ranks.busy_at(20.0, &[2, 3]), 2);
        assert_eq!(ranks.busy_at(5.0, &[2, 3]), 2);
        // A member is counted once, whether or not it is still running.
        assert_eq!(ranks.busy_at(15.0, &[1, 2]), 3);
    }
}
