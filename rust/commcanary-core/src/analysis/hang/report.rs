//! The `commcanary.hang.v1` document and the few human lines above it, from
//! the model, the alignment, the positions, the edges and the roots.
//!
//! Invariants: every list is in a deterministic order (groups, then
//! sequence numbers, then ranks); every statement names the evidence kinds
//! it rests on and a confidence (`high`, `medium`, `low`); the document is
//! written as canonical JSON.

use super::align::{Alignment, Mismatch, Partial};
use super::graph::{Edge, Position, Root};
use super::model::{Model, NONE, Op};
use crate::json::Json;

/// The format identifier.
pub const FORMAT: &str = crate::document::HANG;

/// Everything the document is made from.
pub struct Findings<'a> {
    /// The model.
    pub model: &'a Model,
    /// Partial collectives and mismatches.
    pub alignment: &'a Alignment,
    /// Every rank's position.
    pub positions: &'a [Position<'a>],
    /// Wait-for edges.
    pub edges: &'a [Edge],
    /// Roots.
    pub roots: &'a [Root],
    /// `hang`, `no_hang` or `inconclusive`.
    pub verdict: &'static str,
    /// Overall confidence.
    pub confidence: &'static str,
    /// Evidence kinds the op facts rest on.
    pub kinds: Vec<&'static str>,
    /// Conclusions: statement, evidence kinds, confidence.
    pub conclusions: Vec<(String, Vec<&'static str>, &'static str)>,
    /// The files: one object each.
    pub evidence: Vec<Json>,
    /// The fault's category and what would settle it.
    pub cause: super::cause::Cause,
    /// The line saying damaged files were skipped, if any were.
    pub damage: Option<String>,
}

/// `0-2, 5` for `[0, 1, 2, 5]`.
#[must_use]
pub fn ranks_text(ranks: &[i64]) -> String {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(match j - i {
            0 => sorted[i].to_string(),
            1 => format!("{}, {}", sorted[i], sorted[j]),
            _ => format!("{}-{}", sorted[i], sorted[j]),
        });
        i = j + 1;
    }
    parts.join(", ")
}

/// `rank 3` or `ranks 0-2`.
#[must_use]
pub fn ranks_word(ranks: &[i64]) -> String {
    let text = ranks_text(ranks);
    if ranks.len() == 1 {
        format!("rank {text}")
    } else {
        format!("ranks {text}")
    }
}

/// `rank 3 is` or `ranks 0-2 are`.
#[must_use]
pub fn verb_are(ranks: &[i64]) -> String {
    let verb = if ranks.len() == 1 { "is" } else { "are" };
    format!("{} {verb}", ranks_word(ranks))
}

/// Who stayed in a broken collective, and how it was left.
#[must_use]
pub fn broken_line(model: &Model, b: &super::align::Broken) -> String {
    format!(
        "{} stayed in {} #{} on {} {}",
        ranks_word(&b.stuck),
        b.op,
        b.seq,
        group_label(model, b.group),
        broken_how(b)
    )
}

/// How a broken collective was left: after which members completed it, or
/// with every member still in it.
#[must_use]
pub fn broken_how(b: &super::align::Broken) -> String {
    if b.done.is_empty() {
        "with every member in it and none through".into()
    } else {
        format!("after {} completed it", ranks_word(&b.done))
    }
}

/// A group's display name: its description, else its name.
#[must_use]
pub fn group_label(model: &Model, gi: usize) -> String {
    let g = &model.groups[gi];
    if g.desc.is_empty() {
        format!("group {}", g.name)
    } else {
        g.desc.clone()
    }
}

fn group_full(model: &Model, gi: usize) -> Json {
    let g = &model.groups[gi];
    Json::object()
        .with("name", g.name.as_str())
        .with("desc", g.desc.as_str())
        .with("ranks", g.ranks.as_slice())
}

fn group_short(model: &Model, gi: usize) -> Json {
    let g = &model.groups[gi];
    Json::object()
        .with("name", g.name.as_str())
        .with("desc", g.desc.as_str())
}

fn step_json(step: i64) -> Json {
    if step >= 0 {
        Json::Int(step)
    } else {
        Json::Null
    }
}

fn text_json(model: &Model, i: u32) -> Json {
    if i == NONE {
        Json::Null
    } else {
        Json::from(model.text(i))
    }
}

fn frame_json(model: &Model, i: u32) -> Json {
    model.frame(i).map_or(Json::Null, |f| {
        Json::object()
            .with("file", f.file.as_str())
            .with("line", i64::from(f.line))
            .with("func", f.func.as_str())
    })
}

fn seq_keys(j: Json, p2p: bool, seq: i64) -> Json {
    if p2p {
        j.with("collective_seq_id", Json::Null)
            .with("p2p_seq_id", seq)
    } else {
        j.with("collective_seq_id", seq)
    }
}

fn op_json(model: &Model, o: &Op) -> Json {
    let j = Json::object()
        .with("group", group_short(model, o.group))
        .with("op", o.op)
        .with("step", step_json(o.step))
        .with("input_sizes", text_json(model, o.in_sizes))
        .with("input_dtypes", text_json(model, o.in_dtypes))
        .with("frame", frame_json(model, o.frame));
    seq_keys(j, o.p2p, o.seq)
}

/// A short "all_reduce #86 on default_pg".
#[must_use]
pub fn op_text(model: &Model, o: &Op) -> String {
    let kind = if o.p2p { "p2p #" } else { "#" };
    format!(
        "{} {kind}{} on {}",
        o.op,
        o.seq,
        group_label(model, o.group)
    )
}

fn partial_json(f: &Findings<'_>, p: &Partial) -> Json {
    let j = Json::object()
        .with("group", group_full(f.model, p.group))
        .with("op", p.op)
        .with("present_ranks", p.present.as_slice())
        .with("missing_ranks", p.missing.as_slice())
        .with("state", if p.pending { "in_flight" } else { "failed" })
        .with("step", step_json(p.step))
        .with("p2p", p.p2p)
        .with("evidence", kinds_json(&f.kinds))
        .with("confidence", f.confidence);
    seq_keys(j, p.p2p, p.seq)
}

fn call_json(model: &Model, op: &str, sizes: (u32, u32), dtypes: (u32, u32)) -> Json {
    Json::object()
        .with("op", op)
        .with("input_sizes", text_json(model, sizes.0))
        .with("output_sizes", text_json(model, sizes.1))
        .with("input_dtypes", text_json(model, dtypes.0))
        .with("output_dtypes", text_json(model, dtypes.1))
}

fn mismatch_json(f: &Findings<'_>, m: &Mismatch) -> Json {
    let seen: Vec<Json> = m
        .seen
        .iter()
        .map(|s| {
            call_json(
                f.model,
                s.op,
                (s.in_sizes, s.out_sizes),
                (s.in_dtypes, s.out_dtypes),
            )
            .with("rank", s.rank)
        })
        .collect();
    let expected = m
        .majority
        .first()
        .and_then(|r| m.seen.iter().find(|s| s.rank == *r))
        .map_or(Json::Null, |s| {
            call_json(
                f.model,
                s.op,
                (s.in_sizes, s.out_sizes),
                (s.in_dtypes, s.out_dtypes),
            )
        });
    Json::object()
        .with("group", group_full(f.model, m.group))
        .with("collective_seq_id", m.seq)
        .with("kind", m.kind)
        .with("majority_ranks", m.majority.as_slice())
        .with("minority_ranks", m.minority.as_slice())
        .with("expected", expected)
        .with("seen", seen)
        .with("state", if m.pending { "in_flight" } else { "completed" })
        .with("step", step_json(m.step))
        .with("evidence", kinds_json(&f.kinds))
}

fn kinds_json(kinds: &[&'static str]) -> Json {
    Json::Array(kinds.iter().map(|k| Json::from(*k)).collect())
}

/// Why `root` is a root, in words.
#[must_use]
pub fn root_reason(f: &Findings<'_>, root: &Root) -> String {
    let model = f.model;
    let at = format!(
        "{} #{} on {}",
        root.op,
        root.seq,
        group_label(model, root.group)
    );
    let position = f.positions.iter().find(|p| p.rank == root.rank);
    let elsewhere = position
        .and_then(|p| p.in_flight)
        .map(|o| format!("; it is blocked in {} instead", op_text(model, o)))
        .unwrap_or_default();
    match root.kind {
        "mismatch" => {
            let m = &f.alignment.mismatches[root.cause];
            format!(
                "{} mismatch at {at}: it disagrees with {}",
                m.kind,
                ranks_word(&m.majority)
            )
        }
        "no_evidence" => {
            let p = &f.alignment.partials[root.cause];
            format!(
                "never joined {at}, which {} waiting in; there is no evidence from it (no dump or trace): it never started, died, or its evidence was lost",
                verb_are(&p.present)
            )
        }
        "stuck_pair" => {
            let s = &f.alignment.stuck_pairs[root.cause];
            format!(
                "rank {}'s send p2p #{} to rank {} and rank {}'s recv p2p #{} from it pair by count, yet both are stuck on {}: a transfer one side skipped earlier shifted the pairing, or the two disagree on its tag or size{}",
                s.sender,
                s.send_seq,
                s.receiver,
                s.receiver,
                s.recv_seq,
                group_label(model, s.group),
                if f.roots.iter().filter(|r| r.kind == "stuck_pair").count() == 1 {
                    format!(
                        "; rank {}'s own loop departs from its pattern (the skipped side)",
                        root.rank
                    )
                } else {
                    String::new()
                }
            )
        }
        "departed" => {
            let d = &f.alignment.departures[root.cause];
            format!(
                "its last call, {at}, has {} {} where the same call of its earlier iterations had {}: it issued the odd call, and the members that vanished or stopped with it are its peers in that call",
                d.kind,
                model.text(d.now),
                model.text(d.usual)
            )
        }
        "broken" => format!(
            "stayed in {at} {}: its members disagreed on something their evidence does not record (a broadcast's root, a buffer), or the call broke on them",
            broken_how(&f.alignment.broken[root.cause])
        ),
        "late" => {
            let p = &f.alignment.partials[root.cause];
            format!(
                "joined {at} only after {} had waited past the collective timeout: it was stalled outside communication (a frozen process, compute, data loading, host) when the others gave up",
                ranks_word(&p.present)
            )
        }
        "not_blocked" => {
            let p = &f.alignment.partials[root.cause];
            let last = position
                .and_then(|p| p.last_completed)
                .map(|o| format!(" (last completed: {})", op_text(model, o)))
                .unwrap_or_default();
            format!(
                "never joined {at}, which {} waiting in, and is not blocked in any collective{last}: it stalled outside communication (compute, data loading, host) or died",
                verb_are(&p.present)
            )
        }
        _ => {
            let p = &f.alignment.partials[root.cause];
            if p.p2p {
                return format!(
                    "never posted the {} that {}'s {} p2p #{} on {} waits for{elsewhere}",
                    root.op,
                    ranks_word(&p.present),
                    p.op,
                    p.seq,
                    group_label(model, p.group)
                );
            }
            format!(
                "skipped {at}, which {} blocked in{elsewhere}",
                verb_are(&p.present)
            )
        }
    }
}

fn root_json(f: &Findings<'_>, root: &Root) -> Json {
    let p2p = !matches!(root.kind, "mismatch" | "broken" | "departed" | "stuck_pair")
        && f.alignment.partials.get(root.cause).is_some_and(|p| p.p2p);
    let j = Json::object()
        .with("rank", root.rank)
        .with("group", group_full(f.model, root.group))
        .with("op", root.op)
        .with("kind", root.kind)
        .with("reason", root_reason(f, root))
        .with("evidence", kinds_json(&f.kinds))
        .with("confidence", f.confidence);
    seq_keys(j, p2p, root.seq)
}

fn edge_json(model: &Model, e: &Edge) -> Json {
    let j = Json::object()
        .with("rank", e.rank)
        .with("waits_for", e.waits_for)
        .with("group", group_short(model, e.group))
        .with("op", e.op);
    seq_keys(j, e.p2p, e.seq)
}

fn rank_json(f: &Findings<'_>, p: &Position<'_>) -> Json {
    let ev = f.model.ranks.get(&p.rank);
    let stack = ev.and_then(|e| e.stacks.first()).map_or(Json::Null, |c| {
        Json::object()
            .with("call", c.call.as_str())
            .with("api", c.api.as_str())
            .with("op", c.op)
            .with("thread", c.thread.as_str())
            .with(
                "frame",
                c.user_frame.as_ref().map_or(Json::Null, |fr| {
                    Json::object()
                        .with("file", fr.file.as_str())
                        .with("line", i64::from(fr.line))
                        .with("func", fr.func.as_str())
                }),
            )
    });
    let exception = ev
        .and_then(|e| e.exception.as_ref())
        .map_or(Json::Null, |x| {
            let t = x.timeout.as_ref();
            Json::object()
                .with("type", x.type_name.as_str())
                .with("message", x.message.as_str())
                .with("timeout", t.is_some())
                .with("timeout_ms", t.and_then(|t| t.timeout_ms))
                .with("backend", t.map(|t| t.backend))
                .with("collective_seq_id", t.and_then(|t| t.seq))
                .with("op", t.and_then(|t| t.op.clone()))
        });
    let state = match (p.state, ev) {
        ("no_evidence", Some(e)) if !e.stacks.is_empty() => "blocked",
        (s, _) => s,
    };
    Json::object()
        .with("rank", p.rank)
        .with("state", state)
        .with(
            "last_completed",
            p.last_completed.map_or(Json::Null, |o| op_json(f.model, o)),
        )
        .with(
            "in_flight",
            p.in_flight.map_or(Json::Null, |o| op_json(f.model, o)),
        )
        .with("stack", stack)
        .with("exception", exception)
        .with(
            "evidence",
            Json::Array(ev.map_or(Vec::new(), |e| {
                e.files.iter().map(|s| Json::from(s.as_str())).collect()
            })),
        )
}

/// The step of the hang: the root's collective's step on its present
/// members, else the most common in-flight step.
fn hang_step(f: &Findings<'_>) -> i64 {
    let from_root = f.roots.iter().find_map(|r| r.step(f.alignment));
    from_root.filter(|&s| s >= 0).unwrap_or_else(|| {
        f.positions
            .iter()
            .filter_map(|p| p.in_flight)
            .map(|o| o.step)
            .filter(|&s| s >= 0)
            .min()
            .unwrap_or(-1)
    })
}

/// The whole document.
#[must_use]
pub fn document(f: &Findings<'_>, summary: &str) -> Json {
    let m = f.model;
    let step = hang_step(f);
    Json::object()
        .with("format", FORMAT)
        .with("verdict", f.verdict)
        .with("confidence", f.confidence)
        .with("category", f.cause.category)
        .with("desync_kind", f.cause.desync_kind)
        .with(
            "would_settle",
            Json::Array(
                f.cause
                    .would_settle
                    .iter()
                    .map(|w| Json::from(w.as_str()))
                    .collect(),
            ),
        )
        .with("summary", summary)
        .with("world_size", m.world)
        .with(
            "groups",
            Json::Array(
                (0..m.groups.len())
                    .map(|g| group_full(m, g).with("membership", m.groups[g].membership.as_str()))
                    .collect(),
            ),
        )
        .with(
            "root",
            Json::Array(f.roots.iter().map(|r| root_json(f, r)).collect()),
        )
        .with(
            "partial_collectives",
            Json::Array(
                f.alignment
                    .partials
                    .iter()
                    .map(|p| partial_json(f, p))
                    .collect(),
            ),
        )
        .with(
            "mismatches",
            Json::Array(
                f.alignment
                    .mismatches
                    .iter()
                    .map(|x| mismatch_json(f, x))
                    .collect(),
            ),
        )
        .with(
            "wait_for",
            Json::Array(f.edges.iter().map(|e| edge_json(m, e)).collect()),
        )
        .with(
            "ranks",
            Json::Array(f.positions.iter().map(|p| rank_json(f, p)).collect()),
        )
        .with(
            "step",
            Json::object().with("value", step_json(step)).with(
                "source",
                if step >= 0 {
                    m.step_source.as_str()
                } else {
                    "unknown"
                },
            ),
        )
        .with(
            "sequence_numbers",
            if f.kinds.contains(&"flight_recorder") {
                "flight_recorder"
            } else if m.seq_estimated {
                "estimated from the traces"
            } else if f.kinds.is_empty() {
                "unknown"
            } else {
                "from the traces"
            },
        )
        .with("evidence", Json::Array(f.evidence.clone()))
        .with(
            "conclusions",
            Json::Array(
                f.conclusions
                    .iter()
                    .map(|(s, k, c)| {
                        Json::object()
                            .with("statement", s.as_str())
                            .with("evidence", kinds_json(k))
                            .with("confidence", *c)
                    })
                    .collect(),
            ),
        )
        .with(
            "notes",
            Json::Array(m.notes.iter().map(|n| Json::from(n.as_str())).collect()),
        )
        .with(
            "compared",
            Json::object()
                .with("collectives", f.alignment.compared)
                .with("skipped_after_mismatch", f.alignment.skipped_after_mismatch),
        )
}
