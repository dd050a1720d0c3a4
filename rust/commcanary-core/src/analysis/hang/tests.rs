//! The alignment and the graph on small hand-built models.

use super::align::align;
use super::graph::{positions, roots, wait_for, waits_in_transfer};
use super::model::{GroupInfo, Model, NONE, Op, RankEvidence, Source};

/// A call on group 0 (dtype `Float`) issued at `1000 × seq` ns.
pub(super) fn op(
    model: &mut Model,
    seq: i64,
    name: &'static str,
    sizes: &str,
    pending: bool,
) -> Op {
    let s = model.intern(sizes);
    let d = model.intern("Float");
    Op {
        group: 0,
        seq,
        p2p: false,
        peer: -1,
        peer_is_global: false,
        root: -1,
        op: name,
        in_sizes: s,
        out_sizes: s,
        in_dtypes: d,
        out_dtypes: d,
        pending,
        time_ns: 1_000 * seq,
        step: -1,
        frame: NONE,
        timeout_ms: -1,
        done_ns: 0,
    }
}

/// Ranks 0..n on one group; rank r issued `seqs[r]` all_reduces, the last pending
/// when `stuck[r]`.
fn model(seqs: &[i64], stuck: &[bool], first: &[i64]) -> Model {
    let mut m = Model::default();
    m.world = seqs.len() as i64;
    m.groups.push(GroupInfo {
        name: "0".into(),
        desc: "default_pg".into(),
        ranks: (0..seqs.len() as i64).collect(),
        membership: String::new(),
    });
    for (r, &n) in seqs.iter().enumerate() {
        let ops = (first[r]..=n)
            .map(|s| op(&mut m, s, "all_reduce", "[[4]]", stuck[r] && s == n))
            .collect();
        m.ranks.insert(
            r as i64,
            RankEvidence {
                ops,
                source: Some(Source::FlightRecorder),
                from_start: first[r] == 1,
                ..RankEvidence::default()
            },
        );
    }
    m
}

#[test]
fn a_rank_behind_in_a_group_is_missing_and_the_root_when_not_blocked() {
    let m = model(&[5, 5, 4], &[true, true, false], &[1, 1, 1]);
    let a = align(&m);
    assert_eq!(a.partials.len(), 1);
    assert_eq!(
        (a.partials[0].seq, a.partials[0].missing.clone()),
        (5, vec![2])
    );
    let p = positions(&m, &a);
    assert_eq!(p[2].state, "not_blocked");
    let r = roots(&a, &p, &|_| false, &|_| 0);
    assert_eq!((r[0].rank, r[0].kind), (2, "not_blocked"));
    assert_eq!(
        wait_for(&a)
            .iter()
            .map(|e| (e.rank, e.waits_for))
            .collect::<Vec<_>>(),
        vec![(0, 2), (1, 2)]
    );
}

#[test]
fn a_rotated_ring_is_not_a_missing_rank() {
    // Rank 2's ring starts at 3: sequence numbers 1-2 are unknown there, not missing.
    let m = model(&[5, 5, 5], &[false, false, false], &[1, 1, 3]);
    let a = align(&m);
    assert!(a.partials.is_empty() && a.mismatches.is_empty());
    assert_eq!(
        a.compared, 3,
        "only the window every rank recorded is compared"
    );
}

#[test]
fn a_mismatch_is_decided_by_vote_and_a_tie_names_no_majority() {
    let mut m = model(&[3, 3, 3], &[true, true, true], &[1, 1, 1]);
    let odd = op(&mut m, 3, "all_reduce", "[[8]]", true);
    m.ranks.get_mut(&0).unwrap().ops[2] = odd;
    let a = align(&m);
    assert_eq!(
        (
            a.mismatches[0].kind,
            a.mismatches[0].majority.clone(),
            a.mismatches[0].minority.clone()
        ),
        ("size", vec![1, 2], vec![0])
    );
    let p = positions(&m, &a);
    assert_eq!(
        roots(&a, &p, &|_| false, &|_| 0)[0].rank,
        0,
        "the first rank is not trusted"
    );

    let mut m = model(&[3, 3], &[true, true], &[1, 1]);
    let odd = op(&mut m, 3, "broadcast", "[[4]]", true);
    m.ranks.get_mut(&1).unwrap().ops[2] = odd;
    let a = align(&m);
    assert_eq!(
        (a.mismatches[0].kind, a.mismatches[0].majority.len()),
        ("op", 0)
    );
    assert!(
        roots(&a, &positions(&m, &a), &|_| false, &|_| 0).is_empty(),
        "a tie blames no one"
    );
}

#[test]
fn a_rank_without_evidence_is_missing() {
    let mut m = model(&[2, 2, 2], &[true, true, false], &[1, 1, 1]);
    m.ranks.remove(&2);
    let a = align(&m);
    assert_eq!(a.partials[0].missing, vec![2]);
    let r = roots(&a, &positions(&m, &a), &|_| false, &|_| 0);
    // Sequence number 1 completed, so rank 2 took part; 2 is still in flight.
    assert_eq!(a.partials.len(), 1);
    assert_eq!((r[0].rank, r[0].kind, r[0].seq), (2, "no_evidence", 2));
}

#[test]
fn members_left_in_a_collective_the_others_completed_are_its_broken_roots() {
    // Broadcast #3: ranks 1 and 3 completed it and wait in all_reduce #4;
    // ranks 0 and 2 are still in it (they disagreed on its root).
    let mut m = model(&[3, 4, 3, 4], &[true, true, true, true], &[1, 1, 1, 1]);
    for r in 0..4 {
        let bcast = op(&mut m, 3, "broadcast", "[[4]]", r % 2 == 0);
        m.ranks.get_mut(&r).unwrap().ops[2] = bcast;
    }
    let a = align(&m);
    assert_eq!(
        (
            a.broken.len(),
            a.broken[0].stuck.clone(),
            a.broken[0].done.clone()
        ),
        (1, vec![0, 2], vec![1, 3])
    );
    let p = positions(&m, &a);
    let r = roots(&a, &p, &|_| false, &|_| 0);
    assert_eq!(
        r.iter()
            .map(|x| (x.rank, x.kind, x.seq))
            .collect::<Vec<_>>(),
        vec![(0, "broken", 3), (2, "broken", 3)],
        "not 'skipped all_reduce #4': they are in the broadcast the others left"
    );
}

#[test]
fn a_chain_of_receives_ends_at_a_send_and_receive_both_stuck() {
    // Rank 2 waits for rank 1's send; rank 1 is in its receive from rank 0,
    // which pairs with rank 0's send by count: both stuck.
    let mut m = model(&[1, 1, 1], &[false, false, false], &[1, 1, 1]);
    let p2p = |m: &mut Model, name: &'static str, peer: i64| {
        let mut o = op(m, 1, name, "[[4]]", true);
        (o.p2p, o.peer, o.peer_is_global) = (true, peer, true);
        o
    };
    let calls = [(0, "send", 1), (1, "recv", 0), (2, "recv", 1)];
    for (rank, name, peer) in calls {
        let o = p2p(&mut m, name, peer);
        m.ranks.get_mut(&rank).unwrap().ops.push(o);
    }
    let a = align(&m);
    assert_eq!(
        a.stuck_pairs
            .iter()
            .map(|s| (s.sender, s.receiver))
            .collect::<Vec<_>>(),
        vec![(0, 1)]
    );
    let r = roots(&a, &positions(&m, &a), &|_| false, &|r| usize::from(r == 0));
    assert_eq!(
        r.iter().map(|x| (x.rank, x.kind)).collect::<Vec<_>>(),
        vec![(0, "stuck_pair")],
        "the side whose own loop departs, not rank 1 that rank 2 waits for"
    );
}

#[test]
fn a_chain_of_receives_ends_at_the_rank_that_waits_in_none() {
    // Rank 2 waits for rank 1's send, rank 1 for rank 0's; rank 0 posted no
    // send (it is still in all_reduce #1): the chain's end is the root, not
    // the rank the earliest unmatched receive waits for.
    let mut m = model(&[1, 1, 1], &[true, false, false], &[1, 1, 1]);
    for (rank, peer, at) in [(1, 0, 5_000), (2, 1, 2_000)] {
        let mut o = op(&mut m, 1, "recv", "[[4]]", true);
        (o.p2p, o.peer, o.peer_is_global, o.time_ns) = (true, peer, true, at);
        m.ranks.get_mut(&rank).unwrap().ops.push(o);
    }
    let a = align(&m);
    let r = roots(&a, &positions(&m, &a), &|_| false, &|_| 0);
    assert_eq!(r.iter().map(|x| x.rank).collect::<Vec<_>>(), vec![0]);
    // The chain's end waits in no transfer; a root that did (rank 1, itself
    // waiting on rank 0) would be where the chain was cut.
    let edges = wait_for(&a);
    assert!(!waits_in_transfer(&r, &edges));
    let mut cut = r.clone();
    cut[0].rank = 1;
    assert!(waits_in_transfer(&cut, &edges));
}

#[test]
fn ranks_blocked_in_a_tied_root_desync_are_its_undecided_sides() {
    // Rank 0 waits in all_reduce #2 on the world for ranks 1 and 2, which
    // are in broadcast #1 of their pair, each naming a different root.
    let mut m = model(&[2, 1, 1], &[true, false, false], &[1, 1, 1]);
    m.groups.push(GroupInfo {
        name: "1".into(),
        desc: "pair".into(),
        ranks: vec![1, 2],
        membership: String::new(),
    });
    for rank in [1_i64, 2] {
        let mut o = op(&mut m, 1, "broadcast", "[[4]]", true);
        (o.group, o.root) = (1, rank);
        m.ranks.get_mut(&rank).unwrap().ops.push(o);
    }
    let a = align(&m);
    let p = positions(&m, &a);
    let r = roots(&a, &p, &|_| false, &|_| 0);
    let facts = super::cause::Facts {
        model: &m,
        alignment: &a,
        positions: &p,
        died: &[],
        dumps_lack_p2p: false,
        kinds: &["flight_recorder"],
        mismatch_reports: &[],
        estimated_only: false,
    };
    let c = super::cause::cause(&facts, &r, &|_| false);
    assert_eq!(
        (c.category, c.desync_kind, c.undecided),
        (Some("desync"), Some("root"), true)
    );
}

#[test]
fn gloo_traces_alone_leave_open_how_a_rank_without_a_trace_ended() {
    // Ranks 0 and 1 wait in all_reduce #3; rank 2 left no trace. From
    // gloo traces alone that reads alike for a killed rank and one gloo
    // aborted on a mismatch; the launcher's word that it died settles it.
    let mut m = model(&[3, 3, 3], &[true, true, false], &[1, 1, 1]);
    m.ranks.remove(&2);
    let a = align(&m);
    let p = positions(&m, &a);
    let r = roots(&a, &p, &|_| false, &|_| 0);
    assert_eq!(
        r.iter().map(|x| (x.rank, x.kind)).collect::<Vec<_>>(),
        vec![(2, "no_evidence")]
    );
    let facts = |died: &'static [i64]| super::cause::Facts {
        model: &m,
        alignment: &a,
        positions: &p,
        died,
        dumps_lack_p2p: false,
        kinds: &["kineto"],
        mismatch_reports: &[],
        estimated_only: true,
    };
    let open = super::cause::cause(&facts(&[]), &r, &|_| false);
    assert_eq!((open.category, open.undecided), (None, true));
    assert!(
        open.would_settle
            .iter()
            .any(|w| w.contains("how rank 2 ended"))
    );
    let killed = super::cause::cause(&facts(&[2]), &r, &|_| false);
    assert_eq!(
        (killed.category, killed.undecided),
        (Some("process_died"), false)
    );
}

/// A pending receive on `rank` from `peer`, issued at `at` ns.
fn pending_recv(m: &mut Model, rank: i64, peer: i64, at: i64) {
    let mut o = op(m, 1, "recv", "[[4]]", true);
    (o.p2p, o.peer, o.peer_is_global, o.time_ns) = (true, peer, true, at);
    m.ranks.get_mut(&rank).unwrap().ops.push(o);
}

#[test]
fn a_rank_that_skipped_a_collective_and_waits_in_a_receive_is_the_root() {
    // Ranks 0 and 1 wait in all_reduce #2 (issued at 2,000 ns); rank 2 never
    // joined it and waits in a receive from rank 1 (issued later): rank 1
    // posts no send because it waits for rank 2. The cycle starts at the
    // earliest waiting call, the all_reduce: rank 2 skipped it.
    let mut m = model(&[2, 2, 1], &[true, true, false], &[1, 1, 1]);
    pending_recv(&mut m, 2, 1, 3_000);
    let a = align(&m);
    let r = roots(&a, &positions(&m, &a), &|_| false, &|_| 0);
    assert_eq!(
        r.iter().map(|x| (x.rank, x.op)).collect::<Vec<_>>(),
        vec![(2, "all_reduce")]
    );
}

#[test]
fn a_rank_that_skipped_a_send_and_went_on_to_a_collective_is_the_root() {
    // Rank 0 waits (since 2,500 ns) for rank 2's send, which rank 2 skipped:
    // it went on to all_reduce #3 (3,000 ns) with rank 1, where both wait
    // for rank 0. The earliest waiting call is rank 0's receive.
    let mut m = model(&[2, 3, 3], &[false, true, true], &[1, 1, 1]);
    pending_recv(&mut m, 0, 2, 2_500);
    let a = align(&m);
    let r = roots(&a, &positions(&m, &a), &|_| false, &|_| 0);
    assert_eq!(
        r.iter().map(|x| (x.rank, x.op)).collect::<Vec<_>>(),
        vec![(2, "send")]
    );
}

#[test]
fn a_cycle_through_a_collective_is_read_by_time_whatever_the_loops_say() {
    // As above, with the innocent partner's loop looking odd (it is blocked
    // in a call its loop would have it past): the earliest waiting call
    // still decides.
    let mut m = model(&[2, 2, 1], &[true, true, false], &[1, 1, 1]);
    pending_recv(&mut m, 2, 1, 3_000);
    let a = align(&m);
    let r = roots(&a, &positions(&m, &a), &|r| r == 1, &|_| 0);
    assert_eq!(r.iter().map(|x| x.rank).collect::<Vec<_>>(), vec![2]);
}
