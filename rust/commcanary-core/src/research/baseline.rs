//! The reference's baselines (spec §7.2): stand-ins for a workload that keep
//! some of it and lose the rest, which behaviour verification must refuse.
//!
//! Every event has a *shape* (phase, op, dtype, reduction op, bytes, ranks,
//! group, root, sender, receiver, tag, channel; `isolated` ignores the
//! phase) and a feature vector (gap, arrival skew, compute before, compute
//! overlap, compute pressure). The gap is the event's `gap_us`, else its
//! `compute_before_us`, else 0 (the reference's rule; [`Gaps::Observed`]
//! takes the start-to-start gap the compiler derives instead). Distances
//! are L1 over features each divided by `max(1, max |x|)`; a feature
//! "median" is the median per feature (the mean of the middle two for an
//! even count).
//!
//! Output events copy the fields in [`COPIED`] from the event they stand
//! for, fill `phase`, `group` and `concurrent_groups` defaults, and get a
//! new `id`, a `gap_us` and a `metadata` saying what they are. Events are
//! written in input order, one per input event (`isolated`: one per shape;
//! `random --partial`: one per sampled event).

use rustc_hash::FxHashMap;

use super::pyrandom::PyRandom;
use super::{EventOut, OutputTrace};
use crate::compile::samples::order_events;
use crate::error::{Error, Result};
use crate::json::Doc;
use crate::pyfloat::py_sum;
use crate::trace::{Signature, Trace, flag};

/// Fields an output event copies from its source event, when present.
pub const COPIED: [&str; 21] = [
    "arrival_skew_us",
    "bytes",
    "channel",
    "compute_before_us",
    "compute_overlap_unknown",
    "compute_overlap_us",
    "compute_pressure",
    "concurrent_groups",
    "custom_op",
    "group",
    "message_sequence",
    "observed_exposed_us",
    "op",
    "phase",
    "rank_arrival_us",
    "rank_count",
    "ranks",
    "receiver_rank",
    "root_rank",
    "sender_rank",
    "tag",
];

/// A baseline method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// One event per distinct shape, as a microbenchmark would run it.
    Isolated,
    /// A random sample of events, repeated to the trace's length.
    Random,
    /// Each shape's most typical event everywhere.
    Frequency,
    /// Per shape, up to K cluster representatives.
    Cluster,
    /// Per shape, one random event per feature stratum.
    Stratified,
}

impl Method {
    /// The CLI name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Isolated => "isolated",
            Self::Random => "random",
            Self::Frequency => "frequency",
            Self::Cluster => "cluster",
            Self::Stratified => "stratified",
        }
    }

    /// The name in notes and metadata.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::Isolated => "isolated_collective",
            Self::Random => "random_sampling",
            Self::Frequency => "frequency_representative",
            Self::Cluster => "clustering_representative",
            Self::Stratified => "stratified_sampling",
        }
    }

    /// The method named `name`.
    ///
    /// # Errors
    /// An unknown name.
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "isolated" => Self::Isolated,
            "random" => Self::Random,
            "frequency" => Self::Frequency,
            "cluster" => Self::Cluster,
            "stratified" => Self::Stratified,
            _ => {
                return Err(Error::invalid(format!(
                    "unknown baseline method '{name}' (expected isolated, random, frequency, cluster or stratified)"
                )));
            }
        })
    }
}

/// Where an event's gap comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Gaps {
    /// `gap_us`, else `compute_before_us`, else 0 (the reference's).
    #[default]
    Reference,
    /// The start-to-start gap the compiler derives (timestamped traces keep
    /// their real gaps).
    Observed,
}

/// What to build.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The method.
    pub method: Method,
    /// `random`: events sampled (≥ 1).
    pub sample_count: usize,
    /// `random`: write only the sample.
    pub partial: bool,
    /// `cluster`: clusters per shape (≥ 1).
    pub cluster_count: usize,
    /// `stratified`: strata per shape (≥ 1).
    pub strata_per_group: usize,
    /// `random`, `stratified`: the seed of `random.Random`.
    pub seed: i64,
    /// Gap source.
    pub gaps: Gaps,
}

impl Options {
    /// Options from a caller's values (signed counts, names as strings).
    ///
    /// # Errors
    /// An unknown method or gap source, or a count below 1, each named.
    #[allow(clippy::too_many_arguments)]
    pub fn requested(
        method: &str,
        sample_count: i64,
        partial: bool,
        cluster_count: i64,
        strata_per_group: i64,
        seed: i64,
        gaps: &str,
    ) -> Result<Self> {
        let count = |name: &'static str, v: i64| {
            crate::compile::checked_count(name, Some(v), 1).map(|n| n as usize)
        };
        Ok(Self {
            method: Method::parse(method)?,
            sample_count: count("sample_count", sample_count)?,
            partial,
            cluster_count: count("cluster_count", cluster_count)?,
            strata_per_group: count("strata_per_group", strata_per_group)?,
            seed,
            gaps: match gaps {
                "reference" => Gaps::Reference,
                "observed" => Gaps::Observed,
                _ => return Err(Error::option("gaps", "must be 'reference' or 'observed'")),
            },
        })
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            method: Method::Isolated,
            sample_count: 8,
            partial: false,
            cluster_count: 8,
            strata_per_group: 4,
            seed: 0,
            gaps: Gaps::Reference,
        }
    }
}

/// Features of one event.
type Features = [f64; 5];

/// The events as the methods see them.
struct Population {
    /// Shape of each event.
    shape: Vec<usize>,
    /// Members of each shape in input order, shapes in first-appearance order.
    members: Vec<Vec<usize>>,
    features: Vec<Features>,
    gaps: Vec<f64>,
}

/// One output event: the source event it copies, its gap, its metadata.
struct Pick {
    source: usize,
    gap: f64,
    metadata: Vec<(&'static str, i64)>,
}

/// Builds the baseline trace of `trace`.
///
/// # Errors
/// Bad options, an empty trace, an event with unknown compute overlap
/// (except `isolated`), a trace whose gaps the compiler refuses
/// ([`Gaps::Observed`]).
pub fn baseline(trace: &Trace, options: &Options) -> Result<Trace> {
    check(trace, options)?;
    let isolated = options.method == Method::Isolated;
    let pop = population(trace, options.gaps, isolated)?;
    if isolated {
        return isolated_trace(trace, &pop);
    }
    let picks = match options.method {
        Method::Random => random(&pop, options),
        Method::Frequency => frequency(&pop),
        Method::Cluster => cluster(&pop, options.cluster_count),
        Method::Stratified => stratified(&pop, options),
        Method::Isolated => unreachable!("handled above"),
    };
    let mut out = OutputTrace::new();
    let mut doc = Doc::new();
    let label = options.method.label();
    for (i, p) in picks.iter().enumerate() {
        let mut e = copied(trace, p.source, &mut doc)?;
        e.set_f64("gap_us", p.gap);
        e.set_str("id", &format!("{}-{i:06}", id_prefix(options.method)));
        e.set_raw("metadata", metadata(label, &p.metadata));
        out.push(e);
    }
    finish(out, trace, options.method)
}

fn check(trace: &Trace, options: &Options) -> Result<()> {
    if trace.events.is_empty() {
        return Err(Error::invalid(
            "a baseline needs a trace with at least one event",
        ));
    }
    for (name, value) in [
        ("sample_count", options.sample_count),
        ("cluster_count", options.cluster_count),
        ("strata_per_group", options.strata_per_group),
    ] {
        if value == 0 {
            return Err(Error::option(name, "must be at least 1"));
        }
    }
    if options.method != Method::Isolated
        && let Some(i) = (trace.events.flags.iter()).position(|f| f & flag::OVERLAP_UNKNOWN != 0)
    {
        return Err(Error::invalid(format!(
            "trace event {i} has unknown compute overlap; the {} baseline keeps overlap, so a measured or deliberately constructed compute_overlap_us value is required",
            options.method.name()
        )));
    }
    Ok(())
}

fn id_prefix(method: Method) -> &'static str {
    match method {
        Method::Isolated => "isolated",
        Method::Random => "random-sample",
        Method::Frequency => "frequency-representative",
        Method::Cluster => "cluster-representative",
        Method::Stratified => "stratified-sample",
    }
}

fn metadata(label: &str, extra: &[(&str, i64)]) -> Vec<u8> {
    let mut e = EventOut::default();
    e.set_str("commcanary_baseline", label);
    for &(k, v) in extra {
        e.set_i64(k, v);
    }
    let mut out = Vec::new();
    e.write(&mut out);
    out
}

/// The copied fields of event `i` with the defaults filled.
fn copied(trace: &Trace, i: usize, doc: &mut Doc) -> Result<EventOut> {
    let mut e = EventOut::copy(trace.canonical_json(i), &COPIED, doc)?;
    if !e.has("phase") {
        e.set_str("phase", "unknown");
    }
    if !e.has("group") {
        e.set_str("group", "default");
    }
    if !e.has("concurrent_groups") {
        e.set_i64("concurrent_groups", 1);
    }
    Ok(e)
}

fn finish(out: OutputTrace, trace: &Trace, method: Method) -> Result<Trace> {
    let label = method.label();
    let note = format!(
        "CommCanary research baseline: {label}. Not source-verified against the original trace."
    );
    let mut value = Vec::new();
    crate::json::canon::write_str(&mut value, label);
    out.finish(trace, &note, &[("baseline_method", value)])
}

/// Shapes, features and gaps of every event.
fn population(trace: &Trace, gaps: Gaps, ignore_phase: bool) -> Result<Population> {
    let ev = &trace.events;
    let mut shape_of_signature: Vec<usize> = Vec::with_capacity(trace.signatures.len());
    let mut shapes: FxHashMap<ShapeKey<'_>, usize> = FxHashMap::default();
    for sig in &trace.signatures {
        let key = ShapeKey::of(sig, ignore_phase);
        let next = shapes.len();
        shape_of_signature.push(*shapes.entry(key).or_insert(next));
    }
    // Shapes renumbered by first appearance among the events.
    let mut renumber: Vec<usize> = vec![usize::MAX; shapes.len()];
    let mut members: Vec<Vec<usize>> = Vec::new();
    let mut shape = Vec::with_capacity(ev.len());
    for i in 0..ev.len() {
        let s = shape_of_signature[ev.signature[i] as usize];
        if renumber[s] == usize::MAX {
            renumber[s] = members.len();
            members.push(Vec::new());
        }
        members[renumber[s]].push(i);
        shape.push(renumber[s]);
    }
    let gap = source_gaps(trace, gaps)?;
    let features = (0..ev.len())
        .map(|i| {
            let or = |x: f64, d: f64| if x.is_nan() { d } else { x };
            [
                gap[i],
                skew(trace, i),
                or(ev.compute_before_us[i], 0.0),
                or(ev.compute_overlap_us[i], 0.0),
                or(ev.compute_pressure[i], 0.5),
            ]
        })
        .collect();
    Ok(Population {
        shape,
        members,
        features,
        gaps: gap,
    })
}

/// The shape key: everything but timing, counts and `custom_op`.
#[derive(Hash, PartialEq, Eq)]
struct ShapeKey<'a> {
    phase: &'a [u8],
    op: &'a [u8],
    dtype: Option<&'a [u8]>,
    reduction_op: Option<&'a [u8]>,
    bytes: i64,
    ranks: &'a [i64],
    group: &'a [u8],
    root_rank: Option<&'a [u8]>,
    sender_rank: Option<i64>,
    receiver_rank: Option<i64>,
    tag: Option<&'a [u8]>,
    channel: Option<&'a [u8]>,
}

impl<'a> ShapeKey<'a> {
    fn of(sig: &'a Signature, ignore_phase: bool) -> Self {
        Self {
            phase: if ignore_phase { b"" } else { &sig.phase },
            op: &sig.op,
            dtype: sig.dtype.as_deref(),
            reduction_op: sig.reduction_op.as_deref(),
            bytes: sig.bytes,
            ranks: &sig.ranks,
            group: &sig.group,
            root_rank: sig.root_rank.as_deref(),
            sender_rank: sig.sender_rank,
            receiver_rank: sig.receiver_rank,
            tag: sig.tag.as_deref(),
            channel: sig.channel.as_deref(),
        }
    }
}

/// Each event's source gap (input order).
fn source_gaps(trace: &Trace, gaps: Gaps) -> Result<Vec<f64>> {
    let ev = &trace.events;
    match gaps {
        Gaps::Reference => Ok((0..ev.len())
            .map(|i| {
                [ev.gap_us[i], ev.compute_before_us[i]]
                    .into_iter()
                    .find(|x| !x.is_nan())
                    .unwrap_or(0.0)
            })
            .collect()),
        Gaps::Observed => {
            let ordering = order_events(ev)?;
            let mut out = vec![0.0; ev.len()];
            for (&i, &g) in ordering.order.iter().zip(&ordering.gaps) {
                out[i as usize] = g;
            }
            Ok(out)
        }
    }
}

/// The event's arrival skew: its map's spread, else `arrival_skew_us`, else 0.
fn skew(trace: &Trace, i: usize) -> f64 {
    let ev = &trace.events;
    if ev.flags[i] & flag::HAS_ARRIVAL_MAP != 0 {
        let n = trace.signatures[ev.signature[i] as usize].rank_count();
        let at = ev.arrival_at[i] as usize;
        let values = &ev.arrivals[at..at + n];
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        return hi - lo;
    }
    if ev.arrival_skew_us[i].is_nan() {
        0.0
    } else {
        ev.arrival_skew_us[i]
    }
}

/// The median of `values` (mean of the middle two for an even count).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// `max(1, max |x|)` per feature over `points`.
fn scales<'a>(points: impl Iterator<Item = &'a Features>) -> Features {
    let mut s = [1.0f64; 5];
    for p in points {
        for (s, x) in s.iter_mut().zip(p) {
            *s = s.max(x.abs());
        }
    }
    s
}

fn distance(x: &Features, center: &Features, scale: &Features) -> f64 {
    py_sum((0..5).map(|f| (x[f] - center[f]).abs() / scale[f]))
}

/// The member of `list` nearest the per-feature medians (the earliest on ties).
fn representative(list: &[usize], features: &[Features]) -> usize {
    let mut center = [0.0; 5];
    for (f, c) in center.iter_mut().enumerate() {
        let mut v: Vec<f64> = list.iter().map(|&i| features[i][f]).collect();
        *c = median(&mut v);
    }
    let scale = scales(list.iter().map(|&i| &features[i]));
    let mut best = (f64::INFINITY, list[0]);
    for &i in list {
        let d = distance(&features[i], &center, &scale);
        if d < best.0 {
            best = (d, i);
        }
    }
    best.1
}

/// `list` sorted by feature tuple (stable: input order on ties).
fn by_features(list: &[usize], features: &[Features]) -> Vec<usize> {
    let mut sorted = list.to_vec();
    sorted.sort_by(|&a, &b| {
        (features[a].iter().zip(&features[b]))
            .map(|(x, y)| x.total_cmp(y))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    sorted
}

/// `k` index ranges `[⌊jn/k⌋, ⌊(j+1)n/k⌋)` over `n` items; an empty range
/// holds its start alone.
fn ranges(n: usize, k: usize) -> Vec<std::ops::Range<usize>> {
    (0..k)
        .map(|j| {
            let (a, b) = (j * n / k, (j + 1) * n / k);
            if a < b {
                a..b
            } else {
                a..(a + 1).min(n.max(1))
            }
        })
        .collect()
}

fn isolated_trace(trace: &Trace, pop: &Population) -> Result<Trace> {
    let mut out = OutputTrace::new();
    let mut doc = Doc::new();
    for (i, members) in pop.members.iter().enumerate() {
        let first = members[0];
        let mut e = copied(trace, first, &mut doc)?;
        e.set_str("phase", "isolated_collective");
        e.set_f64("gap_us", 1.0);
        zero_arrivals(trace, first, &mut e);
        e.set_f64("compute_before_us", 0.0);
        e.set_f64("compute_overlap_us", 0.0);
        e.remove("compute_overlap_unknown");
        e.set_f64("compute_pressure", 0.5);
        e.set_i64("concurrent_groups", 1);
        e.remove("observed_exposed_us");
        e.set_str("id", &format!("isolated-{i:06}"));
        e.set_raw("metadata", metadata(Method::Isolated.label(), &[]));
        out.push(e);
    }
    finish(out, trace, Method::Isolated)
}

/// Every arrival 0: a map keeps its form with zeros; a scalar skew is 0.
fn zero_arrivals(trace: &Trace, i: usize, e: &mut EventOut) {
    if e.has("rank_arrival_us") {
        let ranks = &trace.signatures[trace.events.signature[i] as usize].ranks;
        let mut z = EventOut::default();
        for r in ranks {
            z.set_f64(&r.to_string(), 0.0);
        }
        let mut v = Vec::new();
        z.write(&mut v);
        e.set_raw("rank_arrival_us", v);
    }
    if e.has("arrival_skew_us") {
        e.set_f64("arrival_skew_us", 0.0);
    }
}

fn random(pop: &Population, o: &Options) -> Vec<Pick> {
    let n = pop.shape.len();
    let k = o.sample_count.min(n);
    let mut selected = PyRandom::new(o.seed).sample(n, k);
    selected.sort_unstable();
    let count = if o.partial { selected.len() } else { n };
    (0..count)
        .map(|i| {
            let source = selected[i % selected.len()];
            Pick {
                source,
                gap: pop.gaps[source],
                metadata: vec![
                    ("sample_count", k as i64),
                    ("seed", o.seed),
                    ("selected_source_index", source as i64),
                ],
            }
        })
        .collect()
}

fn frequency(pop: &Population) -> Vec<Pick> {
    let reps: Vec<usize> = (pop.members.iter())
        .map(|m| representative(m, &pop.features))
        .collect();
    (0..pop.shape.len())
        .map(|i| {
            let s = pop.shape[i];
            Pick {
                source: reps[s],
                gap: pop.gaps[reps[s]],
                metadata: vec![("source_signature_size", pop.members[s].len() as i64)],
            }
        })
        .collect()
}

fn cluster(pop: &Population, k: usize) -> Vec<Pick> {
    let f = &pop.features;
    let mut out: Vec<Option<Pick>> = (0..pop.shape.len()).map(|_| None).collect();
    for members in &pop.members {
        let candidates: Vec<usize> = if members.len() <= k {
            members.clone()
        } else {
            let sorted = by_features(members, f);
            (ranges(sorted.len(), k).into_iter())
                .map(|r| representative(&sorted[r], f))
                .collect()
        };
        let mut reps: Vec<usize> = Vec::new();
        for c in candidates {
            if !reps.iter().any(|&r| f[r] == f[c]) {
                reps.push(c);
            }
        }
        for &i in members {
            let scale = scales(std::iter::once(&f[i]).chain(reps.iter().map(|&r| &f[r])));
            let mut best = (f64::INFINITY, 0);
            for (j, &r) in reps.iter().enumerate() {
                let d = distance(&f[i], &f[r], &scale);
                if d < best.0 {
                    best = (d, j);
                }
            }
            let rep = reps[best.1];
            out[i] = Some(Pick {
                source: rep,
                gap: pop.gaps[rep],
                metadata: vec![
                    ("cluster_count", reps.len() as i64),
                    ("representative_index", best.1 as i64),
                    ("source_signature_size", members.len() as i64),
                ],
            });
        }
    }
    out.into_iter().flatten().collect()
}

fn stratified(pop: &Population, o: &Options) -> Vec<Pick> {
    let mut rng = PyRandom::new(o.seed);
    let mut out: Vec<Option<Pick>> = (0..pop.shape.len()).map(|_| None).collect();
    for members in &pop.members {
        let sorted = by_features(members, &pop.features);
        let strata = o.strata_per_group.min(sorted.len());
        for (j, r) in ranges(sorted.len(), strata).into_iter().enumerate() {
            let stratum = &sorted[r];
            let sample = stratum[rng.choice(stratum.len())];
            for &i in stratum {
                out[i] = Some(Pick {
                    source: sample,
                    gap: pop.gaps[sample],
                    metadata: vec![
                        ("seed", o.seed),
                        ("strata_per_group", o.strata_per_group as i64),
                        ("stratum_index", j as i64),
                    ],
                });
            }
        }
    }
    out.into_iter().flatten().collect()
}
