//! What kind of fault the root's evidence shows, and what would settle it
//! when the evidence given cannot.
//!
//! Categories (the document's `category`):
//! * `desync` — members disagree on one call (`desync_kind`: `op`,
//!   `dtype`, `size`);
//! * `p2p_unmatched` — a send or receive whose counterpart was never
//!   posted (a pipeline deadlock starts here);
//! * `process_died` — the root's process is gone: its launcher reported a
//!   signal, or it left no evidence while its peers lost their connections;
//! * `missed_collective` — the root went on past a collective its group
//!   waits in (it issued later calls, or its own call pattern lost one);
//! * `stalled_outside_communication` — the root was in no call when the
//!   others waited: a frozen process, compute, data loading, the host.
//!
//! A root is only as good as what the evidence can show: gloo's Flight
//! Recorder records no send or receive, so a rank "in no collective" there
//! may be blocked in one; stacks and exception texts name no group or
//! sequence number. Then the answer is inconclusive and `would_settle`
//! names the evidence that would decide.

use super::align::Alignment;
use super::graph::{Position, Root};
use super::model::Model;

/// The fault behind a hang, as far as the evidence shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cause {
    /// The category, `None` when no root is known.
    pub category: Option<&'static str>,
    /// For a desync: `op`, `dtype` or `size`.
    pub desync_kind: Option<&'static str>,
    /// The evidence that would decide what this evidence cannot.
    pub would_settle: Vec<String>,
    /// Whether the evidence cannot show the cause (the verdict is then
    /// `inconclusive`).
    pub undecided: bool,
    /// Whether the category is an inference (capped at medium confidence).
    pub inferred: bool,
}

/// What the diagnosis knows beside the model and the alignment.
pub struct Facts<'a> {
    /// The model.
    pub model: &'a Model,
    /// Partial collectives and mismatches.
    pub alignment: &'a Alignment,
    /// Every rank's position.
    pub positions: &'a [Position<'a>],
    /// Ranks whose launcher reported a death by signal.
    pub died: &'a [i64],
    /// Whether the only op evidence of some rank is a Flight Recorder dump
    /// that cannot record point-to-point calls (gloo).
    pub dumps_lack_p2p: bool,
    /// Evidence kinds the op facts rest on.
    pub kinds: &'a [&'static str],
    /// Ranks whose own text reports a collective mismatch.
    pub mismatch_reports: &'a [i64],
    /// Whether the calls are known only from traces whose sequence numbers
    /// are estimates (gloo's traces alone).
    pub estimated_only: bool,
}

/// Whether any rank's exception says a peer's connection went away.
fn peers_lost(model: &Model) -> bool {
    model
        .ranks
        .values()
        .any(|e| e.exception.as_ref().is_some_and(|x| x.peer_lost()))
}

/// Whether rank `r`'s stacks show it blocked in a point-to-point call.
fn in_p2p_by_stacks(model: &Model, r: i64) -> bool {
    model.ranks.get(&r).is_some_and(|e| {
        e.stacks.iter().any(|c| {
            matches!(c.op, Some("send" | "recv"))
                || c.api.contains("recv")
                || c.api.contains("send")
        })
    })
}

/// The cause of a root missing from a collective its group waits in: a
/// call it skipped, a transfer that holds it, a stall outside
/// communication, a death, or a disagreement it is blocked in.
fn missing_root(
    facts: &Facts<'_>,
    roots: &[Root],
    root: &Root,
    kind: &str,
    departed: &dyn Fn(i64) -> bool,
) -> Cause {
    let model = facts.model;
    let mut out = Cause::default();
    let partial = facts.alignment.partials.get(root.cause);
    if kind == "diverged"
        && let Some(m) = tied_in(facts, roots)
    {
        out.category = Some("desync");
        out.desync_kind = Some(m.kind);
        out.undecided = true;
        out.would_settle.push(format!(
            "which side of the {} disagreement at {} #{} on {} changed: its members split evenly and neither's own history breaks the tie; their program's intended arguments (the code at each call site) would settle it",
            m.kind,
            m.seen.first().map_or("call", |s| s.op),
            m.seq,
            super::report::group_label(model, m.group)
        ));
        return out;
    }
    if kind == "diverged" && waiting_on_each_other(facts.alignment, roots) {
        out.undecided = true;
        out.would_settle.push(format!(
            "which of ranks {} left its loop first: each is blocked in a call another skipped, and each one's own call pattern departs from its loop; a Flight Recorder dump with completion times, or the ranks' stacks and their program's iteration counter, would settle it",
            super::report::ranks_text(&roots.iter().map(|r| r.rank).collect::<Vec<_>>())
        ));
    }
    // A root held in an unmatched transfer never reached the
    // collective it misses: the transfer is the fault.
    let in_transfer = kind == "diverged"
        && facts
            .alignment
            .partials
            .iter()
            .any(|p| p.p2p && p.present.contains(&root.rank));
    if partial.is_some_and(|p| p.p2p) || in_transfer {
        out.category = Some("p2p_unmatched");
        return out;
    }
    let state = facts
        .positions
        .iter()
        .find(|p| p.rank == root.rank)
        .map_or("no_evidence", |p| p.state);
    let traced = model
        .ranks
        .get(&root.rank)
        .is_some_and(|e| e.source == Some(super::model::Source::Trace));
    if state == "not_blocked"
        && (in_p2p_by_stacks(model, root.rank) || (facts.dumps_lack_p2p && !traced))
    {
        out.undecided = true;
        out.would_settle.push(format!(
            "profiler traces (or stacks) of ranks {}: gloo's Flight Recorder records no send or receive, so a rank in no collective there may be blocked in one",
            super::report::ranks_text(&[root.rank])
        ));
        return out;
    }
    let time_ns = partial.map_or(0, |p| p.time_ns);
    out.category =
        if kind == "diverged" || departed(root.rank) || went_on(model, root.rank, time_ns) {
            Some("missed_collective")
        } else {
            Some("stalled_outside_communication")
        };
    if peers_lost(model) && out.category == Some("stalled_outside_communication") {
        out.category = Some("process_died");
        out.inferred = true;
    }
    out
}

/// The tied mismatch (no majority) every root is blocked in, if any: the
/// roots did not skip the call they are missing from, they disagree on the
/// one they are in.
fn tied_in<'a>(facts: &'a Facts<'_>, roots: &[Root]) -> Option<&'a super::align::Mismatch> {
    let at = |r: &Root| {
        facts
            .positions
            .iter()
            .find(|p| p.rank == r.rank)
            .and_then(|p| p.in_flight)
    };
    facts
        .alignment
        .mismatches
        .iter()
        .filter(|m| m.majority.is_empty())
        .find(|m| {
            roots
                .iter()
                .all(|r| at(r).is_some_and(|o| !o.p2p && o.group == m.group && o.seq == m.seq))
        })
}

/// Whether every root waits in a partial collective on another root: a
/// cycle the roots' own histories did not break.
fn waiting_on_each_other(alignment: &Alignment, roots: &[Root]) -> bool {
    roots.len() > 1
        && roots.iter().all(|r| {
            alignment.partials.iter().any(|p| {
                p.present.contains(&r.rank)
                    && p.missing.iter().any(|m| roots.iter().any(|x| x.rank == *m))
            })
        })
}

/// Whether `op` has a root that every member must name alike.
fn rooted(op: &str) -> bool {
    matches!(op, "broadcast" | "reduce" | "gather" | "scatter")
}

/// Whether rank `r` issued calls after `time_ns` (it went on).
fn went_on(model: &Model, r: i64, time_ns: i64) -> bool {
    time_ns > 0
        && model
            .ranks
            .get(&r)
            .and_then(|e| e.ops.iter().map(|o| o.time_ns).max())
            .is_some_and(|t| t > time_ns)
}

/// The cause of the first root, as far as the evidence can show it.
#[must_use]
pub fn cause(facts: &Facts<'_>, roots: &[Root], departed: &dyn Fn(i64) -> bool) -> Cause {
    let mut out = cause_of(facts, roots, departed);
    if facts.estimated_only && !out.undecided {
        estimated_limits(facts, roots, &mut out);
    }
    out
}

/// What calls paired by estimated sequence numbers cannot decide: which of
/// several ranks is the root, whether a rank skipped a call (or its calls
/// were paired wrong), whether a rank whose trace just ends died or
/// stalled, whether a rank with no trace was killed or aborted on a
/// mismatch.
fn estimated_limits(facts: &Facts<'_>, roots: &[Root], out: &mut Cause) {
    let Some(root) = roots.first() else { return };
    let ranks: Vec<i64> = roots.iter().map(|r| r.rank).collect();
    let ranks = super::report::ranks_text(&ranks);
    let pairing = format!(
        "Flight Recorder dumps of every rank (or traces that record sequence numbers): gloo's traces carry none, so which call of each rank pairs with which is estimated, and the estimate names ranks {ranks}"
    );
    // One rank missing where most of a group of three or more met, that
    // went on to later calls, skipped it whatever the pairing's errors.
    let outvoted = facts.alignment.partials.get(root.cause).is_some_and(|p| {
        !p.p2p
            && p.missing == [root.rank]
            && p.present.len() >= 2
            && went_on(facts.model, root.rank, p.time_ns)
    });
    let reason = match (root.kind, out.category) {
        _ if roots.len() > 1 => Some(pairing),
        ("diverged", Some("missed_collective")) if !outvoted => Some(pairing),
        // A trace that just ends (the rank in no call) reads alike for a
        // dead, a stalled and a frozen process, whatever the others wait
        // on it in.
        ("not_blocked", Some(_))
            if !facts.died.contains(&root.rank) && !peers_lost(facts.model) =>
        {
            Some(format!(
                "rank {}'s exit or stack: its trace just ends, as a dead process's and a stalled one's both do (the launcher's log shows an exit by signal; a stack dump shows where a live process is)",
                root.rank
            ))
        }
        // No trace at all: a process killed by a signal and one gloo
        // aborted on a collective mismatch both leave none.
        ("no_evidence", Some("process_died")) if !facts.died.contains(&root.rank) => Some(format!(
            "how rank {} ended: it left no trace, as a process killed by a signal and one gloo aborted on a collective mismatch both do (the launcher's log, or the ranks' exception texts, tell them apart)",
            root.rank
        )),
        _ => None,
    };
    if let Some(reason) = reason {
        out.undecided = true;
        out.category = None;
        out.desync_kind = None;
        out.would_settle.push(reason);
    }
}

fn cause_of(facts: &Facts<'_>, roots: &[Root], departed: &dyn Fn(i64) -> bool) -> Cause {
    let mut out = Cause::default();
    let Some(root) = roots.first() else {
        if !facts.died.is_empty() {
            out.category = Some("process_died");
        }
        if facts.kinds.is_empty() {
            out.would_settle.push(
                "Flight Recorder dumps or profiler traces: they give each call's process group and sequence number, which stacks and exception texts do not".into(),
            );
        }
        return out;
    };
    let model = facts.model;
    if root.kind == "departed" {
        let d = &facts.alignment.departures[root.cause];
        out.category = Some("desync");
        out.desync_kind = Some(d.kind);
        out.inferred = true;
        out.would_settle.push(format!(
            "the same call as its peers in {} issued it (their dump or trace at that call): the change is read from rank {}'s own earlier iterations, not from its peers",
            super::report::group_label(model, d.group),
            d.rank
        ));
        return out;
    }
    // A backend that reports a collective mismatch (gloo aborts the rank
    // that received the wrong size) makes a dead or missing root a desync.
    // The report says the bytes disagreed (a size or a dtype), so an
    // unconfirmed op mismatch is no kind for it; and the root is inferred
    // from a dead or missing rank, not seen in a vote.
    if root.kind != "mismatch" && !facts.mismatch_reports.is_empty() {
        out.category = Some("desync");
        out.desync_kind = facts
            .alignment
            .unconfirmed
            .iter()
            .map(|m| m.kind)
            .find(|k| matches!(*k, "size" | "dtype"));
        out.inferred = true;
        out.would_settle.push(
            "the desynced call in a dump of every rank (the rank gloo aborted left none): which side's call differs, and in what".into(),
        );
        return out;
    }
    let died = facts.died.contains(&root.rank);
    match root.kind {
        "mismatch" => {
            out.category = Some("desync");
            out.desync_kind = facts.alignment.mismatches.get(root.cause).map(|m| m.kind);
        }
        "broken" => {
            let b = &facts.alignment.broken[root.cause];
            out.category = Some("desync");
            out.desync_kind = rooted(b.op).then_some("root");
            out.undecided = true;
            out.would_settle.push(format!(
                "each member's arguments to {} #{} on {} (ranks {} stayed in it {}): profiler traces record a rooted call's root and every call's shapes; gloo's Flight Recorder records no root",
                b.op,
                b.seq,
                super::report::group_label(model, b.group),
                super::report::ranks_text(&b.stuck),
                super::report::broken_how(b),
            ));
        }
        "stuck_pair" => {
            out.category = Some("p2p_unmatched");
            if roots.len() > 1 {
                let s = &facts.alignment.stuck_pairs[root.cause];
                out.undecided = true;
                out.would_settle.push(format!(
                    "which transfer each side meant: rank {}'s send and rank {}'s receive pair by count but never matched, and neither's own loop shows which skipped one; the tags of both calls, or each rank's stack at its call site (which micro-batch), would settle it",
                    s.sender, s.receiver
                ));
            }
        }
        "late" => out.category = Some("stalled_outside_communication"),
        _ if died => out.category = Some("process_died"),
        "no_evidence" => {
            out.category = Some("process_died");
            out.inferred = !peers_lost(model);
            if out.inferred {
                out.would_settle.push(format!(
                    "rank {}'s own evidence or its launcher's log (an exit by signal shows the process died; a dump or trace shows where it is)",
                    root.rank
                ));
            }
        }
        kind => out = missing_root(facts, roots, root, kind, departed),
    }
    out
}
