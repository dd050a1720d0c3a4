//! Replay settings: the backend knobs, the iteration count and seed, the
//! event ceiling and the ablations.
//!
//! Every backend setting is declared once, in the [`backend_settings!`]
//! table below: its type, default, range rule and where documents carry it.
//! The struct, its defaults, [`Settings::validate`], the settings table
//! [`BACKEND_SETTINGS`] and, through it, every reader and writer
//! ([`codec`]: requests, a report's `backend` section, the backend file) are
//! generated from that one line, and so is the report schema's
//! `simulated_backend` (`make schemas` writes it). Adding a setting is a
//! line here, its use in [`super::cost`], and its documentation.
//!
//! [`Settings::default`] holds the one copy of the default backend that
//! every front end reads; every bad value is an [`Error::option`] naming the
//! option as the API spells it.

pub mod codec;

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

/// Where a backend file carries a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileRole {
    /// Required in a backend file, and always written in a report.
    Required,
    /// Fitted by calibration: always written in a backend file, optional
    /// when read, written in a report when it differs from its default.
    Calibrated,
    /// A what-if of one run (bytes scale, ...): never in a backend file.
    Run,
}

/// A setting's value as documents carry it.
#[derive(Debug, Clone, PartialEq)]
pub enum SettingValue {
    /// A string.
    Text(String),
    /// A number.
    Number(f64),
    /// A boolean.
    Flag(bool),
    /// A list of op names.
    Names(Vec<String>),
    /// Per-op overrides.
    Overrides(Vec<OpOverride>),
}

/// A Rust type a setting can have, and how it travels as a [`SettingValue`].
pub trait SettingType: Sized {
    /// The value as documents carry it.
    fn to_value(&self) -> SettingValue;
    /// The setting from a value of the right shape.
    fn from_value(v: SettingValue) -> Option<Self>;
}

impl SettingType for f64 {
    fn to_value(&self) -> SettingValue {
        SettingValue::Number(*self)
    }
    fn from_value(v: SettingValue) -> Option<Self> {
        match v {
            SettingValue::Number(x) => Some(x),
            _ => None,
        }
    }
}

impl SettingType for bool {
    fn to_value(&self) -> SettingValue {
        SettingValue::Flag(*self)
    }
    fn from_value(v: SettingValue) -> Option<Self> {
        match v {
            SettingValue::Flag(x) => Some(x),
            _ => None,
        }
    }
}

impl SettingType for String {
    fn to_value(&self) -> SettingValue {
        SettingValue::Text(self.clone())
    }
    fn from_value(v: SettingValue) -> Option<Self> {
        match v {
            SettingValue::Text(x) => Some(x),
            _ => None,
        }
    }
}

impl SettingType for Vec<String> {
    fn to_value(&self) -> SettingValue {
        SettingValue::Names(self.clone())
    }
    fn from_value(v: SettingValue) -> Option<Self> {
        match v {
            SettingValue::Names(mut x) => {
                x.sort();
                Some(x)
            }
            _ => None,
        }
    }
}

impl SettingType for Vec<OpOverride> {
    fn to_value(&self) -> SettingValue {
        SettingValue::Overrides(self.clone())
    }
    fn from_value(v: SettingValue) -> Option<Self> {
        match v {
            SettingValue::Overrides(mut x) => {
                x.sort_by(|a, b| a.op.cmp(&b.op));
                Some(x)
            }
            _ => None,
        }
    }
}

/// One backend setting: its name, where it travels, its rule, and how to
/// read, write and check it on a [`Settings`].
#[derive(Clone, Copy)]
pub struct BackendSetting {
    /// The name documents and the API use.
    pub name: &'static str,
    /// Where a backend file carries it.
    pub file: FileRole,
    /// The rule its value must satisfy, as an error states it.
    pub rule: &'static str,
    /// Its value on a settings.
    pub get: fn(&Settings) -> SettingValue,
    /// Sets it; false when the value has the wrong shape.
    pub set: fn(&mut Settings, SettingValue) -> bool,
    /// Whether its value satisfies the rule.
    pub check: fn(&Settings) -> bool,
    /// Whether a report's `backend` section writes it.
    pub reported: fn(&Settings) -> bool,
    /// Its value as a report writes it, as a JSON Schema (draft 2020-12)
    /// fragment: the report schema's `simulated_backend` is generated from
    /// these ([`codec::simulated_backend_schema`]).
    pub schema: &'static str,
}

impl BackendSetting {
    /// The option an error names: `backend_label` for the label (a
    /// command line's `--backend-label`), the name otherwise.
    #[must_use]
    pub fn option(&self) -> &'static str {
        if self.name == "label" {
            "backend_label"
        } else {
            self.name
        }
    }

    /// The setting's default value.
    #[must_use]
    pub fn default_value(&self) -> SettingValue {
        (self.get)(&Settings::default())
    }

    /// Whether `s` holds this setting at its default.
    #[must_use]
    pub fn is_default(&self, s: &Settings) -> bool {
        (self.get)(s) == self.default_value()
    }
}

impl std::fmt::Debug for BackendSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendSetting")
            .field("name", &self.name)
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

/// The setting named `name`.
#[must_use]
pub fn backend_setting(name: &str) -> Option<&'static BackendSetting> {
    BACKEND_SETTINGS.iter().find(|s| s.name == name)
}

fn distinct_sorted_ops(ops: &[String]) -> bool {
    ops.len() <= MAX_OP_OVERRIDES
        && ops.iter().all(|op| !op.is_empty() && op.len() <= 64)
        && ops.windows(2).all(|w| w[0] < w[1])
}

fn valid_overrides(list: &[OpOverride]) -> bool {
    list.len() <= MAX_OP_OVERRIDES
        && list.iter().all(|o| {
            !o.op.is_empty()
                && o.bandwidth_gbps > 0.0
                && o.bandwidth_gbps.is_finite()
                && o.latency_floor_us >= 0.0
                && o.latency_floor_us.is_finite()
        })
        && list.windows(2).all(|w| w[0].op < w[1].op)
}

fn changed(name: &str, s: &Settings) -> bool {
    backend_setting(name).is_some_and(|b| !b.is_default(s))
}

/// Declares the backend settings: the struct's fields, their defaults and
/// the [`BACKEND_SETTINGS`] table, sorted by name (the canonical order).
macro_rules! backend_settings {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident: $ty:ty = $default:expr,
            $file:ident, check $check:expr, $rule:literal, reported $reported:expr,
            schema $schema:literal;
    )*) => {
        /// Replay settings: the run's (iterations, seed, ceiling, ablations)
        /// and the backend's.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Settings {
            /// Iterations (≥ 1).
            pub iterations: u32,
            /// Seed (any 64-bit integer).
            pub seed: i64,
            /// Ceiling on occurrences × iterations.
            pub max_replay_events: u64,
            /// Ablations.
            pub ablations: Ablations,
            /// The label is the default one (not given): a replay names the
            /// backend after the canary's job ([`Settings::label_for`]).
            pub label_from_canary: bool,
            $( $(#[doc = $doc])* pub $name: $ty, )*
        }

        impl Default for Settings {
            fn default() -> Self {
                Self {
                    iterations: 1,
                    seed: 7,
                    max_replay_events: 1_000_000,
                    ablations: Ablations::default(),
                    label_from_canary: false,
                    $( $name: $default, )*
                }
            }
        }

        /// Every backend setting, sorted by name.
        pub const BACKEND_SETTINGS: &[BackendSetting] = &[$(
            BackendSetting {
                name: stringify!($name),
                file: FileRole::$file,
                rule: $rule,
                get: |s: &Settings| s.$name.to_value(),
                set: |s: &mut Settings, v: SettingValue| match <$ty as SettingType>::from_value(v) {
                    Some(x) => {
                        s.$name = x;
                        true
                    }
                    None => false,
                },
                check: |s: &Settings| ($check)(&s.$name),
                reported: $reported,
                schema: $schema,
            },
        )*];
    };
}

backend_settings! {
    /// B, Gbit/s (> 0).
    bandwidth_gbps: f64 = 55.0,
        Required, check |v: &f64| *v > 0.0 && v.is_finite(), "must be positive",
        reported |_: &Settings| true,
        schema r#"{"type":"number","exclusiveMinimum":0}"#;
    /// Every message's bytes multiplied by this (> 0; 1 is the canary's):
    /// a what-if the physical replay can realise too.
    bytes_scale: f64 = 1.0,
        Run, check |v: &f64| *v > 0.0 && *v <= 1e6, "must be positive and at most 1e6",
        reported |s: &Settings| changed("bytes_scale", s),
        schema r#"{"type":"number","exclusiveMinimum":0}"#;
    /// C (≥ 0).
    compute_pressure: f64 = 0.55,
        Required, check |v: &f64| *v >= 0.0 && v.is_finite(), "must be non-negative",
        reported |_: &Settings| true,
        schema r#"{"type":"number","minimum":0}"#;
    /// The latency floor is paid once per step of the op's algorithm
    /// ([`super::cost::algorithm_steps`]: a ring all_reduce over `n` ranks
    /// takes `2(n−1)` steps, an all_gather `n−1`, a transfer one), not
    /// once per occurrence (a calibrated backend's; false: the spec's
    /// model). The α–β cost of a ring: a floor fitted on groups of one
    /// size then prices groups of another.
    floor_per_step: bool = false,
        Calibrated, check |_: &bool| true, "must be a boolean",
        reported |s: &Settings| s.floor_per_step,
        schema r#"{"const":true}"#;
    /// Every gap multiplied by this (≥ 0; 1 is the canary's): more or less
    /// compute between collectives.
    gap_scale: f64 = 1.0,
        Run, check |v: &f64| *v >= 0.0 && *v <= 1e6, "must be between 0 and 1e6",
        reported |s: &Settings| changed("gap_scale", s),
        schema r#"{"type":"number","minimum":0}"#;
    /// The cores of the one host every rank of the canary runs on (a
    /// calibrated CPU backend's; 0: not modelled, the spec's model). While
    /// more ranks run than there are cores, each runs at `cores / running`
    /// of its speed, so an occurrence's latency and stall stretch by
    /// `max(1, running / host_cpus)` (processor sharing), `running` its
    /// members and those of every occurrence in flight when it starts.
    host_cpus: f64 = 0.0,
        Calibrated, check |v: &f64| *v >= 0.0 && *v <= 1e6, "must be between 0 and 1e6",
        reported |s: &Settings| changed("host_cpus", s),
        schema r#"{"type":"number","exclusiveMinimum":0,"maximum":1000000}"#;
    /// Concurrent communicators do not slow each other's transfers (a
    /// calibrated backend's; false: the spec's `1 + 0.22·(g−1)` contention
    /// and tail share): on one host shared by every rank they contend for
    /// its cores, which the host sharing term prices, not for a link.
    independent_groups: bool = false,
        Calibrated, check |_: &bool| true, "must be a boolean",
        reported |s: &Settings| s.independent_groups,
        schema r#"{"const":true}"#;
    /// Backend label (descriptive).
    label: String = "simulated-nccl".to_owned(),
        Required, check |v: &String| !v.is_empty(), "must be non-empty",
        reported |_: &Settings| true,
        schema r#"{"type":"string","minLength":1}"#;
    /// F, µs (≥ 0).
    latency_floor_us: f64 = 7.5,
        Required, check |v: &f64| *v >= 0.0 && v.is_finite(), "must be non-negative",
        reported |_: &Settings| true,
        schema r#"{"type":"number","minimum":0}"#;
    /// Operations with their own latency floor and bandwidth (a calibrated
    /// backend's), sorted by op; every other op uses the backend's.
    op_overrides: Vec<OpOverride> = Vec::new(),
        Calibrated, check |v: &Vec<OpOverride>| valid_overrides(v),
        "must name distinct ops, sorted, each with a non-negative latency floor and a positive bandwidth",
        reported |s: &Settings| !s.op_overrides.is_empty(),
        schema r#"{"type":"array","items":{"type":"object","required":["op","latency_floor_us","bandwidth_gbps"],"additionalProperties":false,"properties":{"op":{"type":"string","minLength":1},"latency_floor_us":{"type":"number","minimum":0},"bandwidth_gbps":{"type":"number","exclusiveMinimum":0}}}}"#;
    /// η in [0, 1].
    overlap_efficiency: f64 = 0.72,
        Required, check |v: &f64| (0.0..=1.0).contains(v), "must be between 0 and 1",
        reported |_: &Settings| true,
        schema r#"{"type":"number","minimum":0,"maximum":1}"#;
    /// Operations whose steps are pipelined (a calibrated backend's; empty:
    /// the spec's model, start-up plus transfer): each step takes the
    /// longer of its hand-off (the floor) and its chunk's transfer, so the
    /// occurrence's floors and transfer overlap and its latency is
    /// `max(floors, transfer)` plus the per-rank term
    /// ([`super::cost::base_terms`]). A `send` or `recv` follows
    /// `point_to_point`. Sorted, distinct, at most [`MAX_OP_OVERRIDES`].
    pipelined_ops: Vec<String> = Vec::new(),
        Calibrated, check |v: &Vec<String>| distinct_sorted_ops(v), "must name at most 64 distinct ops",
        reported |s: &Settings| !s.pipelined_ops.is_empty(),
        schema r#"{"type":"array","maxItems":64,"uniqueItems":true,"items":{"type":"string","minLength":1,"maxLength":64}}"#;
    /// The share of a core one rank keeps busy inside a collective (a
    /// measured gloo run's `rank_cpu_share`; 1: a whole core). Processor
    /// sharing counts demand, not ranks: the stretch is
    /// `max(1, share·running / host_cpus)` ([`Settings::shared_cores`]).
    rank_cpu_share: f64 = 1.0,
        Calibrated, check |v: &f64| *v > 0.0 && *v <= 1.0, "must be above 0 and at most 1",
        reported |s: &Settings| changed("rank_cpu_share", s),
        schema r#"{"type":"number","exclusiveMinimum":0,"maximum":1}"#;
    /// The spread of the host's transfer rate (a calibrated backend's; 0:
    /// none, the spec's model): each occurrence's bandwidth term is
    /// multiplied by `exp(σ·z)`, `z` a standard normal drawn from its
    /// counter ([`super::cost::rate_factor`]), so medians stay where the
    /// bandwidth put them while large messages spread as a shared host's
    /// copies do. At most 2.
    rate_spread: f64 = 0.0,
        Calibrated, check |v: &f64| *v >= 0.0 && *v <= 2.0, "must be between 0 and 2",
        reported |s: &Settings| changed("rate_spread", s),
        schema r#"{"type":"number","minimum":0,"maximum":2}"#;
    /// Collectives of different communicators never overlap: one FIFO for
    /// all, and no concurrent groups' contention (the physical replay's
    /// `concurrent_groups: off`).
    serialize_groups: bool = false,
        Run, check |_: &bool| true, "must be a boolean",
        reported |s: &Settings| s.serialize_groups,
        schema r#"{"const":true}"#;
    /// A rank takes part in one operation at a time: an occurrence starts
    /// only when every member is done with its previous one, whatever the
    /// resource (blocking calls, as the physical replay and most gloo
    /// programs make them).
    serialize_ranks: bool = false,
        Calibrated, check |_: &bool| true, "must be a boolean",
        reported |s: &Settings| s.serialize_ranks,
        schema r#"{"const":true}"#;
    /// Mean of a host stall, µs (written with the stall probability).
    stall_mean_us: f64 = 0.0,
        Calibrated, check |v: &f64| *v >= 0.0 && *v <= 1e9, "must be between 0 and 1e9",
        reported |s: &Settings| s.stall_probability != 0.0,
        schema r#"{"type":"number","minimum":0}"#;
    /// Host stalls (a calibrated backend's; 0: none, the spec's model): with
    /// this probability an occurrence's latency gains an exponential delay
    /// of mean [`Settings::stall_mean_us`], drawn from more deterministic
    /// uniforms of its counter. A process descheduled on an oversubscribed
    /// host; at most 0.5. Under [`Settings::floor_per_step`] each step of the
    /// algorithm stalls with it and the delays add up
    /// ([`super::cost::stall_us`]): every step hands off to a peer.
    stall_probability: f64 = 0.0,
        Calibrated, check |v: &f64| *v >= 0.0 && *v <= 0.5, "must be between 0 and 0.5",
        reported |s: &Settings| s.stall_probability != 0.0,
        schema r#"{"type":"number","minimum":0,"maximum":0.5}"#;
}

impl Settings {
    /// The cores the host's ranks share, counted in ranks' demand:
    /// `host_cpus / rank_cpu_share` (0: no sharing modelled).
    #[must_use]
    pub fn shared_cores(&self) -> f64 {
        self.host_cpus / self.rank_cpu_share
    }

    /// The label a replay of a job that ran on `job_backend` (the canary's
    /// `system.kineto_backend`, when it records one) reports when none was
    /// given: the default label names the model's NCCL-like default backend,
    /// so a job that ran on another backend says so instead of being called
    /// NCCL.
    #[must_use]
    pub fn label_for(&self, job_backend: Option<&str>) -> String {
        match job_backend {
            Some(b)
                if self.label_from_canary && !b.is_empty() && !b.eq_ignore_ascii_case("nccl") =>
            {
                format!("simulated (the job ran on {b})")
            }
            _ => self.label.clone(),
        }
    }

    /// Checks the parameter ranges.
    ///
    /// # Errors
    /// The first parameter out of range, as an [`Error::option`] naming it.
    pub fn validate(&self) -> Result<()> {
        for setting in BACKEND_SETTINGS {
            if !(setting.check)(self) {
                return Err(Error::option(setting.option(), setting.rule));
            }
        }
        if self.iterations < 1 {
            return Err(Error::option("iterations", "must be at least 1"));
        }
        if self.max_replay_events < 1 || self.max_replay_events > MAX_REPLAY_EVENTS_LIMIT {
            return Err(Error::option(
                "max_replay_events",
                format!("must be between 1 and {MAX_REPLAY_EVENTS_LIMIT}"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_the_defaults_are_valid() {
        let names: Vec<_> = BACKEND_SETTINGS.iter().map(|s| s.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        Settings::default().validate().unwrap();
    }

    #[test]
    fn every_rule_names_its_option() {
        let mut s = Settings {
            rate_spread: 3.0,
            ..Settings::default()
        };
        let e = s.validate().unwrap_err();
        assert_eq!(e.option_name(), Some("rate_spread"));
        s = Settings::default();
        s.label.clear();
        assert_eq!(
            s.validate().unwrap_err().option_name(),
            Some("backend_label")
        );
        s = Settings::default();
        s.pipelined_ops = vec!["b".into(), "a".into()];
        assert!(s.validate().is_err());
    }

    #[test]
    fn set_refuses_the_wrong_shape_and_sorts_lists() {
        let mut s = Settings::default();
        let ops = backend_setting("pipelined_ops").unwrap();
        assert!(!(ops.set)(&mut s, SettingValue::Number(1.0)));
        assert!((ops.set)(
            &mut s,
            SettingValue::Names(vec!["b".into(), "a".into()])
        ));
        assert_eq!(s.pipelined_ops, ["a", "b"]);
    }
}
