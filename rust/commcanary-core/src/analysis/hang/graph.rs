//! Where each rank is, who waits for whom, and the root: the rank(s) whose
//! divergence explains the rest.
//!
//! A rank is *blocked* when it has a call in flight (the earliest pending
//! one) or sits in a partial collective it could not finish. Every present
//! member of a partial collective waits for each missing one; in a mismatch
//! the majority waits for the minority. Roots, in order of strength:
//! 1. the minority of a mismatch that has a majority;
//! 2. a missing member that is not blocked in any call, or has no evidence
//!    at all (stalled outside communication, dead, never started);
//! 3. when every missing member is itself blocked (a deadlock), the missing
//!    members of the partial collective the most ranks agree on (the most
//!    present members): the others wait where the majority of the job
//!    waits, so the one who is elsewhere diverged. Crossed waits (a rank
//!    waits in a transfer for a peer that waits in a collective the rank is
//!    missing from) are read by time: the transfer began after the
//!    collective's first arrival, so its rank skipped the collective; or
//!    before, so the peer skipped its side of the transfer.
//!
//! Diverged roots that are themselves blocked in a collective other members
//! completed did not diverge: that collective broke on them (its members
//! disagreed on something their evidence does not record), and its stuck
//! members are the roots (`broken`), one of whom caused it.

use std::collections::BTreeMap;

use super::align::{Alignment, Partial};
use super::model::{Model, Op};

/// What a rank is doing.
#[derive(Debug, Clone, PartialEq)]
pub struct Position<'a> {
    /// Rank.
    pub rank: i64,
    /// `blocked`, `not_blocked` or `no_evidence`.
    pub state: &'static str,
    /// Its last call that completed.
    pub last_completed: Option<&'a Op>,
    /// The call it is blocked in.
    pub in_flight: Option<&'a Op>,
}

/// One wait-for edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The waiting rank.
    pub rank: i64,
    /// The rank it waits for.
    pub waits_for: i64,
    /// Group index.
    pub group: usize,
    /// Sequence number of the call it waits in.
    pub seq: i64,
    /// That call's op.
    pub op: &'static str,
    /// Point-to-point.
    pub p2p: bool,
}

/// A root of the wait-for graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Root {
    /// Rank.
    pub rank: i64,
    /// Group of the call it did not join (or disagreed on).
    pub group: usize,
    /// Its sequence number.
    pub seq: i64,
    /// Its op.
    pub op: &'static str,
    /// `mismatch`, `not_blocked`, `no_evidence`, `late` (it issued the call
    /// only after the others had waited past the timeout), `diverged`,
    /// `broken` (it stayed in a collective other members completed) or
    /// `departed` (its last call departs from its own loop) or `stuck_pair`
    /// (a side of a send/receive pair both stuck, see
    /// [`super::align::StuckPair`]).
    pub kind: &'static str,
    /// Index of the partial collective, of the mismatch for `mismatch`, of
    /// the broken collective for `broken`, of the departure for `departed`,
    /// of the stuck pair for `stuck_pair`.
    pub cause: usize,
}

impl Root {
    /// The step of the call this root is tied to, −1 when unknown.
    #[must_use]
    pub fn step(&self, alignment: &Alignment) -> Option<i64> {
        match self.kind {
            "mismatch" => alignment.mismatches.get(self.cause).map(|m| m.step),
            "broken" => alignment.broken.get(self.cause).map(|b| b.step),
            "departed" => alignment.departures.get(self.cause).map(|d| d.step),
            "stuck_pair" => alignment.stuck_pairs.get(self.cause).map(|s| s.step),
            _ => alignment.partials.get(self.cause).map(|p| p.step),
        }
    }
}

/// Every rank's position.
#[must_use]
pub fn positions<'a>(model: &'a Model, alignment: &Alignment) -> Vec<Position<'a>> {
    let in_partial: BTreeMap<(i64, usize, i64, bool), ()> = alignment
        .partials
        .iter()
        .flat_map(|p| {
            p.present
                .iter()
                .map(move |&r| ((r, p.group, p.seq, p.p2p), ()))
        })
        .collect();
    (0..model
        .world
        .max(1 + model.ranks.keys().next_back().copied().unwrap_or(-1)))
        .map(|rank| {
            let Some(ev) = model.ranks.get(&rank).filter(|e| e.source.is_some()) else {
                return Position {
                    rank,
                    state: "no_evidence",
                    last_completed: None,
                    in_flight: None,
                };
            };
            let stuck =
                |o: &Op| o.pending || in_partial.contains_key(&(rank, o.group, o.seq, o.p2p));
            let at = ev
                .ops
                .iter()
                .position(|o| o.pending)
                .or_else(|| ev.ops.iter().rposition(stuck));
            let done = at.unwrap_or(ev.ops.len());
            Position {
                rank,
                state: if at.is_some() {
                    "blocked"
                } else {
                    "not_blocked"
                },
                last_completed: ev.ops[..done].iter().rev().find(|o| !stuck(o)),
                in_flight: at.map(|i| &ev.ops[i]),
            }
        })
        .collect()
}

/// Whether some root itself waits in a transfer on another rank: a chain
/// of transfers cut there may go on (a deadlock further along can hold it).
#[must_use]
pub fn waits_in_transfer(roots: &[Root], edges: &[Edge]) -> bool {
    roots
        .iter()
        .any(|r| edges.iter().any(|e| e.p2p && e.rank == r.rank))
}

/// The wait-for edges.
#[must_use]
pub fn wait_for(alignment: &Alignment) -> Vec<Edge> {
    let mut edges = Vec::new();
    for p in &alignment.partials {
        for &r in &p.present {
            for &m in &p.missing {
                edges.push(edge(r, m, p.group, p.seq, p.op, p.p2p));
            }
        }
    }
    for m in &alignment.mismatches {
        for &r in &m.majority {
            let op = m
                .seen
                .iter()
                .find(|s| s.rank == r)
                .map_or("other", |s| s.op);
            for &x in &m.minority {
                edges.push(edge(r, x, m.group, m.seq, op, false));
            }
        }
    }
    edges.sort_by(|a, b| {
        (a.rank, a.waits_for, a.group, a.seq).cmp(&(b.rank, b.waits_for, b.group, b.seq))
    });
    edges.dedup();
    edges
}

fn edge(rank: i64, waits_for: i64, group: usize, seq: i64, op: &'static str, p2p: bool) -> Edge {
    Edge {
        rank,
        waits_for,
        group,
        seq,
        op,
        p2p,
    }
}

/// Each `(partial, rank)` where `rank` is missing from an unmatched
/// transfer and waits in none itself: where a chain of transfers ends.
fn transfer_sinks(alignment: &Alignment) -> Vec<(usize, i64)> {
    let unmatched: Vec<(usize, &Partial)> = alignment
        .partials
        .iter()
        .enumerate()
        .filter(|(_, p)| p.p2p)
        .collect();
    let waiting = |r: i64| unmatched.iter().any(|(_, p)| p.present.contains(&r));
    unmatched
        .iter()
        .flat_map(|&(i, p)| p.missing.iter().map(move |&r| (i, r)))
        .filter(|&(_, r)| !waiting(r))
        .collect()
}

/// The ranks that end a chain of unmatched transfers: missing from one,
/// waiting in none. One that posted its counterpart only after its partner
/// had waited past the timeout is `late` (it was stalled), else `diverged`.
fn chain_ends(alignment: &Alignment, positions: &[Position<'_>]) -> Vec<Root> {
    let mut out: Vec<Root> = Vec::new();
    for (i, r) in transfer_sinks(alignment) {
        let p = &alignment.partials[i];
        let late = positions
            .iter()
            .find(|x| x.rank == r)
            .and_then(|x| x.in_flight)
            .is_some_and(|o| {
                o.p2p
                    && o.timeout_ms > 0
                    && p.time_ns > 0
                    && o.time_ns - p.time_ns > o.timeout_ms.saturating_mul(1_000_000)
            });
        let kind = if late { "late" } else { "diverged" };
        push(&mut out, root_of(p, r, kind, i));
    }
    // A chain that only some of several ends explain is no chain to follow.
    if out.len() > 1 { Vec::new() } else { out }
}

/// The roots at the stuck send/receive pair that ends the chain of
/// unmatched transfers (or the only pair, when nothing is unmatched): the
/// side whose own loop departs from its pattern (it skipped a transfer),
/// else both.
fn stuck_pair_roots(alignment: &Alignment, departures: &dyn Fn(i64) -> usize) -> Option<Vec<Root>> {
    let any_unmatched = alignment.partials.iter().any(|p| p.p2p);
    let sinks: Vec<i64> = transfer_sinks(alignment)
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    let (i, pair) = alignment.stuck_pairs.iter().enumerate().find(|(_, s)| {
        if any_unmatched {
            sinks.contains(&s.sender) || sinks.contains(&s.receiver)
        } else {
            alignment.partials.is_empty()
        }
    })?;
    let (ds, dr) = (departures(pair.sender), departures(pair.receiver));
    let ranks = match ds.cmp(&dr) {
        std::cmp::Ordering::Greater => vec![pair.sender],
        std::cmp::Ordering::Less => vec![pair.receiver],
        std::cmp::Ordering::Equal => vec![pair.sender, pair.receiver],
    };
    Some(
        ranks
            .into_iter()
            .map(|rank| Root {
                rank,
                group: pair.group,
                seq: if rank == pair.sender {
                    pair.send_seq
                } else {
                    pair.recv_seq
                },
                op: if rank == pair.sender { "send" } else { "recv" },
                kind: "stuck_pair",
                cause: i,
            })
            .collect(),
    )
}

/// The roots (see the module doc).
#[must_use]
pub fn roots(
    alignment: &Alignment,
    positions: &[Position<'_>],
    departed: &dyn Fn(i64) -> bool,
    departures: &dyn Fn(i64) -> usize,
) -> Vec<Root> {
    let out = wait_roots(alignment, positions, departed, departures);
    broken_instead(alignment, positions, &out).unwrap_or(out)
}

/// When every root diverged only by being blocked in a collective other
/// members completed, that collective's stuck members.
fn broken_instead(
    alignment: &Alignment,
    positions: &[Position<'_>],
    roots: &[Root],
) -> Option<Vec<Root>> {
    if roots.is_empty() || roots.iter().any(|r| r.kind != "diverged") {
        return None;
    }
    let is_root = |r: &i64| roots.iter().any(|x| x.rank == *r);
    // A root blocked in a partial collective that waits only for other
    // roots is downstream of them.
    let waits_on_roots = |o: &Op| {
        alignment.partials.iter().any(|p| {
            p.group == o.group
                && p.seq == o.seq
                && p.p2p == o.p2p
                && !p.missing.is_empty()
                && p.missing.iter().all(is_root)
        })
    };
    let mut first: Option<usize> = None;
    for r in roots {
        let o = positions.iter().find(|p| p.rank == r.rank)?.in_flight?;
        match alignment
            .broken
            .iter()
            .position(|b| !o.p2p && b.group == o.group && b.seq == o.seq)
        {
            Some(i) => first = Some(first.map_or(i, |f| f.min(i))),
            None if waits_on_roots(o) => {}
            None => return None,
        }
    }
    let i = first?;
    let b = &alignment.broken[i];
    Some(
        b.stuck
            .iter()
            .map(|&rank| Root {
                rank,
                group: b.group,
                seq: b.seq,
                op: b.op,
                kind: "broken",
                cause: i,
            })
            .collect(),
    )
}

/// The minority of each mismatch (a tie broken by each side's own loop).
fn mismatch_roots(alignment: &Alignment, departures: &dyn Fn(i64) -> usize) -> Vec<Root> {
    let mut out: Vec<Root> = Vec::new();
    for (i, m) in alignment.mismatches.iter().enumerate() {
        // A tie (two ranks, two calls) is broken by each side's own
        // history: the rank whose call departs from the pattern it kept
        // before changed, not the other.
        let tied: Vec<i64>;
        let minority = if m.majority.is_empty() {
            let counts: Vec<(i64, usize)> =
                m.minority.iter().map(|&r| (r, departures(r))).collect();
            let top = counts.iter().map(|c| c.1).max().unwrap_or(0);
            tied = counts.iter().filter(|c| c.1 == top).map(|c| c.0).collect();
            if top == 0 || tied.len() == counts.len() {
                continue;
            }
            &tied
        } else {
            &m.minority
        };
        for &r in minority {
            let op = m
                .seen
                .iter()
                .find(|s| s.rank == r)
                .map_or("other", |s| s.op);
            push(
                &mut out,
                Root {
                    rank: r,
                    group: m.group,
                    seq: m.seq,
                    op,
                    kind: "mismatch",
                    cause: i,
                },
            );
        }
    }
    out
}

fn wait_roots(
    alignment: &Alignment,
    positions: &[Position<'_>],
    departed: &dyn Fn(i64) -> bool,
    departures: &dyn Fn(i64) -> usize,
) -> Vec<Root> {
    let state = |r: i64| {
        positions
            .iter()
            .find(|p| p.rank == r)
            .map_or("no_evidence", |p| p.state)
    };
    let mut out = mismatch_roots(alignment, departures);
    // A desync decided by a majority explains the ranks missing elsewhere
    // (a rank gloo aborted on the wrong size, peers stuck behind it): its
    // minority is the root.
    if !out.is_empty() {
        return out;
    }
    // Each root is tied to the earliest partial collective it is missing
    // from: where its chain starts.
    let mut order: Vec<usize> = (0..alignment.partials.len()).collect();
    order.sort_by_key(|&i| (alignment.partials[i].time_ns, i));
    for &i in &order {
        let p = &alignment.partials[i];
        for &r in &p.missing {
            let kind = match state(r) {
                _ if p.late.contains(&r) => "late",
                "no_evidence" => "no_evidence",
                "not_blocked" => "not_blocked",
                _ => continue,
            };
            push(&mut out, root_of(p, r, kind, i));
        }
    }
    // A chain of point-to-point waits ends at a rank no unmatched transfer
    // holds: when that rank is in a send/receive pair whose both sides are
    // stuck, the chain starts at that pair (before
    // any collective a stuck side is missing from).
    if out.is_empty()
        && let Some(pair) = stuck_pair_roots(alignment, departures)
    {
        return pair;
    }
    // A transfer and a collective waiting on each other: which side left
    // the other waiting is read from their times, whatever the loops say.
    if out.is_empty() {
        let crossed = crossed_waits(alignment);
        if !crossed.is_empty() {
            return crossed;
        }
    }
    if out.is_empty() {
        let mut missing: Vec<i64> = alignment
            .partials
            .iter()
            .flat_map(|p| p.missing.iter().copied())
            .collect();
        missing.sort_unstable();
        missing.dedup();
        let deviators: Vec<i64> = missing.iter().copied().filter(|&r| departed(r)).collect();
        if !deviators.is_empty() && deviators.len() < missing.len() {
            for &i in &order {
                let p = &alignment.partials[i];
                for &r in p.missing.iter().filter(|r| deviators.contains(r)) {
                    push(&mut out, root_of(p, r, "diverged", i));
                }
            }
            return out;
        }
    }
    // A chain of unmatched transfers ends at the rank it waits for that
    // waits in none itself: that rank is the root (a pipeline stage frozen
    // or elsewhere holds every later stage).
    if out.is_empty() {
        let sinks = chain_ends(alignment, positions);
        if !sinks.is_empty() {
            return sinks;
        }
    }
    // A deadlock through point-to-point calls (every missing rank is itself
    // blocked): it starts at the earliest call still waiting, on the rank
    // that never posted its counterpart (the wavefront) — or, when a
    // collective was waiting before any transfer was, on the rank that
    // skipped that collective and went on to the transfer it now waits in.
    if out.is_empty()
        && let Some((i, p)) = alignment
            .partials
            .iter()
            .enumerate()
            .filter(|(_, p)| p.p2p && p.time_ns > 0)
            .min_by_key(|(i, p)| (p.time_ns, *i))
    {
        for &r in &p.missing {
            push(&mut out, root_of(p, r, "diverged", i));
        }
        return out;
    }
    if out.is_empty() {
        let strength = |p: &Partial| {
            (
                p.present.len(),
                std::cmp::Reverse(p.present.len() + p.missing.len()),
            )
        };
        if let Some(best) = alignment.partials.iter().map(strength).max() {
            for (i, p) in alignment
                .partials
                .iter()
                .enumerate()
                .filter(|(_, p)| strength(p) == best)
            {
                for &r in &p.missing {
                    push(&mut out, root_of(p, r, "diverged", i));
                }
            }
        }
    }
    out
}

/// Crossed waits: rank `a` waits in a transfer for rank `b` while `b`
/// waits in a partial collective that `a` is missing from. When `a`'s
/// transfer began after the collective's first member arrived, `a` went
/// past the collective (skipped it) and is the root; when before, `b`
/// went into the collective without posting `a`'s counterpart (it skipped
/// its side of the transfer) and is the root.
fn crossed_waits(alignment: &Alignment) -> Vec<Root> {
    let mut out = Vec::new();
    for (ti, t) in alignment.partials.iter().enumerate() {
        if !t.p2p || t.time_ns <= 0 {
            continue;
        }
        for &a in &t.present {
            for &b in &t.missing {
                let crossing = alignment.partials.iter().enumerate().find(|(_, c)| {
                    !c.p2p && c.time_ns > 0 && c.present.contains(&b) && c.missing.contains(&a)
                });
                if let Some((ci, c)) = crossing {
                    let root = if t.time_ns > c.time_ns {
                        root_of(c, a, "diverged", ci)
                    } else {
                        root_of(t, b, "diverged", ti)
                    };
                    push(&mut out, root);
                }
            }
        }
    }
    out
}

/// The root `rank` of partial `p`: for p2p, the call it did not post is the
/// counterpart of the one its partner waits in.
fn root_of(p: &Partial, rank: i64, kind: &'static str, cause: usize) -> Root {
    let op = match (p.p2p, p.op) {
        (true, "send") => "recv",
        (true, "recv") => "send",
        (_, op) => op,
    };
    Root {
        rank,
        group: p.group,
        seq: p.seq,
        op,
        kind,
        cause,
    }
}

fn push(out: &mut Vec<Root>, root: Root) {
    if !out.iter().any(|r| r.rank == root.rank) {
        out.push(root);
    }
}
