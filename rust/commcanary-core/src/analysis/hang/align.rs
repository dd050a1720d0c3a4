//! Per process group, the ranks' calls aligned by sequence number: the
//! partial collectives (present and missing members), the mismatches (op,
//! dtype or sizes disagreeing at one sequence number, decided by a vote over
//! every member, never by trusting one rank), and the p2p calls whose
//! partner never posted the matching call.
//!
//! A member absent from a sequence number is *missing* only when its
//! evidence shows it did not get there (its last recorded sequence number in
//! the group is lower, or its evidence covers that time and holds nothing of
//! the group), or when it has no evidence at all and the call is still in
//! flight on the present members (a call that completed had every member);
//! an absence inside its record (a rotated ring, a gap between profiling
//! windows) is unknown, not missing. After the first mismatch in a group its later sequence numbers
//! are not compared (their pairing is no longer meaningful).

use std::collections::BTreeMap;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::model::{Model, NONE, Op, Source};

/// A call seen on some members only.
#[derive(Debug, Clone, PartialEq)]
pub struct Partial {
    /// Group index.
    pub group: usize,
    /// Sequence number (p2p: the p2p sequence number of the unmatched call).
    pub seq: i64,
    /// Point-to-point.
    pub p2p: bool,
    /// Op, as the present members have it.
    pub op: &'static str,
    /// Members that issued it.
    pub present: Vec<i64>,
    /// Members that did not get there (in time: see [`Partial::late`]).
    pub missing: Vec<i64>,
    /// The missing members that did issue the call, but only after the
    /// first member had waited longer than the collective timeout: the
    /// others had given up before they came (a frozen or stalled rank).
    pub late: Vec<i64>,
    /// Whether a present member still has it in flight.
    pub pending: bool,
    /// When the first present member issued it (ns), 0 when unknown.
    pub time_ns: i64,
    /// Its step on the present members (the most common), −1 when unknown.
    pub step: i64,
}

/// One member's view of a mismatched collective (texts interned in the
/// model).
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// Rank.
    pub rank: i64,
    /// Op.
    pub op: &'static str,
    /// Input sizes.
    pub in_sizes: u32,
    /// Output sizes.
    pub out_sizes: u32,
    /// Input dtypes.
    pub in_dtypes: u32,
    /// Output dtypes.
    pub out_dtypes: u32,
}

/// Members disagreeing at one sequence number.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// Group index.
    pub group: usize,
    /// Sequence number.
    pub seq: i64,
    /// `op`, `dtype`, `size` or `root`.
    pub kind: &'static str,
    /// The members that agree with the most members (empty on a tie).
    pub majority: Vec<i64>,
    /// The others.
    pub minority: Vec<i64>,
    /// Every present member's call.
    pub seen: Vec<Seen>,
    /// Whether a member still has it in flight.
    pub pending: bool,
    /// Its step (the most common among members), −1 when unknown.
    pub step: i64,
}

/// A collective every member issued, alike as far as the evidence records
/// it, that some members completed while others stayed in it (or that
/// every member issued and none completed): the members disagreed on
/// something the evidence does not record (a broadcast's root, a buffer),
/// or the call broke on the members still in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Broken {
    /// Group index.
    pub group: usize,
    /// Sequence number.
    pub seq: i64,
    /// Op.
    pub op: &'static str,
    /// Members still in it.
    pub stuck: Vec<i64>,
    /// Members that completed it (none when every member is still in it).
    pub done: Vec<i64>,
    /// Its step (the most common among members), −1 when unknown.
    pub step: i64,
}

/// A send and the receive it pairs with (the k-th from a to b, the k-th
/// b receives from a) both posted and both still in flight: they never
/// matched (a transfer one side skipped earlier shifted the pairing, or
/// the two disagree on a tag or a size).
#[derive(Debug, Clone, PartialEq)]
pub struct StuckPair {
    /// Group index.
    pub group: usize,
    /// The sending rank.
    pub sender: i64,
    /// The receiving rank.
    pub receiver: i64,
    /// The send's p2p sequence number.
    pub send_seq: i64,
    /// The receive's p2p sequence number.
    pub recv_seq: i64,
    /// The send's step, −1 when unknown.
    pub step: i64,
}

/// What the alignment found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Alignment {
    /// Partial collectives and unmatched p2p calls, by group then sequence.
    pub partials: Vec<Partial>,
    /// Collectives some members completed and others stayed in, by group
    /// then sequence.
    pub broken: Vec<Broken>,
    /// Sends and receives that pair but are both stuck.
    pub stuck_pairs: Vec<StuckPair>,
    /// Roots' last collectives that depart from their own loop (filled
    /// when the roots are found, see [`super::departure`]).
    pub departures: Vec<super::departure::Departure>,
    /// Mismatches, by group then sequence.
    pub mismatches: Vec<Mismatch>,
    /// Mismatches a trace-only rank shows against dumped ranks, which a
    /// trace cannot decide alone (see `only_estimated`): corroborated only
    /// by a backend's own mismatch report.
    pub unconfirmed: Vec<Mismatch>,
    /// Collective instances compared.
    pub compared: u64,
    /// Sequence numbers not compared after a group's first mismatch.
    pub skipped_after_mismatch: u64,
}

/// One member's collectives of one group, sorted by sequence number.
struct Track<'a> {
    rank: i64,
    by_seq: &'a [(i64, &'a Op)],
    evidence: bool,
    covers_from_ns: i64,
    from_start: bool,
}

impl<'a> Track<'a> {
    fn first(&self) -> Option<i64> {
        self.by_seq.first().map(|(s, _)| *s)
    }

    fn last(&self) -> Option<i64> {
        self.by_seq.last().map(|(s, _)| *s)
    }
}

/// Per rank, per group, its collectives sorted by sequence number.
type ByGroup<'a> = FxHashMap<i64, FxHashMap<usize, Vec<(i64, &'a Op)>>>;
/// Per rank, per group, its point-to-point calls in call order.
type P2pByGroup<'a> = FxHashMap<i64, FxHashMap<usize, Vec<&'a Op>>>;

/// Each rank's ops split by group, in parallel over ranks (a job has
/// thousands of ranks and groups; every later pass looks up, never scans).
fn by_group(model: &Model) -> (ByGroup<'_>, P2pByGroup<'_>) {
    let per_rank: Vec<_> = model
        .ranks
        .par_iter()
        .filter(|(_, e)| e.source.is_some())
        .map(|(&r, e)| {
            let mut groups: FxHashMap<usize, Vec<(i64, &Op)>> = FxHashMap::default();
            let mut p2p: FxHashMap<usize, Vec<&Op>> = FxHashMap::default();
            for o in &e.ops {
                if o.p2p {
                    p2p.entry(o.group).or_default().push(o);
                } else if o.seq > 0 {
                    groups.entry(o.group).or_default().push((o.seq, o));
                }
            }
            for list in groups.values_mut() {
                list.sort_by_key(|(s, _)| *s);
                list.dedup_by_key(|(s, _)| *s);
            }
            (r, groups, p2p)
        })
        .collect();
    let mut collectives = ByGroup::default();
    let mut p2p = P2pByGroup::default();
    for (r, groups, calls) in per_rank {
        collectives.insert(r, groups);
        p2p.insert(r, calls);
    }
    (collectives, p2p)
}

/// Aligns every group of `model`.
#[must_use]
pub fn align(model: &Model) -> Alignment {
    let (grouped, p2p) = by_group(model);
    let per_group: Vec<Alignment> = (0..model.groups.len())
        .into_par_iter()
        .map(|gi| {
            let mut out = Alignment::default();
            align_group(model, &grouped, gi, &mut out);
            p2p_unmatched(model, &p2p, gi, &mut out);
            out
        })
        .collect();
    let mut out = Alignment::default();
    for a in per_group {
        out.partials.extend(a.partials);
        out.broken.extend(a.broken);
        out.stuck_pairs.extend(a.stuck_pairs);
        out.mismatches.extend(a.mismatches);
        out.unconfirmed.extend(a.unconfirmed);
        out.compared += a.compared;
        out.skipped_after_mismatch += a.skipped_after_mismatch;
    }
    out
}

fn tracks<'a>(model: &'a Model, grouped: &'a ByGroup<'a>, gi: usize) -> Vec<Track<'a>> {
    model.groups[gi]
        .ranks
        .iter()
        .map(|&rank| {
            let ev = model.ranks.get(&rank).filter(|e| e.source.is_some());
            let by_seq = grouped
                .get(&rank)
                .and_then(|g| g.get(&gi))
                .map_or(&[][..], Vec::as_slice);
            Track {
                rank,
                by_seq,
                evidence: ev.is_some(),
                covers_from_ns: ev.map_or(0, |e| e.covers_from_ns),
                from_start: ev.is_some_and(|e| e.from_start),
            }
        })
        .collect()
}

fn align_group(model: &Model, grouped: &ByGroup<'_>, gi: usize, out: &mut Alignment) {
    let tracks = tracks(model, grouped, gi);
    let lo = tracks.iter().filter_map(Track::first).max().unwrap_or(1);
    let mut seqs: Vec<i64> = tracks
        .iter()
        .flat_map(|t| t.by_seq.iter().map(|(s, _)| *s).filter(|&s| s >= lo))
        .collect();
    seqs.sort_unstable();
    seqs.dedup();
    let mut mismatched = false;
    // Each track's position: sequence numbers only grow, so every track is
    // walked once instead of searched once per number.
    let mut at = vec![0usize; tracks.len()];
    let mut here: Vec<Option<&Op>> = vec![None; tracks.len()];
    for s in seqs {
        if mismatched {
            out.skipped_after_mismatch += 1;
            continue;
        }
        out.compared += 1;
        for ((t, i), op) in tracks.iter().zip(&mut at).zip(&mut here) {
            while t.by_seq.get(*i).is_some_and(|(q, _)| *q < s) {
                *i += 1;
            }
            *op = t.by_seq.get(*i).filter(|(q, _)| *q == s).map(|(_, o)| *o);
        }
        let issued: Vec<(i64, &Op)> = tracks
            .iter()
            .zip(&here)
            .filter_map(|(t, o)| o.map(|o| (t.rank, o)))
            .collect();
        let first_ns = issued
            .iter()
            .map(|(_, o)| o.time_ns)
            .filter(|&t| t > 0)
            .min()
            .unwrap_or(0);
        let (present, late) = split_late(issued, first_ns);
        // A collective that completed had every member, evidence or not.
        let in_flight = present.iter().any(|(_, o)| o.pending);
        let mut missing: Vec<i64> = tracks
            .iter()
            .zip(&here)
            .filter(|(t, o)| o.is_none() && (t.evidence || in_flight) && is_missing(t, s, first_ns))
            .map(|(t, _)| t.rank)
            .collect();
        missing.extend(&late);
        missing.sort_unstable();
        let found = vote(gi, s, &present).or_else(|| root_vote(gi, s, &present));
        if found.is_none()
            && let Some(b) = broken(
                gi,
                s,
                &present,
                missing.is_empty() && dumped(model, &present),
            )
        {
            out.broken.push(b);
        }
        match found.map(|m| trust_dumps(model, m)) {
            Some(m) if only_estimated(model, &m) => out.unconfirmed.push(m),
            Some(m) => {
                out.mismatches.push(m);
                mismatched = true;
            }
            None => {}
        }
        if !missing.is_empty() {
            out.partials.push(Partial {
                group: gi,
                seq: s,
                p2p: false,
                op: present[0].1.op,
                present: present.iter().map(|(r, _)| *r).collect(),
                missing,
                late,
                pending: present.iter().any(|(_, o)| o.pending),
                time_ns: first_ns,
                step: common_step(present.iter().map(|(_, o)| o.step)),
            });
        }
    }
}

/// Whether every one of `present` is known from a Flight Recorder dump,
/// whose in-flight state is the call's (a trace's last calls are
/// incomplete where its window was cut).
fn dumped(model: &Model, present: &[(i64, &Op)]) -> bool {
    present.iter().all(|(r, _)| {
        model
            .ranks
            .get(r)
            .is_some_and(|e| e.source == Some(Source::FlightRecorder))
    })
}

/// The collective at `s` when some present members completed it and others
/// are still in it, or (`whole`: no member missing, all dumped) all are
/// still in it.
fn broken(gi: usize, s: i64, present: &[(i64, &Op)], whole: bool) -> Option<Broken> {
    let (stuck, done): (Vec<_>, Vec<_>) = present.iter().partition(|(_, o)| o.pending);
    // Every member in it and none through counts too, when every member
    // issued it: nobody is missing, yet it does not finish.
    if stuck.is_empty() || (done.is_empty() && !whole) {
        return None;
    }
    Some(Broken {
        group: gi,
        seq: s,
        op: present[0].1.op,
        stuck: stuck.iter().map(|(r, _)| *r).collect(),
        done: done.iter().map(|(r, _)| *r).collect(),
        step: common_step(present.iter().map(|(_, o)| o.step)),
    })
}

/// The members that issued a collective in time, and those that issued it
/// only after the first member had waited past the collective's timeout.
fn split_late(issued: Vec<(i64, &Op)>, first_ns: i64) -> (Vec<(i64, &Op)>, Vec<i64>) {
    let in_time = |o: &Op| {
        o.timeout_ms <= 0
            || first_ns <= 0
            || o.time_ns <= 0
            || o.time_ns - first_ns <= o.timeout_ms.saturating_mul(1_000_000)
    };
    if issued.iter().all(|(_, o)| in_time(o)) {
        return (issued, Vec::new());
    }
    let (present, late): (Vec<_>, Vec<_>) = issued.into_iter().partition(|(_, o)| in_time(o));
    (present, late.into_iter().map(|(r, _)| r).collect())
}

fn is_missing(t: &Track<'_>, s: i64, first_ns: i64) -> bool {
    if !t.evidence {
        return true;
    }
    match t.last() {
        Some(last) => s > last,
        None => {
            t.from_start || (t.covers_from_ns > 0 && first_ns > 0 && t.covers_from_ns <= first_ns)
        }
    }
}

/// The most common known step.
fn common_step(steps: impl Iterator<Item = i64>) -> i64 {
    let mut count: BTreeMap<i64, usize> = BTreeMap::new();
    for s in steps.filter(|&s| s >= 0) {
        *count.entry(s).or_default() += 1;
    }
    count
        .into_iter()
        .max_by_key(|&(s, n)| (n, std::cmp::Reverse(s)))
        .map_or(-1, |(s, _)| s)
}

/// The parts of a call that must agree across members.
type Signature = (&'static str, (u32, u32), (u32, u32));

/// Which parts of a call must agree across members: op, dtypes, sizes.
/// Whether members of `op` must agree on sizes (not where each member's
/// sizes may differ, or are unknown).
fn sizes_matter(op: &str) -> bool {
    !matches!(
        op,
        "all_to_all" | "gather" | "scatter" | "coalesced" | "other"
    )
}

fn signature(o: &Op) -> Signature {
    let sizes = if sizes_matter(o.op) {
        (o.in_sizes, o.out_sizes)
    } else {
        (NONE, NONE)
    };
    (o.op, (o.in_dtypes, o.out_dtypes), sizes)
}

fn vote(gi: usize, s: i64, present: &[(i64, &Op)]) -> Option<Mismatch> {
    if present.len() < 2 {
        return None;
    }
    // The common case, without building the classes: everyone agrees
    // (the fields `signature` compares, the op's size rule decided once).
    let f = present[0].1;
    let sized = sizes_matter(f.op);
    let agrees = |o: &Op| {
        o.op == f.op
            && (o.in_dtypes, o.out_dtypes) == (f.in_dtypes, f.out_dtypes)
            && (!sized || (o.in_sizes, o.out_sizes) == (f.in_sizes, f.out_sizes))
    };
    if present.iter().all(|(_, o)| agrees(o)) {
        return None;
    }
    let mut classes: BTreeMap<Signature, Vec<i64>> = BTreeMap::new();
    for (r, o) in present {
        classes.entry(signature(o)).or_default().push(*r);
    }
    if classes.len() < 2 {
        return None;
    }
    let mut ordered: Vec<_> = classes.iter().collect();
    ordered.sort_by_key(|(_, ranks)| std::cmp::Reverse(ranks.len()));
    let (best, best_ranks) = ordered[0];
    let tie = ordered[1].1.len() == best_ranks.len();
    let other = ordered[1].0;
    let kind = if best.0 != other.0 {
        "op"
    } else if best.1 != other.1 {
        "dtype"
    } else {
        "size"
    };
    let mut majority: Vec<i64> = if tie { Vec::new() } else { best_ranks.clone() };
    majority.sort_unstable();
    let mut minority: Vec<i64> = present
        .iter()
        .map(|(r, _)| *r)
        .filter(|r| majority.binary_search(r).is_err())
        .collect();
    minority.sort_unstable();
    Some(mismatch(gi, s, kind, (majority, minority), present))
}

/// A mismatch at `s` of group `gi` with every present member's call.
fn mismatch(
    gi: usize,
    s: i64,
    kind: &'static str,
    (majority, minority): (Vec<i64>, Vec<i64>),
    present: &[(i64, &Op)],
) -> Mismatch {
    Mismatch {
        group: gi,
        seq: s,
        kind,
        majority,
        minority,
        seen: present
            .iter()
            .map(|(r, o)| Seen {
                rank: *r,
                op: o.op,
                in_sizes: o.in_sizes,
                out_sizes: o.out_sizes,
                in_dtypes: o.in_dtypes,
                out_dtypes: o.out_dtypes,
            })
            .collect(),
        pending: present.iter().any(|(_, o)| o.pending),
        step: common_step(present.iter().map(|(_, o)| o.step)),
    }
}

/// A minority with dumped members keeps only those: a trace-only member's
/// call there is paired by an estimated number (gloo), and its
/// disagreement with the dumps is no evidence against it.
fn trust_dumps(model: &Model, mut m: Mismatch) -> Mismatch {
    let source = |r: &i64| model.ranks.get(r).and_then(|e| e.source);
    if m.majority.is_empty()
        || !m
            .minority
            .iter()
            .any(|r| source(r) == Some(Source::FlightRecorder))
    {
        return m;
    }
    m.minority.retain(|r| source(r) != Some(Source::Trace));
    m
}

/// Whether a mismatch rests only on ranks known from traces while a dumped
/// rank is in the majority: a trace's sequence numbers are estimates
/// (gloo) that may pair the wrong calls, and the two recorders write sizes
/// differently (a coalesced broadcast is one tensor in a dump, the list in
/// a trace), so a trace cannot outvote a dump.
fn only_estimated(model: &Model, m: &Mismatch) -> bool {
    let source = |r: &i64| model.ranks.get(r).and_then(|e| e.source);
    let all =
        |ranks: &[i64], s: Source| !ranks.is_empty() && ranks.iter().all(|r| source(r) == Some(s));
    let traced_minority = all(&m.minority, Source::Trace)
        && m.majority
            .iter()
            .any(|r| source(r) == Some(Source::FlightRecorder));
    // The sides split exactly along the two recorders: their disagreement
    // may be how each writes the call, not the call.
    let split = if m.majority.is_empty() {
        // A tie: each side is the members that wrote the call alike.
        let mut sides: BTreeMap<(&str, u32, u32, u32, u32), Vec<i64>> = BTreeMap::new();
        for x in &m.seen {
            sides
                .entry((x.op, x.in_sizes, x.out_sizes, x.in_dtypes, x.out_dtypes))
                .or_default()
                .push(x.rank);
        }
        let pure =
            |ranks: &Vec<i64>| all(ranks, Source::Trace) || all(ranks, Source::FlightRecorder);
        sides.len() > 1
            && sides.values().all(pure)
            && sides.values().any(|r| all(r, Source::Trace))
            && sides.values().any(|r| all(r, Source::FlightRecorder))
    } else {
        all(&m.minority, Source::FlightRecorder) && all(&m.majority, Source::Trace)
    };
    traced_minority || split
}

/// Members of a rooted collective that agree on op, dtypes and sizes but
/// not on its root (a broadcast from another source): decided by a vote
/// over the members whose root is known.
fn root_vote(gi: usize, s: i64, present: &[(i64, &Op)]) -> Option<Mismatch> {
    let known: Vec<(i64, &Op)> = present
        .iter()
        .filter(|(_, o)| o.root >= 0 && super::trace::rooted(o.op))
        .copied()
        .collect();
    if known.len() < 2 || known.iter().all(|(_, o)| o.root == known[0].1.root) {
        return None;
    }
    let mut by_root: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for (r, o) in &known {
        by_root.entry(o.root).or_default().push(*r);
    }
    let mut ordered: Vec<(&i64, &Vec<i64>)> = by_root.iter().collect();
    ordered.sort_by_key(|(_, ranks)| std::cmp::Reverse(ranks.len()));
    let tie = ordered[1].1.len() == ordered[0].1.len();
    let majority: Vec<i64> = if tie {
        Vec::new()
    } else {
        ordered[0].1.clone()
    };
    let minority: Vec<i64> = known
        .iter()
        .map(|(r, _)| *r)
        .filter(|r| !majority.contains(r))
        .collect();
    Some(mismatch(gi, s, "root", (majority, minority), present))
}

/// Pending p2p calls whose partner has evidence but never posted the
/// matching call (the k-th send from a to b pairs with b's k-th receive
/// from a), and the first pair of each direction whose two sides are both
/// pending.
fn p2p_unmatched(model: &Model, p2p: &P2pByGroup<'_>, gi: usize, out: &mut Alignment) {
    let ranks = &model.groups[gi].ranks;
    let global = |peer: i64| {
        usize::try_from(peer)
            .ok()
            .and_then(|p| ranks.get(p))
            .copied()
    };
    let mut posted: BTreeMap<(i64, i64, bool), Vec<&Op>> = BTreeMap::new();
    for &r in ranks {
        let calls = p2p.get(&r).and_then(|g| g.get(&gi));
        for &o in calls.map_or(&[][..], Vec::as_slice) {
            let peer = match (o.peer, o.peer_is_global) {
                (p, true) if p >= 0 => Some(p),
                (p, false) if p >= 0 => global(p),
                _ => None,
            };
            let Some(peer) = peer else { continue };
            match o.op {
                "send" => posted.entry((r, peer, true)).or_default().push(o),
                "recv" => posted.entry((peer, r, false)).or_default().push(o),
                _ => {}
            }
        }
    }
    for (&(src, dst, is_send), calls) in &posted {
        let (me, partner) = if is_send { (src, dst) } else { (dst, src) };
        if model.ranks.get(&partner).is_none_or(|e| e.source.is_none()) {
            continue;
        }
        let counterparts = posted
            .get(&(src, dst, !is_send))
            .map_or(&[][..], Vec::as_slice);
        if is_send
            && let Some((s, r)) = calls
                .iter()
                .zip(counterparts)
                .find(|(s, r)| s.pending && r.pending)
        {
            out.stuck_pairs.push(StuckPair {
                group: gi,
                sender: src,
                receiver: dst,
                send_seq: s.seq,
                recv_seq: r.seq,
                step: s.step,
            });
        }
        let matched = counterparts.len();
        for o in calls.iter().skip(matched).filter(|o| o.pending) {
            out.partials.push(Partial {
                group: gi,
                seq: o.seq,
                p2p: true,
                op: o.op,
                present: vec![me],
                missing: vec![partner],
                late: Vec::new(),
                pending: true,
                time_ns: o.time_ns,
                step: o.step,
            });
        }
    }
}
