//! Cross-rank matching: which calls of which ranks are one collective
//! instance of which process group.
//!
//! A record that names its group (NCCL) has one candidate group. A `c10d::`
//! call (gloo) does not: its candidates are the job's groups that contain the
//! rank and fit the call's shape (an all_gather's output/input ratio is the
//! group size, a root or peer must be a group rank). The matcher then walks
//! all calls in order of arrival; for the earliest unmatched call it looks,
//! in each candidate group (largest first), for one partner per other member:
//! that member's first unmatched call that can be on the group, with the same
//! operation, size, dtype, root and sequence number, and consistent in time
//! (a member that waits for another cannot have finished before the other
//! arrived). The members of a group issue its collectives in one order (the
//! backend pairs them by sequence), so a member's next call that can only be
//! on the group and differs ends the search: the instance is partial.
//!
//! Two passes: the first matches; then each execution thread (gloo runs a
//! group's collectives on that group's own worker threads) takes the group
//! most of its calls matched into, which removes the ambiguity of calls that
//! fit several groups (an all_reduce on a pair and on the world), and the
//! second pass matches again with those labels. A call that still fits more
//! than one complete instance is marked ambiguous. Nothing is guessed: an
//! instance lacking a member is kept apart as partial with the ranks seen and
//! missing.

use rustc_hash::FxHashMap;

use super::ops::Kind;
use super::profile::{Call, GroupDecl, RankProfile};

/// Slack of the time-consistency test, µs.
pub const MATCH_TOLERANCE_US: f64 = 500.0;
/// Unmatched calls a partner search looks at on one member.
const SCAN_LIMIT: usize = 512;

/// One member's call in an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// Index of the rank's profile.
    pub slot: usize,
    /// Index of the call in that profile.
    pub call: usize,
}

/// One collective instance (or a partial one).
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// Index into the job's groups.
    pub group: usize,
    /// Members seen, by slot order.
    pub members: Vec<Member>,
    /// Every member of the group (both ends of a p2p) took part.
    pub complete: bool,
    /// More than one group explained it equally well.
    pub ambiguous: bool,
}

/// The job as the matcher sees it.
pub struct Job<'a> {
    /// One profile per rank.
    pub profiles: &'a [RankProfile],
    /// Offset of each profile's clock onto the job clock, µs.
    pub shifts: &'a [f64],
    /// The job's groups.
    pub groups: &'a [GroupDecl],
    /// Profile index of each global rank present.
    pub slot_of_rank: &'a FxHashMap<i64, usize>,
    /// Per profile, per profile-group index, the job group index.
    pub group_maps: &'a [Vec<usize>],
}

/// Candidate groups of every call, per slot.
pub(super) struct Candidates {
    pool: Vec<Vec<u32>>,
    at: Vec<Vec<(u32, u32)>>,
}

impl Candidates {
    pub(super) fn of(&self, slot: usize, call: usize) -> &[u32] {
        let (s, n) = self.at[slot][call];
        &self.pool[slot][s as usize..(s + n) as usize]
    }

    fn restrict(&mut self, slot: usize, call: usize, group: u32) {
        let (s, n) = self.at[slot][call];
        if n > 1 && self.pool[slot][s as usize..(s + n) as usize].contains(&group) {
            self.pool[slot][s as usize] = group;
            self.at[slot][call] = (s, 1);
        }
    }
}

/// Matches the job's calls into instances, complete ones and partial ones.
#[must_use]
pub fn align(job: &Job<'_>) -> Vec<Instance> {
    let mut cands = candidates(job);
    let (first, _) = sweep(job, &cands);
    restrict_threads(job, &thread_labels(thread_votes(job, &first)), &mut cands);
    sweep(job, &cands).0
}

/// Where the sweep took up an instance: its first call's arrival on the job
/// clock, slot and call index. The sweep emits instances in this order.
pub type SweepKey = (f64, usize, usize);

/// Per execution thread `(slot, thread)`, how many of its calls each group's
/// complete instances took.
pub type ThreadVotes = FxHashMap<(usize, i64), FxHashMap<usize, u32>>;

pub(super) fn candidates(job: &Job<'_>) -> Candidates {
    let mut pool = Vec::with_capacity(job.profiles.len());
    let mut at = Vec::with_capacity(job.profiles.len());
    for (slot, p) in job.profiles.iter().enumerate() {
        if p.calls.is_empty() {
            // A rank without calls here (a shard's job holds every slot).
            pool.push(Vec::new());
            at.push(Vec::new());
            continue;
        }
        // The groups this rank is in, ascending: a call can only be on one
        // of them (`fits` asks that first), so a job of many small groups
        // costs each call its rank's groups, not every group of the job.
        let members: Vec<u32> = (0..job.groups.len() as u32)
            .filter(|&g| job.groups[g as usize].ranks.contains(&p.rank))
            .collect();
        let mut mine: Vec<u32> = Vec::new();
        let mut spans = Vec::with_capacity(p.calls.len());
        for c in &p.calls {
            let start = mine.len() as u32;
            if c.group >= 0 {
                mine.push(job.group_maps[slot][c.group as usize] as u32);
            } else {
                let mut fit: Vec<u32> = members
                    .iter()
                    .copied()
                    .filter(|&g| fits(c, p.rank, &job.groups[g as usize]))
                    .collect();
                fit.sort_by_key(|&g| std::cmp::Reverse(job.groups[g as usize].ranks.len()));
                mine.extend(fit);
            }
            spans.push((start, mine.len() as u32 - start));
        }
        pool.push(mine);
        at.push(spans);
    }
    Candidates { pool, at }
}

/// Whether call `c` of `rank` can be a call on `g`.
fn fits(c: &Call, rank: i64, g: &GroupDecl) -> bool {
    let size = g.ranks.len() as i64;
    if !g.ranks.contains(&rank) {
        return false;
    }
    match c.kind {
        Kind::AllGather if c.out_tensors > 1 => c.out_tensors == size,
        Kind::AllGather if c.in_elems > 0 && c.out_elems % c.in_elems == 0 => {
            c.out_elems / c.in_elems == size
        }
        Kind::ReduceScatter if c.out_elems > 0 && c.in_elems % c.out_elems == 0 => {
            c.in_elems / c.out_elems == size
        }
        Kind::Broadcast | Kind::Reduce | Kind::Gather | Kind::Scatter => c.peer < size,
        Kind::Send | Kind::Recv => {
            if c.peer_global >= 0 {
                c.peer_global != rank && g.ranks.contains(&c.peer_global)
            } else {
                c.peer >= 0 && c.peer < size && g.ranks[c.peer as usize] != rank
            }
        }
        _ => true,
    }
}

/// Matching state of one sweep.
struct Sweep<'j, 'a> {
    job: &'j Job<'a>,
    cands: &'j Candidates,
    assigned: Vec<Vec<bool>>,
    cursor: Vec<usize>,
    /// Per slot, the index of its fence: a call past the calls being
    /// matched (the next call of the rank's in the whole job), which only a
    /// partner search reads, to tell whether the whole job's search would
    /// stop there. Empty: no fences.
    fences: &'j [Option<usize>],
    /// Some partner search would have gone on past a fence (or matched it).
    ran_on: bool,
}

/// One matching pass over calls that end at fences: its instances, the key
/// of the call that opened each (in key order), and whether some partner
/// search would have read past a fence, where the whole job's matching can
/// differ from this one.
pub(super) struct Swept {
    /// The instances, in key order.
    pub instances: Vec<Instance>,
    /// The key of each instance's opening call.
    pub keys: Vec<SweepKey>,
    /// A partner search reached past a fence.
    pub ran_on: bool,
}

/// One matching pass: the instances, each with the key of the call that
/// opened it, in key order.
pub(super) fn sweep(job: &Job<'_>, cands: &Candidates) -> (Vec<Instance>, Vec<SweepKey>) {
    let swept = sweep_fenced(job, cands, &[]);
    (swept.instances, swept.keys)
}

/// [`sweep`] over every call but the fences (per slot, the index of its
/// fence, when it has one).
pub(super) fn sweep_fenced(job: &Job<'_>, cands: &Candidates, fences: &[Option<usize>]) -> Swept {
    let fence_of = |slot: usize| fences.get(slot).copied().flatten();
    let mut order: Vec<(f64, usize, usize)> = Vec::new();
    for (slot, p) in job.profiles.iter().enumerate() {
        for (i, c) in p.calls.iter().enumerate() {
            if fence_of(slot) != Some(i) {
                order.push((c.arrival + job.shifts[slot], slot, i));
            }
        }
    }
    order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut s = Sweep {
        job,
        cands,
        assigned: job
            .profiles
            .iter()
            .map(|p| vec![false; p.calls.len()])
            .collect(),
        cursor: vec![0; job.profiles.len()],
        fences,
        ran_on: false,
    };
    let mut instances = Vec::new();
    let mut keys = Vec::new();
    for &(at, slot, i) in &order {
        if s.assigned[slot][i] {
            continue;
        }
        let instance = s.instance_of(slot, i);
        for m in &instance.members {
            s.assigned[m.slot][m.call] = true;
        }
        instances.push(instance);
        keys.push((at, slot, i));
    }
    Swept {
        instances,
        keys,
        ran_on: s.ran_on,
    }
}

impl Sweep<'_, '_> {
    fn call(&self, slot: usize, i: usize) -> &Call {
        &self.job.profiles[slot].calls[i]
    }

    /// The instance that call `i` of `slot` belongs to.
    fn instance_of(&mut self, slot: usize, i: usize) -> Instance {
        let own = Member { slot, call: i };
        let mut complete: Vec<(usize, Vec<Member>)> = Vec::new();
        let mut partial: Option<(usize, Vec<Member>)> = None;
        for &g in self.cands.of(slot, i) {
            let g = g as usize;
            if let Some((first, _)) = complete.first()
                && self.job.groups[*first].ranks.len() > self.job.groups[g].ranks.len()
            {
                break;
            }
            let (found, all) = self.partners(slot, i, g);
            if all {
                complete.push((g, found));
            } else if partial.as_ref().is_none_or(|p| found.len() > p.1.len()) {
                partial = Some((g, found));
            }
        }
        let ambiguous = complete.len() > 1;
        let (group, mut members, done) = match self.best(complete) {
            Some((g, m)) => (g, m, true),
            None => match partial {
                Some((g, m)) => (g, m, false),
                None => (usize::MAX, Vec::new(), false),
            },
        };
        members.push(own);
        members.sort_by_key(|m| m.slot);
        Instance {
            group,
            members,
            complete: done,
            ambiguous,
        }
    }

    /// Of several complete instances, the one whose members finish closest
    /// together.
    fn best(&self, complete: Vec<(usize, Vec<Member>)>) -> Option<(usize, Vec<Member>)> {
        let spread = |m: &Vec<Member>| {
            let ends = m
                .iter()
                .map(|x| self.call(x.slot, x.call).end + self.job.shifts[x.slot]);
            let (lo, hi) = ends.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), e| {
                (l.min(e), h.max(e))
            });
            if m.is_empty() { 0.0 } else { hi - lo }
        };
        complete
            .into_iter()
            .min_by(|a, b| spread(&a.1).total_cmp(&spread(&b.1)))
    }

    /// Partners of call `i` of `slot` on group `g`, and whether every member
    /// (or the p2p peer) was found.
    fn partners(&mut self, slot: usize, i: usize, g: usize) -> (Vec<Member>, bool) {
        let job = self.job;
        let c = &job.profiles[slot].calls[i];
        let rank = job.profiles[slot].rank;
        let group = &job.groups[g];
        let others: Vec<i64> = if c.kind.is_p2p() {
            vec![peer_of(c, group)]
        } else {
            group.ranks.iter().copied().filter(|&r| r != rank).collect()
        };
        let mut found = Vec::with_capacity(others.len());
        for m in others {
            let Some(&ms) = job.slot_of_rank.get(&m) else {
                continue;
            };
            if let Some(j) = self.find(ms, g, slot, c) {
                found.push(Member { slot: ms, call: j });
            }
        }
        let all = found.len()
            == if c.kind.is_p2p() {
                1
            } else {
                group.ranks.len() - 1
            };
        (found, all)
    }

    /// The first unmatched call of `ms` that is `c`'s partner on `g`. A
    /// search that would match the rank's fence, or read on past it, ends
    /// there and marks the sweep as having run on.
    fn find(&mut self, ms: usize, g: usize, slot: usize, c: &Call) -> Option<usize> {
        let fence = self.fences.get(ms).copied().flatten();
        match self.search(ms, g, slot, c) {
            Some(found) if found.is_none() || found != fence => found,
            _ => {
                self.ran_on = true;
                None
            }
        }
    }

    /// The whole job's partner search on `ms`, up to its fence: `None` when
    /// it reaches the fence and would go on past it, else its answer.
    #[allow(clippy::option_option)]
    fn search(&mut self, ms: usize, g: usize, slot: usize, c: &Call) -> Option<Option<usize>> {
        let calls = &self.job.profiles[ms].calls;
        while self.cursor[ms] < calls.len() && self.assigned[ms][self.cursor[ms]] {
            self.cursor[ms] += 1;
        }
        let group = &self.job.groups[g];
        let ranks = (self.job.profiles[slot].rank, self.job.profiles[ms].rank);
        let (cs, ps) = (self.job.shifts[slot], self.job.shifts[ms]);
        let mut seen = 0;
        for (j, p) in calls.iter().enumerate().skip(self.cursor[ms]) {
            if self.assigned[ms][j] {
                continue;
            }
            if p.kind.is_p2p() != c.kind.is_p2p() {
                continue;
            }
            let cand = self.cands.of(ms, j);
            if !cand.contains(&(g as u32)) {
                continue;
            }
            if waits(c, ranks.0, p, ranks.1, group)
                && p.end_measured
                && c.end_measured
                && p.arrival + ps > c.end + cs + MATCH_TOLERANCE_US
            {
                return Some(None);
            }
            if same_instance(c, ranks.0, p, ranks.1, group)
                && consistent_in_time(c, cs, ranks.0, p, ps, ranks.1, group)
            {
                return Some(Some(j));
            }
            if cand.len() == 1 && !c.kind.is_p2p() {
                return Some(None);
            }
            seen += 1;
            if seen >= SCAN_LIMIT {
                return Some(None);
            }
        }
        if self.fences.get(ms).copied().flatten().is_some() {
            return None;
        }
        Some(None)
    }
}

/// The global rank of a p2p call's peer on `g` (−1 when not resolvable).
pub(super) fn peer_of(c: &Call, g: &GroupDecl) -> i64 {
    if c.peer_global >= 0 {
        return c.peer_global;
    }
    g.ranks
        .get(c.peer.max(0) as usize)
        .copied()
        .filter(|_| c.peer >= 0)
        .unwrap_or(-1)
}

/// The root's global rank of a rooted collective on `g`.
fn root_rank(c: &Call, g: &GroupDecl) -> i64 {
    g.ranks.get(c.peer.max(0) as usize).copied().unwrap_or(-1)
}

/// Whether `x` (of rank `xr`) cannot finish before `y` (of rank `yr`)
/// arrives.
fn waits(x: &Call, xr: i64, y: &Call, yr: i64, g: &GroupDecl) -> bool {
    match x.kind {
        Kind::Broadcast | Kind::Scatter => root_rank(x, g) == yr,
        Kind::Reduce | Kind::Gather => root_rank(x, g) == xr,
        Kind::Recv => y.kind == Kind::Send,
        Kind::Send => false,
        _ => true,
    }
}

/// Whether `p` (of `pr`) is the same operation as `c` (of `cr`) on `g`.
fn same_instance(c: &Call, cr: i64, p: &Call, pr: i64, g: &GroupDecl) -> bool {
    if c.dtype != p.dtype || (c.seq >= 0 && p.seq >= 0 && c.seq != p.seq) {
        return false;
    }
    if c.kind.is_p2p() {
        let complementary = matches!(
            (c.kind, p.kind),
            (Kind::Send, Kind::Recv) | (Kind::Recv, Kind::Send)
        );
        let tags = c.tag < 0 || p.tag < 0 || c.tag == p.tag;
        return complementary
            && tags
            && c.bytes == p.bytes
            && peer_of(c, g) == pr
            && peer_of(p, g) == cr;
    }
    if c.kind != p.kind || c.name != p.name && c.kind == Kind::Other {
        return false;
    }
    match c.kind {
        Kind::AllToAll => true,
        Kind::Broadcast | Kind::Reduce | Kind::Gather | Kind::Scatter => {
            c.peer == p.peer && c.bytes == p.bytes
        }
        _ => c.bytes == p.bytes,
    }
}

/// Whether the two calls can be one instance given when each ran.
fn consistent_in_time(
    c: &Call,
    cs: f64,
    cr: i64,
    p: &Call,
    ps: f64,
    pr: i64,
    g: &GroupDecl,
) -> bool {
    if !(c.end_measured && p.end_measured) {
        return true;
    }
    let (ca, ce, pa, pe) = (c.arrival + cs, c.end + cs, p.arrival + ps, p.end + ps);
    let c_ok = !waits(c, cr, p, pr, g) || pa <= ce + MATCH_TOLERANCE_US;
    let p_ok = !waits(p, pr, c, cr, g) || ca <= pe + MATCH_TOLERANCE_US;
    c_ok && p_ok
}

/// The first pass's votes: for each execution thread, the groups its calls
/// matched into (complete instances only).
pub(super) fn thread_votes(job: &Job<'_>, first: &[Instance]) -> ThreadVotes {
    let mut votes = ThreadVotes::default();
    for inst in first.iter().filter(|i| i.complete) {
        for m in &inst.members {
            let t = job.profiles[m.slot].calls[m.call].thread;
            if t >= 0 {
                *votes
                    .entry((m.slot, t))
                    .or_default()
                    .entry(inst.group)
                    .or_default() += 1;
            }
        }
    }
    votes
}

/// Each execution thread's group: the one most of its calls matched into,
/// when that is a clear majority (at least 2 calls and 90%).
pub fn thread_labels(votes: ThreadVotes) -> FxHashMap<(usize, i64), usize> {
    let mut label: FxHashMap<(usize, i64), usize> = FxHashMap::default();
    for (key, counts) in votes {
        let total: u32 = counts.values().sum();
        let (g, n) = counts
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            .unwrap_or((0, 0));
        if n >= 2 && f64::from(n) >= 0.9 * f64::from(total) {
            label.insert(key, g);
        }
    }
    label
}

/// Restricts every call of a labelled thread to the thread's group (where
/// the group is among the call's candidates).
pub(super) fn restrict_threads(
    job: &Job<'_>,
    label: &FxHashMap<(usize, i64), usize>,
    cands: &mut Candidates,
) {
    for (slot, p) in job.profiles.iter().enumerate() {
        for (i, c) in p.calls.iter().enumerate() {
            if let Some(&g) = label.get(&(slot, c.thread)) {
                cands.restrict(slot, i, g as u32);
            }
        }
    }
}
