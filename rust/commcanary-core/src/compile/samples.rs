//! Event ordering, gap derivation and per-event timing samples.
//!
//! Ordering: when every event has `start_us`, a stable sort by `start_us`; the
//! gap of event `i > 0` is `start_i − start_{i−1}` and an explicit `gap_us`
//! must agree within 0.001. Without timestamps, input order and `gap_us`
//! (else `compute_before_us`, else 0). Mixed traces need `gap_us` everywhere.
//! Every `_us` value of a sample is `round(·, 9)`, pressure `round(·, 6)`.

use std::hash::Hasher;

use rustc_hash::{FxHashMap, FxHasher};

use crate::error::{Error, Result};
use crate::pyfloat::round;
use crate::trace::{Events, Trace, flag};

/// How gaps were derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimingMode {
    /// Every event has `start_us`.
    AbsoluteStartUs,
    /// No event has `start_us`.
    RelativeGapUs,
    /// Some events have `start_us`; all have `gap_us`.
    ExplicitRelativeMixed,
    /// No events.
    Empty,
}

impl TimingMode {
    /// The name written to canaries.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::AbsoluteStartUs => "absolute_start_us",
            Self::RelativeGapUs => "relative_gap_us",
            Self::ExplicitRelativeMixed => "explicit_relative_mixed",
            Self::Empty => "empty",
        }
    }
}

/// Ordered event indices and their derived gaps (unrounded differences are
/// rounded to 9 decimals).
pub struct Ordering {
    /// Input index of each ordered event.
    pub order: Vec<u32>,
    /// Gap of each ordered event.
    pub gaps: Vec<f64>,
    /// How the gaps were derived.
    pub mode: TimingMode,
}

/// Orders the events of `trace` and derives gaps.
///
/// # Errors
/// Mixed timestamps without `gap_us`, or `gap_us` that disagrees with the
/// timestamps.
pub fn order_events(events: &Events) -> Result<Ordering> {
    let n = events.len();
    if n == 0 {
        return Ok(Ordering {
            order: Vec::new(),
            gaps: Vec::new(),
            mode: TimingMode::Empty,
        });
    }
    let timestamped = events.start_us.iter().filter(|s| !s.is_nan()).count();
    if timestamped == n {
        let start = &events.start_us;
        let mut order: Vec<u32> = (0..n as u32).collect();
        if !start.windows(2).all(|w| w[0] <= w[1]) {
            order.sort_by(|&a, &b| start[a as usize].total_cmp(&start[b as usize]));
        }
        let mut gaps = Vec::with_capacity(n);
        for (k, &i) in order.iter().enumerate() {
            let explicit = events.gap_us[i as usize];
            let gap = if k == 0 {
                if explicit.is_nan() { 0.0 } else { explicit }
            } else {
                let diff = start[i as usize] - start[order[k - 1] as usize];
                if diff < -1e-6 {
                    return Err(Error::invalid(format!(
                        "trace event {i} field 'start_us' goes backwards in time"
                    )));
                }
                let diff = diff.max(0.0);
                if !explicit.is_nan() && (explicit - diff).abs() > 0.001 {
                    return Err(Error::invalid(format!(
                        "trace event {i} field 'gap_us' conflicts with the difference between start_us values"
                    )));
                }
                diff
            };
            gaps.push(round(gap, 9));
        }
        return Ok(Ordering {
            order,
            gaps,
            mode: TimingMode::AbsoluteStartUs,
        });
    }
    let order: Vec<u32> = (0..n as u32).collect();
    let mode = if timestamped == 0 {
        TimingMode::RelativeGapUs
    } else {
        if let Some(i) = events.gap_us.iter().position(|g| g.is_nan()) {
            return Err(Error::invalid(format!(
                "mixed timestamped and untimestamped events require explicit gap_us on every event (trace event {i} has none)"
            )));
        }
        TimingMode::ExplicitRelativeMixed
    };
    let gaps = (0..n)
        .map(|i| {
            let g = events.gap_us[i];
            let g = if g.is_nan() {
                let before = events.compute_before_us[i];
                if before.is_nan() { 0.0 } else { before }
            } else {
                g
            };
            round(g, 9)
        })
        .collect();
    Ok(Ordering { order, gaps, mode })
}

/// Normalised timing samples of the selected events, in order.
#[derive(Debug, Default)]
pub struct Samples {
    /// Signature index (into the trace's table).
    pub signature: Vec<u32>,
    /// Gap.
    pub gap: Vec<f64>,
    /// Arrival skew = max − min offset.
    pub skew: Vec<f64>,
    /// Compute before.
    pub before: Vec<f64>,
    /// Compute overlap.
    pub overlap: Vec<f64>,
    /// Compute pressure.
    pub pressure: Vec<f64>,
    /// Observed exposed latency or `NaN`.
    pub observed: Vec<f64>,
    /// Uncertain compute fields.
    pub uncertain: Vec<bool>,
    /// Start of each sample's offsets in `offsets`.
    pub offsets_at: Vec<u32>,
    /// Flat per-rank arrival offsets (minimum subtracted).
    pub offsets: Vec<f64>,
    /// Equality class: two samples are equal (same gap, skew, compute fields,
    /// offsets, uncertainty and observation) iff their classes are equal.
    pub class: Vec<u32>,
}

impl Samples {
    /// Number of samples.
    #[must_use]
    pub fn len(&self) -> usize {
        self.gap.len()
    }

    /// `true` when empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.gap.is_empty()
    }

    /// Offsets of sample `i` given its rank count.
    #[must_use]
    pub fn offsets_of(&self, i: usize, ranks: usize) -> &[f64] {
        let at = self.offsets_at[i] as usize;
        &self.offsets[at..at + ranks]
    }
}

impl Samples {
    /// The samples at `order`, in that order (a step loop's slot streams);
    /// `ranks_of(sig)` is a signature's rank count. Classes keep their
    /// meaning: two gathered samples are equal iff their classes are.
    #[must_use]
    pub fn gather(&self, order: &[usize], ranks_of: impl Fn(u32) -> usize) -> Samples {
        let mut s = Samples {
            signature: Vec::with_capacity(order.len()),
            gap: Vec::with_capacity(order.len()),
            skew: Vec::with_capacity(order.len()),
            before: Vec::with_capacity(order.len()),
            overlap: Vec::with_capacity(order.len()),
            pressure: Vec::with_capacity(order.len()),
            observed: Vec::with_capacity(order.len()),
            uncertain: Vec::with_capacity(order.len()),
            offsets_at: Vec::with_capacity(order.len()),
            offsets: Vec::with_capacity(self.offsets.len()),
            class: Vec::with_capacity(order.len()),
        };
        for &i in order {
            let sig = self.signature[i];
            s.offsets_at.push(s.offsets.len() as u32);
            s.offsets
                .extend_from_slice(self.offsets_of(i, ranks_of(sig)));
            s.signature.push(sig);
            s.gap.push(self.gap[i]);
            s.skew.push(self.skew[i]);
            s.before.push(self.before[i]);
            s.overlap.push(self.overlap[i]);
            s.pressure.push(self.pressure[i]);
            s.observed.push(self.observed[i]);
            s.uncertain.push(self.uncertain[i]);
            s.class.push(self.class[i]);
        }
        s
    }
}

/// Builds samples for the first `count` ordered events.
///
/// # Errors
/// Uncalibrated skew, unknown overlap, partial arrival maps, or observed
/// latency on only some events.
pub fn build_samples(trace: &Trace, ordering: &Ordering, count: usize) -> Result<Samples> {
    let ev = &trace.events;
    let mut s = Samples::default();
    let mut classes = Classes::default();
    let mut with_observed = 0usize;
    for (k, &idx) in ordering.order[..count].iter().enumerate() {
        let i = idx as usize;
        let flags = ev.flags[i];
        check_compilable(flags, i)?;
        let sig = ev.signature[i];
        let ranks = trace.signatures[sig as usize].rank_count();
        let at = s.offsets.len() as u32;
        let skew = push_offsets(ev, i, flags, ranks, &mut s.offsets);
        with_observed += usize::from(!ev.observed_exposed_us[i].is_nan());
        let new = NewSample {
            k,
            sig,
            ranks,
            at,
            values: sample_values(ev, i, flags, skew, ordering.gaps[k]),
        };
        let class = classes.classify(&s, &new);
        s.push(&new, class);
    }
    if with_observed != 0 && with_observed != count {
        return Err(Error::invalid(
            "observed_exposed_us must be present on every selected event or on none",
        ));
    }
    Ok(s)
}

/// Sample stage 1: refuses event `i` when its flags say its skew, overlap
/// or arrivals are not known well enough to compile.
#[inline]
fn check_compilable(flags: u8, i: usize) -> Result<()> {
    if flags & flag::SKEW_UNKNOWN != 0 {
        return Err(Error::invalid(
            "cannot compile uncalibrated cross-rank arrival skew",
        ));
    }
    if flags & flag::OVERLAP_UNKNOWN != 0 {
        return Err(Error::invalid(format!(
            "trace event {i} has unknown compute overlap; a measured or deliberately constructed compute_overlap_us value is required"
        )));
    }
    if flags & flag::PARTIAL_ARRIVAL != 0 {
        return Err(Error::invalid(format!(
            "trace event {i} has a partial rank_arrival_us map; merge the capture shards before compiling"
        )));
    }
    Ok(())
}

/// Sample stage 2: appends event `i`'s `ranks` arrival offsets to `offsets`
/// (from its arrival map, minimum subtracted; else zeros with the scalar
/// skew on the last rank) and returns its arrival skew.
#[inline]
fn push_offsets(ev: &Events, i: usize, flags: u8, ranks: usize, offsets: &mut Vec<f64>) -> f64 {
    if flags & flag::HAS_ARRIVAL_MAP != 0 {
        let a = ev.arrival_at[i] as usize;
        let raw = &ev.arrivals[a..a + ranks];
        let lo = raw.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = raw.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        offsets.extend(raw.iter().map(|&v| round(v - lo, 9)));
        round(hi - lo, 9)
    } else {
        let scalar = ev.arrival_skew_us[i];
        let scalar = if scalar.is_nan() || ranks == 1 {
            0.0
        } else {
            round(scalar, 9)
        };
        offsets.extend(std::iter::repeat_n(0.0, ranks - 1));
        offsets.push(scalar);
        scalar
    }
}

/// One sample's normalised scalar fields.
#[derive(Clone, Copy)]
struct SampleValues {
    gap: f64,
    skew: f64,
    before: f64,
    overlap: f64,
    pressure: f64,
    observed: f64,
    uncertain: bool,
}

impl SampleValues {
    /// The scalars in the order classes hash and compare them.
    #[inline]
    fn scalars(&self) -> [f64; 6] {
        [
            self.gap,
            self.skew,
            self.before,
            self.overlap,
            self.pressure,
            self.observed,
        ]
    }
}

/// Sample stage 3: event `i`'s scalar fields, rounded (missing compute
/// fields 0, missing pressure 0.5, a missing observation stays `NaN`).
#[inline]
fn sample_values(ev: &Events, i: usize, flags: u8, skew: f64, gap: f64) -> SampleValues {
    let or_zero = |v: f64| if v.is_nan() { 0.0 } else { round(v, 9) };
    let pressure = ev.compute_pressure[i];
    let observed = ev.observed_exposed_us[i];
    SampleValues {
        gap,
        skew,
        before: or_zero(ev.compute_before_us[i]),
        overlap: or_zero(ev.compute_overlap_us[i]),
        pressure: if pressure.is_nan() {
            0.5
        } else {
            round(pressure, 6)
        },
        observed: if observed.is_nan() {
            observed
        } else {
            round(observed, 9)
        },
        uncertain: flags & flag::FIELDS_UNCERTAIN != 0,
    }
}

/// A sample about to be added: its position `k`, signature, rank count,
/// where its offsets start in [`Samples::offsets`] (already appended) and
/// its scalar fields.
struct NewSample {
    k: usize,
    sig: u32,
    ranks: usize,
    at: u32,
    values: SampleValues,
}

/// The word a value contributes to a class hash: `+ 0.0` folds -0.0 into
/// 0.0, so equality is numeric, as in Python; every `NaN` is one word.
#[inline]
fn class_word(v: f64) -> u64 {
    if v.is_nan() {
        u64::MAX
    } else {
        (v + 0.0).to_bits()
    }
}

/// Sample classes under construction: hash → first class with that hash;
/// classes with equal hashes are chained and compared value by value.
#[derive(Default)]
struct Classes {
    by_hash: FxHashMap<u64, u32>,
    /// The first sample of each class.
    rep: Vec<u32>,
    /// The next class with the same hash, or `u32::MAX`.
    next: Vec<u32>,
}

impl Classes {
    /// Sample stage 4: the class of `new` among the samples `s` holds so far
    /// (a new class when none is equal to it).
    #[inline]
    fn classify(&mut self, s: &Samples, new: &NewSample) -> u32 {
        let at = new.at as usize;
        let scalars = new.values.scalars();
        let uncertain = new.values.uncertain;
        let hash = hash_words(
            scalars
                .iter()
                .map(|&v| class_word(v))
                .chain([u64::from(uncertain)])
                .chain(s.offsets[at..].iter().map(|&v| class_word(v))),
        );
        let same = |rep: usize| -> bool {
            [
                s.gap[rep],
                s.skew[rep],
                s.before[rep],
                s.overlap[rep],
                s.pressure[rep],
                s.observed[rep],
            ]
            .iter()
            .zip(scalars)
            .all(|(&a, b)| class_word(a) == class_word(b))
                && s.uncertain[rep] == uncertain
                && s.offsets_of(rep, new.ranks)
                    .iter()
                    .zip(&s.offsets[at..])
                    .all(|(&a, &b)| class_word(a) == class_word(b))
        };
        let mut last_in_chain = u32::MAX;
        if let Some(&head) = self.by_hash.get(&hash) {
            let mut c = head;
            while c != u32::MAX {
                let rep = self.rep[c as usize] as usize;
                if s.signature[rep] == new.sig && same(rep) {
                    return c;
                }
                last_in_chain = c;
                c = self.next[c as usize];
            }
        }
        let class = self.rep.len() as u32;
        self.rep.push(new.k as u32);
        self.next.push(u32::MAX);
        if last_in_chain == u32::MAX {
            self.by_hash.insert(hash, class);
        } else {
            self.next[last_in_chain as usize] = class;
        }
        class
    }
}

impl Samples {
    /// Sample stage 5: appends `new` as a sample of class `class`.
    #[inline]
    fn push(&mut self, new: &NewSample, class: u32) {
        let v = &new.values;
        self.signature.push(new.sig);
        self.gap.push(v.gap);
        self.skew.push(v.skew);
        self.before.push(v.before);
        self.overlap.push(v.overlap);
        self.pressure.push(v.pressure);
        self.observed.push(v.observed);
        self.uncertain.push(v.uncertain);
        self.offsets_at.push(new.at);
        self.class.push(class);
    }
}

/// Hashes a sequence of words (sample class keys; equal hashes are then
/// compared value by value, so the hash never decides a class).
fn hash_words(words: impl IntoIterator<Item = u64>) -> u64 {
    let mut h = FxHasher::default();
    for w in words {
        h.write_u64(w);
    }
    h.finish()
}
