//! Replay settings: the backend knobs, the iteration count and seed, the
//! event ceiling and the ablations.
//!
//! [`Settings::checked`] is the one place caller-supplied values are
//! range-checked; every bad value is an [`Error::option`] naming the option
//! as the API spells it. [`Settings::default`] holds the one copy of the
//! default backend that every front end reads.

use crate::error::{Error, Result};

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
    /// Operations with their own latency floor and bandwidth (a calibrated
    /// backend's), sorted by op; every other op uses the backend's.
    pub op_overrides: Vec<OpOverride>,
    /// Every message's bytes multiplied by this (> 0; 1 is the canary's):
    /// a what-if the physical replay can realise too.
    pub bytes_scale: f64,
    /// Every gap multiplied by this (≥ 0; 1 is the canary's): more or less
    /// compute between collectives.
    pub gap_scale: f64,
    /// Collectives of different communicators never overlap: one FIFO for
    /// all, and no concurrent groups' contention (the physical replay's
    /// `concurrent_groups: off`).
    pub serialize_groups: bool,
    /// Concurrent communicators do not slow each other's transfers (a
    /// calibrated backend's; false: the spec's `1 + 0.22·(g−1)` contention
    /// and tail share): on one host shared by every rank they contend for
    /// its cores, which the host sharing term prices, not for a link.
    pub independent_groups: bool,
    /// A rank takes part in one operation at a time: an occurrence starts
    /// only when every member is done with its previous one, whatever the
    /// resource (blocking calls, as the physical replay and most gloo
    /// programs make them).
    pub serialize_ranks: bool,
    /// Host stalls (a calibrated backend's; 0: none, the spec's model): with
    /// this probability an occurrence's latency gains an exponential delay
    /// of mean [`Settings::stall_mean_us`], drawn from more deterministic
    /// uniforms of its counter. A process descheduled on an oversubscribed
    /// host; at most 0.5. Under [`Settings::floor_per_step`] each step of the
    /// algorithm stalls with it and the delays add up
    /// ([`super::cost::stall_us`]): every step hands off to a peer.
    pub stall_probability: f64,
    /// Mean of a host stall, µs.
    pub stall_mean_us: f64,
    /// The spread of the host's transfer rate (a calibrated backend's; 0:
    /// none, the spec's model): each occurrence's bandwidth term is
    /// multiplied by `exp(σ·z)`, `z` a standard normal drawn from its
    /// counter ([`super::cost::rate_factor`]), so medians stay where the
    /// bandwidth put them while large messages spread as a shared host's
    /// copies do. At most 2.
    pub rate_spread: f64,
    /// The cores of the one host every rank of the canary runs on (a
    /// calibrated CPU backend's; 0: not modelled, the spec's model). While
    /// more ranks run than there are cores, each runs at `cores / running`
    /// of its speed, so an occurrence's latency and stall stretch by
    /// `max(1, running / host_cpus)` (processor sharing), `running` its
    /// members and those of every occurrence in flight when it starts.
    pub host_cpus: f64,
    /// The share of a core one rank keeps busy inside a collective (a
    /// measured gloo run's `rank_cpu_share`; 1: a whole core). Processor
    /// sharing counts demand, not ranks: the stretch is
    /// `max(1, share·running / host_cpus)` ([`Settings::shared_cores`]).
    pub rank_cpu_share: f64,
    /// The latency floor is paid once per step of the op's algorithm
    /// ([`super::cost::algorithm_steps`]: a ring all_reduce over `n` ranks
    /// takes `2(n−1)` steps, an all_gather `n−1`, a transfer one), not
    /// once per occurrence (a calibrated backend's; false: the spec's
    /// model). The α–β cost of a ring: a floor fitted on groups of one
    /// size then prices groups of another.
    pub floor_per_step: bool,
    /// Operations whose steps are pipelined (a calibrated backend's; empty:
    /// the spec's model, start-up plus transfer): each step takes the
    /// longer of its hand-off (the floor) and its chunk's transfer, so the
    /// occurrence's floors and transfer overlap and its latency is
    /// `max(floors, transfer)` plus the per-rank term
    /// ([`super::cost::base_terms`]). A `send` or `recv` follows
    /// `point_to_point`. Sorted, distinct, at most [`MAX_OP_OVERRIDES`].
    pub pipelined_ops: Vec<String>,
}

/// One operation's own latency floor and bandwidth.
#[derive(Debug, Clone, PartialEq)]
pub struct OpOverride {
    /// The op (`all_reduce`, …).
    pub op: String,
    /// Its F, µs (≥ 0).
    pub latency_floor_us: f64,
    /// Its B, Gbit/s (> 0).
    pub bandwidth_gbps: f64,
}

/// Most operations a backend may override.
pub const MAX_OP_OVERRIDES: usize = 64;

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
            op_overrides: Vec::new(),
            bytes_scale: 1.0,
            gap_scale: 1.0,
            serialize_groups: false,
            independent_groups: false,
            serialize_ranks: false,
            stall_probability: 0.0,
            stall_mean_us: 0.0,
            rate_spread: 0.0,
            host_cpus: 0.0,
            rank_cpu_share: 1.0,
            floor_per_step: false,
            pipelined_ops: Vec::new(),
        }
    }
}

impl Settings {
    /// The cores the host's ranks share, counted in ranks' demand:
    /// `host_cpus / rank_cpu_share` (0: no sharing modelled).
    #[must_use]
    pub fn shared_cores(&self) -> f64 {
        self.host_cpus / self.rank_cpu_share
    }

    /// Checks the parameter ranges.
    ///
    /// # Errors
    /// The first parameter out of range, as an [`Error::option`] naming it.
    pub fn validate(&self) -> Result<()> {
        let bad = |name: &'static str, rule: &str| Err(Error::option(name, rule));
        if self.label.is_empty() {
            return bad("backend_label", "must be non-empty");
        }
        if !(self.bandwidth_gbps > 0.0 && self.bandwidth_gbps.is_finite()) {
            return bad("bandwidth_gbps", "must be positive");
        }
        if !(self.latency_floor_us >= 0.0 && self.latency_floor_us.is_finite()) {
            return bad("latency_floor_us", "must be non-negative");
        }
        if !(self.compute_pressure >= 0.0 && self.compute_pressure.is_finite()) {
            return bad("compute_pressure", "must be non-negative");
        }
        if !(0.0..=1.0).contains(&self.overlap_efficiency) {
            return bad("overlap_efficiency", "must be between 0 and 1");
        }
        if self.iterations < 1 {
            return bad("iterations", "must be at least 1");
        }
        if !(self.bytes_scale > 0.0 && self.bytes_scale <= 1e6) {
            return bad("bytes_scale", "must be positive and at most 1e6");
        }
        if !(self.gap_scale >= 0.0 && self.gap_scale <= 1e6) {
            return bad("gap_scale", "must be between 0 and 1e6");
        }
        if !(self.stall_probability >= 0.0 && self.stall_probability <= 0.5) {
            return bad("stall_probability", "must be between 0 and 0.5");
        }
        if !(self.stall_mean_us >= 0.0 && self.stall_mean_us <= 1e9) {
            return bad("stall_mean_us", "must be between 0 and 1e9");
        }
        if !(self.rate_spread >= 0.0 && self.rate_spread <= 2.0) {
            return bad("rate_spread", "must be between 0 and 2");
        }
        if !(self.host_cpus >= 0.0 && self.host_cpus <= 1e6) {
            return bad("host_cpus", "must be between 0 and 1e6");
        }
        if !(self.rank_cpu_share > 0.0 && self.rank_cpu_share <= 1.0) {
            return bad("rank_cpu_share", "must be above 0 and at most 1");
        }
        if self.op_overrides.len() > MAX_OP_OVERRIDES {
            return bad(
                "op_overrides",
                &format!("must have at most {MAX_OP_OVERRIDES} entries"),
            );
        }
        for (i, o) in self.op_overrides.iter().enumerate() {
            let ok = !o.op.is_empty()
                && o.bandwidth_gbps > 0.0
                && o.bandwidth_gbps.is_finite()
                && o.latency_floor_us >= 0.0
                && o.latency_floor_us.is_finite();
            if !ok || self.op_overrides[..i].iter().any(|p| p.op >= o.op) {
                return bad(
                    "op_overrides",
                    "must name distinct ops, sorted, each with a non-negative latency floor and a positive bandwidth",
                );
            }
        }
        let named = |op: &String| !op.is_empty() && op.len() <= 64;
        if self.pipelined_ops.len() > MAX_OP_OVERRIDES
            || !self.pipelined_ops.iter().all(named)
            || self.pipelined_ops.windows(2).any(|w| w[0] >= w[1])
        {
            return bad(
                "pipelined_ops",
                &format!("must name at most {MAX_OP_OVERRIDES} distinct ops"),
            );
        }
        if self.max_replay_events < 1 || self.max_replay_events > MAX_REPLAY_EVENTS_LIMIT {
            return bad(
                "max_replay_events",
                &format!("must be between 1 and {MAX_REPLAY_EVENTS_LIMIT}"),
            );
        }
        Ok(())
    }

    /// Builds and checks settings from caller-supplied values (signed
    /// integers, ablation names, `None` for a default).
    ///
    /// # Errors
    /// As [`Settings::validate`]; an unknown ablation names the known ones.
    pub fn checked(requested: &RequestedSettings) -> Result<Self> {
        let d = Self::default();
        let ablations =
            Ablations::parse(requested.ablations.iter().map(String::as_str)).map_err(|e| {
                Error::option(
                    "ablations",
                    format!("has {e}; expected one of {}", ABLATION_NAMES.join(", ")),
                )
            })?;
        let iterations = match requested.iterations {
            None => d.iterations,
            Some(i) => u32::try_from(i)
                .ok()
                .filter(|&i| i >= 1)
                .ok_or_else(|| Error::option("iterations", "must be at least 1"))?,
        };
        let max_replay_events = match requested.max_replay_events {
            None => d.max_replay_events,
            Some(m) => u64::try_from(m).map_err(|_| {
                Error::option(
                    "max_replay_events",
                    format!("must be between 1 and {MAX_REPLAY_EVENTS_LIMIT}"),
                )
            })?,
        };
        let s = Self {
            label: requested.label.clone().unwrap_or(d.label),
            bandwidth_gbps: requested.bandwidth_gbps.unwrap_or(d.bandwidth_gbps),
            latency_floor_us: requested.latency_floor_us.unwrap_or(d.latency_floor_us),
            compute_pressure: requested.compute_pressure.unwrap_or(d.compute_pressure),
            overlap_efficiency: requested.overlap_efficiency.unwrap_or(d.overlap_efficiency),
            iterations,
            seed: requested.seed.unwrap_or(d.seed),
            max_replay_events,
            ablations,
            op_overrides: {
                let mut list: Vec<OpOverride> = (requested.op_overrides.iter())
                    .map(|(op, floor, bw)| OpOverride {
                        op: op.clone(),
                        latency_floor_us: *floor,
                        bandwidth_gbps: *bw,
                    })
                    .collect();
                list.sort_by(|a, b| a.op.cmp(&b.op));
                list
            },
            bytes_scale: requested.bytes_scale.unwrap_or(1.0),
            gap_scale: requested.gap_scale.unwrap_or(1.0),
            serialize_groups: requested.serialize_groups,
            independent_groups: requested.independent_groups,
            serialize_ranks: requested.serialize_ranks,
            stall_probability: requested.stall_probability.unwrap_or(0.0),
            stall_mean_us: requested.stall_mean_us.unwrap_or(0.0),
            rate_spread: requested.rate_spread.unwrap_or(0.0),
            host_cpus: requested.host_cpus.unwrap_or(0.0),
            rank_cpu_share: requested.rank_cpu_share.unwrap_or(1.0),
            floor_per_step: requested.floor_per_step,
            pipelined_ops: {
                let mut ops = requested.pipelined_ops.clone();
                ops.sort();
                ops
            },
        };
        s.validate()?;
        Ok(s)
    }
}

/// Caller-supplied replay settings, unchecked; `None` means the default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestedSettings {
    /// `label` (the backend label).
    pub label: Option<String>,
    /// `bandwidth_gbps`.
    pub bandwidth_gbps: Option<f64>,
    /// `latency_floor_us`.
    pub latency_floor_us: Option<f64>,
    /// `compute_pressure`.
    pub compute_pressure: Option<f64>,
    /// `overlap_efficiency`.
    pub overlap_efficiency: Option<f64>,
    /// `iterations`.
    pub iterations: Option<i64>,
    /// `seed`.
    pub seed: Option<i64>,
    /// `max_replay_events`.
    pub max_replay_events: Option<i64>,
    /// Ablation names.
    pub ablations: Vec<String>,
    /// `(op, latency_floor_us, bandwidth_gbps)` per overridden op.
    pub op_overrides: Vec<(String, f64, f64)>,
    /// `bytes_scale`.
    pub bytes_scale: Option<f64>,
    /// `gap_scale`.
    pub gap_scale: Option<f64>,
    /// `serialize_groups`.
    pub serialize_groups: bool,
    /// `independent_groups`.
    pub independent_groups: bool,
    /// `serialize_ranks`.
    pub serialize_ranks: bool,
    /// `stall_probability`.
    pub stall_probability: Option<f64>,
    /// `stall_mean_us`.
    pub stall_mean_us: Option<f64>,
    /// `rate_spread`.
    pub rate_spread: Option<f64>,
    /// `host_cpus`.
    pub host_cpus: Option<f64>,
    /// `rank_cpu_share`.
    pub rank_cpu_share: Option<f64>,
    /// `floor_per_step`.
    pub floor_per_step: bool,
    /// `pipelined_ops`.
    pub pipelined_ops: Vec<String>,
}
