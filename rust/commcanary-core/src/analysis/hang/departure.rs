//! A rank's last collective set against its own history: the same call,
//! at the same place in its loop, with another dtype or size than every
//! earlier iteration gave it.
//!
//! gloo aborts the member that *receives* bytes of the wrong size, so the
//! rank that issued the odd call often survives while its peer dies without
//! a dump: no vote across members can then see the disagreement. The
//! survivor's own loop can. The loop is read from the rank's collectives
//! before the last (their period, see [`super::steps::period`], over
//! `(group, op, sizes)`, else `(group, op)`); the last call is compared with the calls one,
//! two, ... periods earlier at the same place, which must agree among
//! themselves (at least [`MIN_EARLIER`] of them), and the odd dtype or size
//! must be one the rank never gave that op on that group before (else a
//! skipped call shifted its loop).

use rayon::prelude::*;

use super::graph::Root;
use super::model::{Model, Op};
use super::steps;

/// Earlier iterations that must agree before a change counts.
pub const MIN_EARLIER: usize = 2;
/// Earlier iterations looked at.
const MAX_EARLIER: usize = 4;

/// A rank's last collective that departs from its own earlier iterations.
#[derive(Debug, Clone, PartialEq)]
pub struct Departure {
    /// Rank.
    pub rank: i64,
    /// Group index.
    pub group: usize,
    /// Sequence number.
    pub seq: i64,
    /// Op.
    pub op: &'static str,
    /// `dtype` or `size`.
    pub kind: &'static str,
    /// What the earlier iterations gave (interned dtypes or sizes).
    pub usual: u32,
    /// What the last call gave.
    pub now: u32,
    /// Its step, −1 when unknown.
    pub step: i64,
}

/// The departure of rank `rank`'s last collective, if it has one.
#[must_use]
pub fn of_rank(model: &Model, rank: i64) -> Option<Departure> {
    let ops: Vec<Op> = model
        .ranks
        .get(&rank)?
        .ops
        .iter()
        .filter(|o| !o.p2p)
        .cloned()
        .collect();
    let last = ops.len().checked_sub(1)?;
    let now = &ops[last];
    let alike = |a: &Op, b: &Op| a.in_dtypes == b.in_dtypes && a.in_sizes == b.in_sizes;
    // A call its loop makes elsewhere (the next bucket's size) is a shift:
    // a skipped or reordered call, not an odd one. Checked first: it is
    // linear, and it settles almost every rank of a large job.
    if ops[..last]
        .iter()
        .any(|o| o.group == now.group && o.op == now.op && alike(o, now))
    {
        return None;
    }
    let sig = steps::op_signature(&ops);
    // The loop before the last call, its calls told apart by size where
    // that shows it (a step's several all_reduces), else by op.
    let p = steps::period(&steps::sized_signature(&ops[..last]))
        .or_else(|| steps::period(&sig[..last]))?;
    let earlier: Vec<&Op> = (1..=MAX_EARLIER)
        .filter_map(|k| last.checked_sub(k * p))
        .filter(|&i| sig[i] == sig[last])
        .map(|i| &ops[i])
        .collect();
    if earlier.len() < MIN_EARLIER {
        return None;
    }
    let usual = earlier[0];
    if !earlier.iter().all(|o| alike(o, usual)) {
        return None;
    }
    let (kind, usual, now_v) = if now.in_dtypes == usual.in_dtypes {
        ("size", usual.in_sizes, now.in_sizes)
    } else {
        ("dtype", usual.in_dtypes, now.in_dtypes)
    };
    Some(Departure {
        rank,
        group: now.group,
        seq: now.seq,
        op: now.op,
        kind,
        usual,
        now: now_v,
        step: now.step,
    })
}

/// When a root, or a rank whose last collective shares its group with a
/// root, made a departing last call, those ranks (kind `departed`, `cause`
/// indexing the returned departures) in place of the roots: the ranks that
/// vanished or stopped are then its victims (the peer gloo aborted).
#[must_use]
pub fn instead(model: &Model, roots: &[Root]) -> Option<(Vec<Root>, Vec<Departure>)> {
    if roots
        .iter()
        .any(|r| matches!(r.kind, "mismatch" | "broken"))
    {
        return None;
    }
    let is_root = |r: i64| roots.iter().any(|x| x.rank == r);
    let beside_root = |r: i64| {
        model.ranks.get(&r).is_some_and(|e| {
            e.ops.iter().rev().find(|o| !o.p2p).is_some_and(|o| {
                model
                    .groups
                    .get(o.group)
                    .is_some_and(|g| g.ranks.iter().any(|&m| m != r && is_root(m)))
            })
        })
    };
    let candidates: Vec<i64> = model
        .ranks
        .keys()
        .copied()
        .filter(|&r| is_root(r) || beside_root(r))
        .collect();
    let found: Vec<Departure> = candidates
        .par_iter()
        .filter_map(|&r| of_rank(model, r))
        .collect();
    if found.is_empty() {
        return None;
    }
    let roots = found
        .iter()
        .enumerate()
        .map(|(i, d)| Root {
            rank: d.rank,
            group: d.group,
            seq: d.seq,
            op: d.op,
            kind: "departed",
            cause: i,
        })
        .collect();
    Some((roots, found))
}

#[cfg(test)]
mod tests {
    use super::of_rank;
    use crate::analysis::hang::model::{Model, RankEvidence, Source};
    use crate::analysis::hang::tests::op;

    /// Rank 0's loop: all_reduce `[4]` then all_reduce `[2]`, four times,
    /// then a last all_reduce of `last`.
    fn looped(last: &str) -> Model {
        let mut m = Model::default();
        let mut ops = Vec::new();
        for i in 0..4 {
            ops.push(op(&mut m, 2 * i + 1, "all_reduce", "[[4]]", false));
            ops.push(op(&mut m, 2 * i + 2, "all_reduce", "[[2]]", false));
        }
        ops.push(op(&mut m, 9, "all_reduce", last, false));
        m.ranks.insert(
            0,
            RankEvidence {
                ops,
                source: Some(Source::FlightRecorder),
                ..RankEvidence::default()
            },
        );
        m
    }

    #[test]
    fn a_last_call_of_a_size_its_loop_never_gave_departs() {
        let d = of_rank(&looped("[[5]]"), 0).expect("a departure");
        assert_eq!((d.kind, d.seq, d.op), ("size", 9, "all_reduce"));
        assert!(of_rank(&looped("[[4]]"), 0).is_none(), "the usual call");
        assert!(
            of_rank(&looped("[[2]]"), 0).is_none(),
            "a size the loop gives elsewhere is a shift, not an odd call"
        );
    }
}
