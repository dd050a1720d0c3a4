//! Where one rank's steps begin, from its sequence of collective keys alone.
//!
//! A key is a call's (group, op). The method, on one rank's calls in issue
//! order:
//!
//! 1. **Period.** The number of steps `T` is a key's count: of the counts
//!    whose multiples explain at least 90% as many calls as the best (a key
//!    called `m` times per step is called `m·T` times, give or take the `m`
//!    a window opened or closed mid-step loses), the one the most calls
//!    have exactly (the once-per-step keys; a step cut short by a hang
//!    adds one call to some of them), then the largest (a key called every
//!    few steps divides the others' counts too).
//! 2. **Anchors.** The keys called exactly `T` times, in order of first
//!    call. They must repeat as one block `T` times back to back
//!    ([`back_to_back`], the canary encoder's motif test); otherwise the
//!    single anchor whose calls are most evenly spaced is used.
//! 3. **Cut.** The boundary lies in one of the gaps between consecutive
//!    anchors, before one of the gap's *regular* calls (keys called `m`
//!    times per step: `m·T` times, give or take the `m` a window opened or
//!    closed mid-step loses) or before the next anchor. A profiler window
//!    opens at a step boundary (`torch.profiler`'s schedule starts
//!    recording at `step()`), so when the first step looks whole (the gap
//!    before the first anchor holds the typical number of regular calls)
//!    the boundary is at the trace's first structural call. Otherwise the
//!    trace started mid-step, and the candidates are scored: calls that
//!    are neither anchors nor regular are *rare* (every k-th step: logging,
//!    metrics, checkpoints), and loops run them at the end of a step, so a
//!    candidate with rare calls just before it (twice or more over the
//!    job) is preferred; among the preferred (or, with none, among all),
//!    the candidate with the largest median idle time before it wins: the
//!    optimizer, data loading and the loop's own overhead sit at the step
//!    boundary.
//!
//! Calls that are neither (a one-off setup broadcast) never start the first
//! step; one-off calls just before a boundary in the first half of the
//! trace's steps open that step (DDP rebuilds its buckets, and broadcasts
//! them, as its second step starts).
//!
//! Invariants: cuts are ascending call indices; the same sequence gives the
//! same cuts; a sequence with no key called twice, or whose pattern leaves
//! most calls rare, has no steps.

use rustc_hash::FxHashMap;

use crate::compile::motif::back_to_back;

/// Rare calls just before a candidate, over the job, that make it preferred.
const RARE_EVIDENCE: usize = 2;

/// One rank's recovered boundaries.
#[derive(Debug, Clone, PartialEq)]
pub struct RankCut {
    /// Call indices where each step begins, ascending.
    pub cuts: Vec<usize>,
    /// The once-per-step keys, in order of first call.
    pub anchors: Vec<u32>,
    /// The number of steps the counts say (`T`).
    pub period: usize,
}

/// Where the boundary sits in the anchor cycle: before regular call `index`
/// of gap `gap` (the gap before anchor `gap`), or before the anchor itself
/// when `index` is the gap's typical number of regular calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Candidate {
    gap: usize,
    index: usize,
}

/// The sequence and what each key is.
struct Sequence<'a> {
    keys: &'a [u32],
    arrival: &'a [f64],
    end: &'a [f64],
    period: usize,
    /// Positions of anchor calls, in order.
    anchor_at: Vec<usize>,
    anchors: usize,
    /// Per call: anchor, regular or rare.
    role: Vec<Role>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Anchor,
    Regular,
    Rare,
}

/// Recovers one rank's step boundaries; `None` when no key repeats.
#[must_use]
pub fn cut_rank(keys: &[u32], arrival: &[f64], end: &[f64]) -> Option<RankCut> {
    let mut counts: FxHashMap<u32, usize> = FxHashMap::default();
    for &k in keys {
        *counts.entry(k).or_default() += 1;
    }
    let period = period(&counts)?;
    let anchors = anchors(keys, &counts, period);
    let role: Vec<Role> = keys
        .iter()
        .map(|k| {
            if anchors.contains(k) {
                Role::Anchor
            } else if regular(counts[k], period) {
                Role::Regular
            } else {
                Role::Rare
            }
        })
        .collect();
    // A step pattern must explain most of the calls (one step's four
    // all_reduces are not four steps of the rest).
    if 2 * role.iter().filter(|&&r| r == Role::Rare).count() > keys.len() {
        return None;
    }
    let anchor_at: Vec<usize> = (0..keys.len())
        .filter(|&i| role[i] == Role::Anchor)
        .collect();
    let seq = Sequence {
        keys,
        arrival,
        end,
        period,
        anchors: anchors.len(),
        anchor_at,
        role,
    };
    let best = seq.best_candidate();
    let mut cuts = seq.cuts(best);
    open_with_one_offs(&mut cuts, keys, &counts);
    Some(RankCut {
        cuts,
        anchors,
        period,
    })
}

/// Moves each boundary in the first half of the trace's steps (after the
/// first) back over the one-off calls just before it: one-time work
/// between two steps as the loop warms up (DDP's bucket rebuild
/// broadcasts, as its second step starts) opens the next step. Later in
/// the trace a call seen once may be rare work whose next turn the trace
/// did not reach (a metrics all_reduce every few steps), which ends a step.
fn open_with_one_offs(cuts: &mut [usize], keys: &[u32], counts: &FxHashMap<u32, usize>) {
    for i in 1..cuts.len().div_ceil(2) {
        let floor = cuts[i - 1] + 1;
        while cuts[i] > floor && counts[&keys[cuts[i] - 1]] == 1 {
            cuts[i] -= 1;
        }
    }
}

/// Whether a key called `count` times runs a whole number `m ≥ 1` of times
/// per step: `count` is within `m` of `m · period` (a window that opens or
/// closes mid-step loses part of a step).
fn regular(count: usize, period: usize) -> bool {
    let m = (count as f64 / period as f64).round() as usize;
    m >= 1 && count.abs_diff(m * period) <= m
}

/// [`open_with_one_offs`] by sized keys (group or peer, op, elements): a
/// one-off that shares its op and group with a step's calls is seen once
/// by its size, and the one-time work may repeat a call the step already
/// made (DDP's second step opens with its bucket-rebuild broadcasts, one
/// of them the size of a broadcast every step makes). Each boundary in the
/// first half moves back over such repeats and one-offs, to the earliest
/// one-off among them; never when no one-off is there. Not when sizes
/// change from step to step (a decode's growing messages): then most sized
/// keys are seen once, and say nothing of one-off work.
pub fn open_with_sized_one_offs(cuts: &mut [usize], sized: &[u32]) {
    let mut counts: FxHashMap<u32, usize> = FxHashMap::default();
    for &k in sized {
        *counts.entry(k).or_default() += 1;
    }
    let once = sized.iter().filter(|k| counts[k] == 1).count();
    if once == 0 || once * SIZED_ONE_OFFS_AT_MOST > sized.len() {
        return;
    }
    for i in 1..cuts.len().div_ceil(2) {
        let floor = cuts[i - 1] + 1;
        let mut at = cuts[i];
        let mut best = cuts[i];
        while at > floor {
            let k = sized[at - 1];
            let one_off = counts[&k] == 1;
            if !one_off && !sized[floor..at - 1].contains(&k) {
                break;
            }
            at -= 1;
            if one_off {
                best = at;
            }
        }
        cuts[i] = best;
    }
}

/// Sized keys seen once must be at most one call in this many for them to
/// mark one-off work.
const SIZED_ONE_OFFS_AT_MOST: usize = 10;

/// How many of `keys`' calls a `period` explains closely: calls of keys
/// called a whole number `m ≥ 1` of times per step, give or take one call
/// (tighter than [`regular`], whose slack of `m` lets a period explain
/// calls it does not: fifteen reduces are not about three per six steps).
#[must_use]
pub fn explained(keys: &[u32], period: usize) -> usize {
    let mut counts: FxHashMap<u32, usize> = FxHashMap::default();
    for &k in keys {
        *counts.entry(k).or_default() += 1;
    }
    counts
        .values()
        .filter(|&&n| {
            let m = (n as f64 / period as f64).round() as usize;
            m >= 1 && n.abs_diff(m * period) <= 1
        })
        .sum()
}

/// Share of the best explanation a larger period may give up.
pub const PERIOD_SLACK: f64 = 0.9;

/// The number of steps: among the keys' counts, the one whose multiples
/// explain the most calls (a step that sends twice and reduces once has
/// its period in the reduce, not in the sends), the largest such count
/// when several explain nearly as much (a key called every few steps
/// divides the others' counts too, but explains fewer calls).
fn period(counts: &FxHashMap<u32, usize>) -> Option<usize> {
    let mut candidates: Vec<usize> = counts.values().copied().filter(|&c| c >= 2).collect();
    candidates.sort_unstable();
    candidates.dedup();
    let explained =
        |c: usize| -> usize { counts.values().filter(|&&n| regular(n, c)).sum::<usize>() };
    let best = candidates.iter().map(|&c| explained(c)).max()?;
    // Of those, the count the most calls have exactly (the once-per-step
    // keys), then the largest.
    let exact = |c: usize| -> usize { counts.values().filter(|&&n| n == c).sum() };
    candidates
        .into_iter()
        .filter(|&c| explained(c) as f64 >= PERIOD_SLACK * best as f64)
        .max_by_key(|&c| (exact(c), c))
}

/// The once-per-step keys, in order of first call, if they repeat as one
/// block; else the single most evenly spaced one.
fn anchors(keys: &[u32], counts: &FxHashMap<u32, usize>, period: usize) -> Vec<u32> {
    let mut set: Vec<u32> = Vec::new();
    for &k in keys {
        if counts[&k] == period && !set.contains(&k) {
            set.push(k);
        }
    }
    let seq: Vec<u32> = keys.iter().copied().filter(|k| set.contains(k)).collect();
    if back_to_back(&seq, 0, set.len()) == period {
        return set;
    }
    let spread = |k: u32| {
        let at: Vec<f64> = (0..keys.len())
            .filter(|&i| keys[i] == k)
            .map(|i| i as f64)
            .collect();
        let d: Vec<f64> = at.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = d.iter().sum::<f64>() / d.len().max(1) as f64;
        d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / d.len().max(1) as f64
    };
    let best = set
        .iter()
        .copied()
        .min_by(|&a, &b| spread(a).total_cmp(&spread(b)))
        .unwrap_or(keys[0]);
    vec![best]
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NEG_INFINITY;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

impl Sequence<'_> {
    /// Calls `[lo, hi)` of gap `gap` in chunk `s` (chunk `period` is the
    /// tail after the last anchor; `hi` is then the sequence's end).
    fn span(&self, s: usize, gap: usize) -> (usize, usize) {
        let a = self.anchors;
        let lo = match (s, gap) {
            (0, 0) => 0,
            (_, 0) => self.anchor_at[s * a - 1] + 1,
            _ => self.anchor_at[s * a + gap - 1] + 1,
        };
        let hi = self
            .anchor_at
            .get(s * a + gap)
            .copied()
            .unwrap_or(self.keys.len());
        (lo, hi)
    }

    fn regulars(&self, lo: usize, hi: usize) -> Vec<usize> {
        (lo..hi)
            .filter(|&i| self.role[i] == Role::Regular)
            .collect()
    }

    /// The gap's typical number of regular calls.
    fn typical(&self, gap: usize) -> usize {
        let mut n: Vec<usize> = (0..self.period)
            .map(|s| {
                let (lo, hi) = self.span(s, gap);
                self.regulars(lo, hi).len()
            })
            .collect();
        n.sort_unstable();
        n[n.len() / 2]
    }

    /// The cut of `c` in chunk `s`, and where the run of calls just before
    /// it starts (the previous regular call's successor, or the gap's start).
    fn cut_in(&self, c: Candidate, typical: usize, s: usize) -> Option<(usize, usize)> {
        let (lo, hi) = self.span(s, c.gap);
        let regs = self.regulars(lo, hi);
        let tail = s == self.period;
        // The first chunk's leading gap may start mid-step: align its
        // regular calls on the end; the tail may stop mid-step: on the start.
        let shift = if s == 0 && c.gap == 0 {
            typical.saturating_sub(regs.len())
        } else {
            0
        };
        let at = |i: usize| -> Option<usize> {
            if i < shift {
                None
            } else if i - shift < regs.len() && i < typical {
                Some(regs[i - shift])
            } else if tail {
                None
            } else {
                Some(hi)
            }
        };
        let cut = at(c.index)?;
        let from = match c.index {
            0 => lo,
            i => at(i - 1).map_or(lo, |p| p + 1),
        };
        Some((cut, from.min(cut)))
    }

    /// The cut at the trace's first structural call, when the first step
    /// looks whole (its leading gap has the typical number of regular
    /// calls), or when the trace begins with the first anchor itself: a
    /// profiler window (or a profile started before the loop) opens at a
    /// step boundary.
    fn start_phase(&self) -> Option<Candidate> {
        let (lo, hi) = self.span(0, 0);
        let leading = self.regulars(lo, hi).len();
        let typical = self.typical(0);
        if leading == typical {
            Some(Candidate { gap: 0, index: 0 })
        } else if leading == 0 {
            Some(Candidate {
                gap: 0,
                index: typical,
            })
        } else {
            None
        }
    }

    fn best_candidate(&self) -> Candidate {
        if let Some(c) = self.start_phase() {
            return c;
        }
        let mut best: Option<((bool, f64), Candidate)> = None;
        for gap in 0..self.anchors {
            let typical = self.typical(gap);
            for index in 0..=typical {
                let c = Candidate { gap, index };
                let (mut rare, mut idle) = (0, Vec::new());
                for s in 0..self.period {
                    let Some((cut, from)) = self.cut_in(c, typical, s) else {
                        continue;
                    };
                    rare += (from..cut).filter(|&i| self.role[i] == Role::Rare).count();
                    if cut > 0 {
                        idle.push(self.arrival[cut] - self.end[cut - 1]);
                    }
                }
                let score = (rare >= RARE_EVIDENCE, median(idle));
                let better = best
                    .as_ref()
                    .is_none_or(|(b, _)| (score.0, score.1) > (b.0, b.1));
                if better {
                    best = Some((score, c));
                }
            }
        }
        best.map_or(Candidate { gap: 0, index: 0 }, |(_, c)| c)
    }

    fn cuts(&self, c: Candidate) -> Vec<usize> {
        let typical = self.typical(c.gap);
        let mut out: Vec<usize> = (0..=self.period)
            .filter(|&s| s < self.period || c.gap == 0)
            .filter_map(|s| self.cut_in(c, typical, s).map(|(cut, _)| cut))
            .filter(|&cut| cut < self.keys.len())
            .collect();
        out.dedup();
        out
    }
}
