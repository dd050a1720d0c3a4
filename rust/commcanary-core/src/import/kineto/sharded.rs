//! A job import as steps that run where the data is: per rank on the worker
//! that read the rank's file, per shard of groups ([`super::shard`]) on a
//! worker that gathers only the shard's calls, and job-wide on the client
//! over a few words per rank and per event. The messages between the steps
//! are bytes in [`crate::import::bytes`]' form; the client never holds a
//! rank's calls.
//!
//! 1. client, [`frame`]: the ranks' heads (a profile without its calls,
//!    [`head`]) checked to be one job and put on the job clock: the
//!    [`Shape`] every other step gets;
//! 2. per rank, as it is read, [`own_candidate_sets`]: the candidate-group
//!    sets of its calls that name several groups, by name;
//! 3. client, [`shard_map`]: groups joined by those sets into shards;
//! 4. per rank, [`split`]: its calls cut into one [`Piece`] per shard;
//! 5. per shard, [`shard_votes`]: the first matching pass's thread votes;
//!    the client sums them into labels ([`super::shard::thread_labels`]);
//! 6. per shard, [`shard_prepare`]: the second pass, and each complete
//!    instance's start, end, group and sweep key;
//! 7. client, [`place_shards`]: the events' order, origin, concurrent
//!    groups and per-group positions, job-wide;
//! 8. per shard, [`shard_events`]: its events' canonical JSON and its
//!    partial collectives;
//! 9. client, [`assemble`]: the events in order, the job's members, the
//!    checks: the trace [`super::job::import_job`] writes, byte for byte.
//!
//! [`import_job_sharded`] runs the steps in one process (tests, and the
//! reference a cluster's run is held to). It applies to jobs of one file
//! per rank whose calls carry `ProfilerStep` markers ([`frame`] says
//! `None` otherwise): joining a rank's windows and recovering steps from
//! the collective sequence need the whole job, and run as before.

use rustc_hash::FxHashMap;

use super::align::{Candidates, Instance, Job, SweepKey, ThreadVotes};
use super::codec;
use super::events::{
    PartialCollective, Placement, Prepared, first_arrival, order_of_events,
    partials_in_sweep_order, place, prepare, write_prepared,
};
use super::job::{
    AlignedJob, CallFacts, JobImport, JobOptions, JobTail, finish_import, frame_job, join_profiles,
};
use super::profile::{GroupDecl, RankProfile};
use super::ranges::{UnitCheck, range_bounds, settle};
use super::shard::{add_votes, root, thread_labels, union_groups};
use crate::byte_form::{Reader, Writer, corrupt};
use crate::error::Result;
use crate::trace::{Trace, TraceBuilder, decode_part, encode_part};

/// What a shard's steps need of the job: each slot's rank, clock shift and
/// group map, and the groups. No calls: a few words per rank.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// Global rank of each slot.
    pub ranks: Vec<i64>,
    /// Offset of each slot's clock onto the job clock, µs.
    pub shifts: Vec<f64>,
    /// The job's groups.
    pub groups: Vec<GroupDecl>,
    /// Per slot, per profile-group index, the job group index.
    pub group_maps: Vec<Vec<usize>>,
}

impl Shape {
    /// The shape of a framed job.
    #[must_use]
    pub fn of(job: &AlignedJob) -> Self {
        Self {
            ranks: job.profiles.iter().map(|p| p.rank).collect(),
            shifts: job.shifts.clone(),
            groups: job.groups.clone(),
            group_maps: job.group_maps.clone(),
        }
    }

    /// The shape as bytes.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::new());
        w.u64(self.ranks.len() as u64);
        for ((&r, &s), map) in self.ranks.iter().zip(&self.shifts).zip(&self.group_maps) {
            w.i64(r);
            w.f64(s);
            w.u64(map.len() as u64);
            map.iter().for_each(|&g| w.u64(g as u64));
        }
        codec::write_groups(&mut w, &self.groups);
        w.0
    }

    /// A shape from [`Shape::encode`]'s bytes.
    ///
    /// # Errors
    /// Bytes that are not an encoded shape.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes);
        let (mut ranks, mut shifts, mut group_maps) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..r.count(24)? {
            ranks.push(r.i64()?);
            shifts.push(r.f64()?);
            let n = r.count(8)?;
            group_maps.push(
                (0..n)
                    .map(|_| Ok(r.u64()? as usize))
                    .collect::<Result<Vec<_>>>()?,
            );
        }
        let groups = codec::read_groups(&mut r)?;
        let shape = Self {
            ranks,
            shifts,
            groups,
            group_maps,
        };
        let groups = shape.groups.len();
        if !r.done() || shape.group_maps.iter().flatten().any(|&g| g >= groups) {
            return Err(corrupt());
        }
        Ok(shape)
    }

    fn slot_of_rank(&self) -> FxHashMap<i64, usize> {
        self.ranks
            .iter()
            .enumerate()
            .map(|(i, &r)| (r, i))
            .collect()
    }

    /// Profiles of every slot with only their rank (a step then puts the
    /// calls it holds into some of them).
    fn blank_profiles(&self) -> Vec<RankProfile> {
        self.ranks
            .iter()
            .map(|&rank| RankProfile {
                rank,
                ..RankProfile::default()
            })
            .collect()
    }

    fn job<'a>(
        &'a self,
        profiles: &'a [RankProfile],
        slot_of_rank: &'a FxHashMap<i64, usize>,
    ) -> Job<'a> {
        Job {
            profiles,
            shifts: &self.shifts,
            groups: &self.groups,
            slot_of_rank,
            group_maps: &self.group_maps,
        }
    }
}

/// What a rank's file says job-wide besides its head: its calls' facts,
/// whether any lies in a `ProfilerStep`, and when they ran
/// ([`super::job::window_span`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeadFacts {
    /// Ends measured, device kernels.
    pub facts: CallFacts,
    /// Some call lies in a `ProfilerStep`.
    pub markers: bool,
    /// First arrival and last end, µs on the host's clock.
    pub span: (f64, f64),
    /// The first and last `ProfilerStep` its calls lie in (−1 when none).
    pub steps: (i64, i64),
}

/// Bytes of [`HeadFacts`] at the end of an encoded head.
pub const HEAD_FACTS_BYTES: usize = 33;

/// The first and last step of `calls` (−1 each when none lies in a step).
fn step_span(calls: &[super::profile::Call]) -> (i64, i64) {
    let steps = calls.iter().map(|c| c.step).filter(|&s| s >= 0);
    match (steps.clone().min(), steps.max()) {
        (Some(a), Some(b)) => (a, b),
        _ => (-1, -1),
    }
}

/// A file's head as bytes: its profile without calls, names or phases (the
/// cache's codec), then its [`HeadFacts`] in [`HEAD_FACTS_BYTES`].
#[must_use]
pub fn encode_head(p: &RankProfile) -> Vec<u8> {
    let facts = CallFacts::of(std::slice::from_ref(p));
    let markers = p.calls.iter().any(|c| c.step >= 0);
    let head = RankProfile {
        calls: Vec::new(),
        names: Vec::new(),
        phases: Vec::new(),
        ..p.clone_without_calls()
    };
    let mut out = codec::encode(&head);
    out.extend_from_slice(&head_facts_bytes(HeadFacts {
        facts,
        markers,
        span: super::job::window_span(p),
        steps: step_span(&p.calls),
    }));
    out
}

fn head_facts_bytes(h: HeadFacts) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(HEAD_FACTS_BYTES));
    w.f64(h.span.0);
    w.f64(h.span.1);
    w.i64(h.steps.0);
    w.i64(h.steps.1);
    w.0.push(
        u8::from(h.facts.ends_measured) | u8::from(h.facts.device) << 1 | u8::from(h.markers) << 2,
    );
    w.0
}

/// [`HeadFacts`] from their [`HEAD_FACTS_BYTES`] bytes.
///
/// # Errors
/// Bytes that are not encoded facts.
pub fn head_facts(bytes: &[u8]) -> Result<HeadFacts> {
    let flags_at = HEAD_FACTS_BYTES - 1;
    if bytes.len() != HEAD_FACTS_BYTES || bytes[flags_at] > 7 {
        return Err(corrupt());
    }
    let mut r = Reader::new(&bytes[..flags_at]);
    let span = (r.f64()?, r.f64()?);
    let steps = (r.i64()?, r.i64()?);
    let flags = bytes[flags_at];
    Ok(HeadFacts {
        facts: CallFacts {
            ends_measured: flags & 1 != 0,
            device: flags & 2 != 0,
        },
        markers: flags & 4 != 0,
        span,
        steps,
    })
}

/// A head from [`encode_head`]'s bytes.
///
/// # Errors
/// Bytes that are not an encoded head.
pub fn decode_head(bytes: &[u8]) -> Result<(RankProfile, HeadFacts)> {
    let cut = bytes
        .len()
        .checked_sub(HEAD_FACTS_BYTES)
        .ok_or_else(corrupt)?;
    Ok((codec::decode(&bytes[..cut])?, head_facts(&bytes[cut..])?))
}

/// The heads of `profiles` (calls absent) with their facts' bytes, one each.
///
/// # Errors
/// Not one facts' bytes per profile, or bytes no head has.
pub fn frame_heads(
    profiles: Vec<RankProfile>,
    facts: &[Vec<u8>],
) -> Result<Vec<(RankProfile, HeadFacts)>> {
    if facts.len() != profiles.len() {
        return Err(corrupt());
    }
    (profiles.into_iter().zip(facts))
        .map(|(p, f)| Ok((p, head_facts(f)?)))
        .collect()
}

/// A framed job, its calls' facts, each slot's files, and the job's first
/// and last step.
pub type Framed = (AlignedJob, CallFacts, Vec<Vec<usize>>, (i64, i64));

/// The framed job (calls absent; each rank's windows joined as the
/// one-process import joins them) and, per slot, its files' indices in
/// `heads` in the order joined; `None` when no call lies in a
/// `ProfilerStep` (steps are then recovered from the whole job).
///
/// # Errors
/// What the one-process import refuses: overlapping windows of a rank,
/// world sizes or groups that disagree.
pub fn frame(
    heads: Vec<(RankProfile, HeadFacts)>,
    labels: &[String],
    clock_offsets_us: &FxHashMap<i64, f64>,
) -> Result<Option<Framed>> {
    if !heads.iter().any(|h| h.1.markers) {
        return Ok(None);
    }
    let facts = heads.iter().fold(
        CallFacts {
            ends_measured: true,
            device: false,
        },
        |f, h| f.and(h.1.facts),
    );
    let spans: Vec<(f64, f64)> = heads.iter().map(|h| h.1.span).collect();
    let steps = (heads.iter().map(|h| h.1.steps).filter(|s| s.0 >= 0))
        .fold((-1, -1), |(a, b): (i64, i64), s| {
            (if a < 0 { s.0 } else { a.min(s.0) }, b.max(s.1))
        });
    let profiles = heads.into_iter().map(|h| h.0).collect();
    let (profiles, labels, files) = super::job::join_spanned(profiles, &spans, labels)?;
    Ok(Some((
        frame_job(profiles, labels, clock_offsets_us)?,
        facts,
        files,
        steps,
    )))
}

/// The candidate-group sets of `p`'s calls by group name, from the rank's
/// own groups: what [`candidate_sets`] gives once the job is framed (a
/// framed job's groups are every rank's own, checked to agree), taken as
/// the rank is read so that no step waits for it. A rank that lists no
/// group has none here (the job's assumed world group then joins nothing).
#[must_use]
pub fn own_candidate_sets(p: &RankProfile) -> Vec<Vec<String>> {
    let own: Vec<usize> = (0..p.groups.len()).collect();
    let cands = rank_candidates(p, &p.groups, &own);
    let mut sets: Vec<Vec<u32>> = (0..p.calls.len())
        .map(|i| cands.of(0, i).to_vec())
        .collect();
    sets.sort_unstable();
    sets.dedup();
    sets.into_iter()
        .filter(|s| s.len() > 1)
        .map(|s| {
            s.iter()
                .map(|&g| p.groups[g as usize].name.clone())
                .collect()
        })
        .collect()
}

/// The candidate groups (indices into `groups`) of `p`'s calls, `group_map`
/// taking its own group indices to those: what the whole job's matcher
/// gives the rank, from a job of the rank alone (candidates read only the
/// rank, its calls, the groups and its map).
fn rank_candidates(p: &RankProfile, groups: &[GroupDecl], group_map: &[usize]) -> Candidates {
    let shifts = [0.0];
    let slot_of_rank: FxHashMap<i64, usize> = std::iter::once((p.rank, 0)).collect();
    let group_maps = [group_map.to_vec()];
    super::align::candidates(&Job {
        profiles: std::slice::from_ref(p),
        shifts: &shifts,
        groups,
        slot_of_rank: &slot_of_rank,
        group_maps: &group_maps,
    })
}

/// Named candidate sets as bytes.
#[must_use]
pub fn encode_named_sets(sets: &[Vec<String>]) -> Vec<u8> {
    let mut w = Writer(Vec::new());
    w.u64(sets.len() as u64);
    sets.iter().for_each(|s| w.strs(s));
    w.0
}

/// Named candidate sets (every rank's [`encode_named_sets`] bytes) as the
/// framed job's group indices, for [`shard_map`].
///
/// # Errors
/// Bytes that are not encoded sets, or a group the job does not have.
pub fn sets_by_index(groups: &[GroupDecl], named: &[Vec<u8>]) -> Result<Vec<Vec<u32>>> {
    let index: FxHashMap<&str, u32> = (groups.iter().enumerate())
        .map(|(i, g)| (g.name.as_str(), i as u32))
        .collect();
    let mut out = Vec::new();
    for bytes in named {
        let mut r = Reader::new(bytes);
        for _ in 0..r.count(8)? {
            let set = r.strs()?;
            out.push(
                set.iter()
                    .map(|n| index.get(n.as_str()).copied().ok_or_else(corrupt))
                    .collect::<Result<Vec<u32>>>()?,
            );
        }
        if !r.done() {
            return Err(corrupt());
        }
    }
    Ok(out)
}

/// Each group's shard, from every rank's candidate sets (groups on one
/// set share a shard), and the number of shards; calls that fit no group
/// go to the last shard, numbered after the groups' shards.
///
/// # Errors
/// A set naming a group the job does not have.
pub fn shard_map<'s>(
    groups: usize,
    sets: impl IntoIterator<Item = &'s [u32]>,
) -> Result<(Vec<u32>, u32)> {
    let sets: Vec<&[u32]> = sets.into_iter().collect();
    if sets
        .iter()
        .flat_map(|s| s.iter())
        .any(|&g| g as usize >= groups)
    {
        return Err(corrupt());
    }
    let mut parent = union_groups(groups, sets);
    let mut number: FxHashMap<usize, u32> = FxHashMap::default();
    let mut of_group = Vec::with_capacity(groups);
    for g in 0..groups {
        let r = root(&mut parent, g);
        let next = number.len() as u32;
        of_group.push(*number.entry(r).or_insert(next));
    }
    let count = number.len() as u32;
    Ok((of_group, count + 1))
}

/// A rank's calls on one unit (a range of a shard's steps,
/// [`super::ranges`]): the profile with only those calls (its names and
/// phases kept: the events name them), its slot, and each call's index in
/// the rank's whole profile. With a fence, the last call is the rank's next
/// call in the shard after the range, which only partner searches read.
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    /// Slot of the rank.
    pub slot: usize,
    /// The rank's profile, with the unit's calls only (then its fence).
    pub profile: RankProfile,
    /// Index of each call in the rank's whole profile.
    pub calls: Vec<usize>,
    /// The last call is the fence.
    pub fence: bool,
}

impl Piece {
    /// The piece as bytes.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::new());
        w.u64(self.slot as u64);
        w.0.push(u8::from(self.fence));
        w.u64(self.calls.len() as u64);
        self.calls.iter().for_each(|&i| w.u64(i as u64));
        w.0.extend_from_slice(&codec::encode(&self.profile));
        w.0
    }

    /// A piece from [`Piece::encode`]'s bytes.
    ///
    /// # Errors
    /// Bytes that are not an encoded piece.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes);
        let slot = r.u64()? as usize;
        let fence = match r.take(1)?[0] {
            0 => false,
            1 => true,
            _ => return Err(corrupt()),
        };
        let n = r.count(8)?;
        let calls = (0..n)
            .map(|_| Ok(r.u64()? as usize))
            .collect::<Result<Vec<_>>>()?;
        let profile = codec::decode(r.rest())?;
        if profile.calls.len() != calls.len()
            || calls.windows(2).any(|w| w[0] >= w[1])
            || (fence && calls.len() < 2)
        {
            return Err(corrupt());
        }
        Ok(Self {
            slot,
            profile,
            calls,
            fence,
        })
    }
}

/// The rank's calls cut by shard (`shard_of_group` and `shards` from
/// [`shard_map`]) and by range of steps (`bounds`: each range's first step
/// but the first's, [`super::ranges::range_bounds`]): one piece per unit it
/// has calls on, by unit id ([`super::ranges::unit_id`], with
/// `bounds.len() + 1` ranges a shard).
///
/// # Errors
/// A slot the shape does not have, or a map that is not [`shard_map`]'s.
pub fn split(
    shape: &Shape,
    slot: usize,
    profile: RankProfile,
    shard_of_group: &[u32],
    shards: u32,
    bounds: &[i64],
) -> Result<Vec<(u32, Piece)>> {
    let ranges = u32::try_from(bounds.len() + 1).map_err(|_| corrupt())?;
    if slot >= shape.ranks.len()
        || shard_of_group.len() != shape.groups.len()
        || shard_of_group
            .iter()
            .any(|&s| s.saturating_add(1) >= shards)
        || shards.checked_mul(ranges).is_none()
        || bounds.windows(2).any(|w| w[0] >= w[1])
    {
        return Err(corrupt());
    }
    let cands = rank_candidates(&profile, &shape.groups, &shape.group_maps[slot]);
    let range_of = super::ranges::call_ranges(&profile.calls, bounds);
    let mut whole = profile;
    // Each call moves into its piece; only a fence (the first call of the
    // shard's next piece of the rank, still here) is copied.
    let mut all: Vec<Option<super::profile::Call>> = std::mem::take(&mut whole.calls)
        .into_iter()
        .map(Some)
        .collect();
    // Per shard, its calls of the rank in order, each with its range.
    let mut by_shard: std::collections::BTreeMap<u32, Vec<(usize, u32)>> =
        std::collections::BTreeMap::new();
    for (i, &range) in range_of.iter().enumerate() {
        let shard = cands
            .of(0, i)
            .first()
            .map_or(shards - 1, |&g| shard_of_group[g as usize]);
        by_shard.entry(shard).or_default().push((i, range));
    }
    let mut out = Vec::new();
    for (shard, held) in by_shard {
        let mut start = 0;
        while start < held.len() {
            let range = held[start].1;
            let end = start + held[start..].iter().take_while(|c| c.1 == range).count();
            // The fence: the rank's next call in the shard.
            let fenced = held.get(end).map_or(end, |_| end + 1);
            let indices: Vec<usize> = held[start..fenced].iter().map(|c| c.0).collect();
            let mut p = whole.clone_without_calls();
            p.calls = held[start..end]
                .iter()
                .map(|c| all[c.0].take().ok_or_else(corrupt))
                .collect::<Result<_>>()?;
            if let Some(&(next, _)) = held.get(end) {
                p.calls.push(all[next].clone().ok_or_else(corrupt)?);
            }
            out.push((
                super::ranges::unit_id(shard, range, ranges),
                Piece {
                    slot,
                    profile: p,
                    calls: indices,
                    fence: fenced > end,
                },
            ));
            start = end;
        }
    }
    out.sort_by_key(|(unit, _)| *unit);
    Ok(out)
}

/// A unit's job: its pieces' calls in their slots (a rank's pieces of
/// several ranges joined, the last one's fence kept), every other slot
/// empty.
struct ShardJob {
    profiles: Vec<RankProfile>,
    indices: Vec<Vec<usize>>,
    fences: Vec<Option<usize>>,
    slot_of_rank: FxHashMap<i64, usize>,
}

impl ShardJob {
    fn new(shape: &Shape, mut pieces: Vec<Piece>) -> Result<Self> {
        let mut profiles = shape.blank_profiles();
        let mut indices = vec![Vec::new(); profiles.len()];
        let mut fences = vec![None; profiles.len()];
        pieces.sort_by_key(|p| (p.slot, p.calls.first().copied()));
        let mut open = vec![false; profiles.len()]; // the slot's last piece had a fence
        for mut p in pieces {
            let slot = p.slot;
            if slot >= profiles.len() || p.profile.rank != shape.ranks[slot] {
                return Err(corrupt());
            }
            if indices[slot].is_empty() {
                profiles[slot] = p.profile.clone_without_calls();
            } else if open[slot] {
                // The earlier piece's fence is a call this piece holds (or
                // one past it): only the last piece's fence stays.
                indices[slot].pop();
                profiles[slot].calls.pop();
            }
            if indices[slot].last().is_some_and(|&l| p.calls[0] <= l) {
                return Err(corrupt());
            }
            indices[slot].append(&mut p.calls);
            profiles[slot].calls.append(&mut p.profile.calls);
            open[slot] = p.fence;
            fences[slot] = p.fence.then(|| indices[slot].len() - 1);
        }
        Ok(Self {
            profiles,
            indices,
            fences,
            slot_of_rank: shape.slot_of_rank(),
        })
    }

    /// Where its calls lie in the sweep's order, and `ran_on`.
    fn check(&self, shape: &Shape, ran_on: bool) -> UnitCheck {
        let keys = (self.profiles.iter().enumerate()).flat_map(|(slot, p)| {
            let fence = self.fences[slot];
            (p.calls.iter().enumerate())
                .filter(move |(i, _)| Some(*i) != fence)
                .map(move |(i, c)| (c.arrival + shape.shifts[slot], slot, self.indices[slot][i]))
        });
        UnitCheck::of(keys, ran_on)
    }

    /// The second pass: instances (in the unit's call indices) and the
    /// sweep keys that opened them, in the job's call indices, and whether
    /// a search ran past a fence.
    fn matched(
        &self,
        shape: &Shape,
        labels: &FxHashMap<(usize, i64), usize>,
    ) -> (Vec<Instance>, Vec<SweepKey>, bool) {
        let job = shape.job(&self.profiles, &self.slot_of_rank);
        let (instances, keys, ran_on) =
            super::shard::second_pass_fenced(&job, labels, &self.fences);
        let keys = keys
            .into_iter()
            .map(|(at, slot, i)| (at, slot, self.indices[slot][i]))
            .collect();
        (instances, keys, ran_on)
    }
}

/// A unit's first pass: its thread votes, and its check.
///
/// # Errors
/// Pieces that do not fit the shape.
pub fn shard_votes(shape: &Shape, pieces: Vec<Piece>) -> Result<(ThreadVotes, UnitCheck)> {
    let shard = ShardJob::new(shape, pieces)?;
    let (votes, ran_on) = super::shard::first_pass_fenced(
        &shape.job(&shard.profiles, &shard.slot_of_rank),
        &shard.fences,
    );
    Ok((votes, shard.check(shape, ran_on)))
}

/// Thread votes (or labels, with a count of 1) as bytes, sorted.
#[must_use]
pub fn encode_votes(votes: &ThreadVotes) -> Vec<u8> {
    let mut rows: Vec<(usize, i64, usize, u32)> = votes
        .iter()
        .flat_map(|(&(slot, thread), counts)| {
            counts.iter().map(move |(&g, &n)| (slot, thread, g, n))
        })
        .collect();
    rows.sort_unstable();
    let mut w = Writer(Vec::with_capacity(8 + rows.len() * 32));
    w.u64(rows.len() as u64);
    for (slot, thread, g, n) in rows {
        w.u64(slot as u64);
        w.i64(thread);
        w.u64(g as u64);
        w.u64(u64::from(n));
    }
    w.0
}

/// Votes from [`encode_votes`]' bytes.
///
/// # Errors
/// Bytes that are not encoded votes.
pub fn decode_votes(bytes: &[u8]) -> Result<ThreadVotes> {
    let mut r = Reader::new(bytes);
    let mut votes = ThreadVotes::default();
    for _ in 0..r.count(32)? {
        let key = (r.u64()? as usize, r.i64()?);
        let g = r.u64()? as usize;
        let n = u32::try_from(r.u64()?).map_err(|_| corrupt())?;
        *votes.entry(key).or_default().entry(g).or_default() += n;
    }
    if !r.done() {
        return Err(corrupt());
    }
    Ok(votes)
}

/// The job's thread labels from every shard's votes, as the bytes a
/// shard's later steps take.
///
/// # Errors
/// Bytes that are not encoded votes.
pub fn labels_from_votes<'v>(votes: impl IntoIterator<Item = &'v [u8]>) -> Result<Vec<u8>> {
    let mut total = ThreadVotes::default();
    for v in votes {
        add_votes(&mut total, decode_votes(v)?);
    }
    let labels: ThreadVotes = thread_labels(total)
        .into_iter()
        .map(|(k, g)| (k, std::iter::once((g, 1)).collect()))
        .collect();
    Ok(encode_votes(&labels))
}

fn decode_labels(bytes: &[u8]) -> Result<FxHashMap<(usize, i64), usize>> {
    let votes = decode_votes(bytes)?;
    votes
        .into_iter()
        .map(|(k, counts)| {
            let mut it = counts.into_keys();
            match (it.next(), it.next()) {
                (Some(g), None) => Ok((k, g)),
                _ => Err(corrupt()),
            }
        })
        .collect()
}

/// A shard's complete instances as the client orders them: start, end,
/// group and sweep key each (in the shard's event order), the earliest
/// arrival of any of its instances, and how many were ambiguous.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardPrepared {
    /// `(start, end, group, key)` per complete instance, in event order.
    pub events: Vec<(f64, f64, usize, SweepKey)>,
    /// Earliest member arrival of any instance, `+inf` when none.
    pub first_arrival: f64,
    /// Complete instances that fit several groups.
    pub ambiguous: u64,
}

impl ShardPrepared {
    /// As bytes.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(24 + self.events.len() * 48));
        w.f64(self.first_arrival);
        w.u64(self.ambiguous);
        w.u64(self.events.len() as u64);
        for &(start, end, group, (at, slot, call)) in &self.events {
            w.f64(start);
            w.f64(end);
            w.u64(group as u64);
            w.f64(at);
            w.u64(slot as u64);
            w.u64(call as u64);
        }
        w.0
    }

    /// From [`ShardPrepared::encode`]'s bytes.
    ///
    /// # Errors
    /// Bytes that are not encoded.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes);
        let first_arrival = r.f64()?;
        let ambiguous = r.u64()?;
        let events = (0..r.count(48)?)
            .map(|_| {
                Ok((
                    r.f64()?,
                    r.f64()?,
                    r.u64()? as usize,
                    (r.f64()?, r.u64()? as usize, r.u64()? as usize),
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        if !r.done() {
            return Err(corrupt());
        }
        Ok(Self {
            events,
            first_arrival,
            ambiguous,
        })
    }
}

/// A unit's second pass, its complete instances ready to order, and its
/// check.
///
/// # Errors
/// Pieces or labels that do not fit the shape.
pub fn shard_prepare(
    shape: &Shape,
    pieces: Vec<Piece>,
    labels: &[u8],
) -> Result<(ShardPrepared, UnitCheck)> {
    let labels = decode_labels(labels)?;
    let shard = ShardJob::new(shape, pieces)?;
    let (instances, keys, ran_on) = shard.matched(shape, &labels);
    let check = shard.check(shape, ran_on);
    let job = shape.job(&shard.profiles, &shard.slot_of_rank);
    let prepared = prepare(&job, &instances, Some(&keys));
    let prepared = ShardPrepared {
        events: prepared
            .iter()
            .map(|p| (p.start, p.end, p.group, p.order))
            .collect(),
        first_arrival: first_arrival(&job, &instances),
        ambiguous: instances
            .iter()
            .filter(|i| i.complete && i.ambiguous)
            .count() as u64,
    };
    Ok((prepared, check))
}

/// Every shard's events placed: the origin, each shard's placements (in its
/// event order), and the job's event order as `(shard, index in shard)`.
#[must_use]
pub fn place_shards(
    groups: usize,
    shards: &[ShardPrepared],
) -> (f64, Vec<Vec<Placement>>, Vec<(usize, usize)>) {
    let mut all: Vec<(Prepared, usize)> = Vec::new();
    for (s, shard) in shards.iter().enumerate() {
        for (k, &(start, end, group, order)) in shard.events.iter().enumerate() {
            all.push((
                Prepared {
                    start,
                    end,
                    group,
                    order,
                    instance: k,
                },
                s,
            ));
        }
    }
    all.sort_by(|a, b| order_of_events(&a.0, &b.0));
    let fallback = shards
        .iter()
        .map(|s| s.first_arrival)
        .fold(f64::INFINITY, f64::min);
    let prepared: Vec<Prepared> = all.iter().map(|(p, _)| *p).collect();
    let placements = place(&prepared, groups, fallback);
    let origin = placements.first().map_or(fallback, |p| p.0);
    let mut per_shard: Vec<Vec<Placement>> = shards
        .iter()
        .map(|s| Vec::with_capacity(s.events.len()))
        .collect();
    let mut order = Vec::with_capacity(all.len());
    for ((p, s), at) in all.iter().zip(placements) {
        per_shard[*s].push(at);
        order.push((*s, p.instance));
    }
    (origin, per_shard, order)
}

/// Placements as bytes.
#[must_use]
pub fn encode_placements(origin: f64, placements: &[Placement]) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(16 + placements.len() * 16));
    w.f64(origin);
    w.u64(placements.len() as u64);
    for &(_, concurrent, seq) in placements {
        w.i64(concurrent);
        w.u64(seq);
    }
    w.0
}

fn decode_placements(bytes: &[u8]) -> Result<(f64, Vec<Placement>)> {
    let mut r = Reader::new(bytes);
    let origin = r.f64()?;
    let placements = (0..r.count(16)?)
        .map(|_| Ok((origin, r.i64()?, r.u64()?)))
        .collect::<Result<Vec<_>>>()?;
    if !r.done() {
        return Err(corrupt());
    }
    Ok((origin, placements))
}

/// A shard's events, written (in the shard's event order, as a trace of
/// those events), and its partial collectives with their sweep keys.
#[derive(Debug, Clone)]
pub struct ShardEvents {
    /// The events.
    pub events: Trace,
    /// Partial collectives, each with the key of the call that opened it.
    pub partial: Vec<(SweepKey, PartialCollective)>,
}

impl ShardEvents {
    /// As bytes.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::new());
        w.bytes(&encode_part(&self.events));
        w.u64(self.partial.len() as u64);
        for ((at, slot, call), p) in &self.partial {
            w.f64(*at);
            w.u64(*slot as u64);
            w.u64(*call as u64);
            w.str(&p.group);
            w.str(&p.op);
            w.u64(p.seen.len() as u64);
            p.seen.iter().for_each(|&r| w.i64(r));
            w.u64(p.missing.len() as u64);
            p.missing.iter().for_each(|&r| w.i64(r));
            w.f64(p.start_us);
            w.i64(p.step);
        }
        w.0
    }

    /// From [`ShardEvents::encode`]'s bytes.
    ///
    /// # Errors
    /// Bytes that are not encoded events.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes);
        let events = decode_part(&r.bytes()?)?;
        let mut partial = Vec::new();
        for _ in 0..r.count(72)? {
            let key = (r.f64()?, r.u64()? as usize, r.u64()? as usize);
            let group = r.str()?;
            let op = r.str()?;
            let seen = (0..r.count(8)?)
                .map(|_| r.i64())
                .collect::<Result<Vec<_>>>()?;
            let missing = (0..r.count(8)?)
                .map(|_| r.i64())
                .collect::<Result<Vec<_>>>()?;
            let start_us = r.f64()?;
            let step = r.i64()?;
            partial.push((
                key,
                PartialCollective {
                    group,
                    op,
                    seen,
                    missing,
                    start_us,
                    step,
                },
            ));
        }
        if !r.done() {
            return Err(corrupt());
        }
        Ok(Self { events, partial })
    }
}

/// A shard's events at their placements (from [`place_shards`], as
/// [`encode_placements`] bytes), and its partial collectives.
///
/// # Errors
/// Pieces, labels or placements that do not fit the shape or the shard.
pub fn shard_events(
    shape: &Shape,
    pieces: Vec<Piece>,
    labels: &[u8],
    placements: &[u8],
    fallback_phase: Option<&str>,
) -> Result<ShardEvents> {
    let labels = decode_labels(labels)?;
    let (origin, placements) = decode_placements(placements)?;
    let shard = ShardJob::new(shape, pieces)?;
    let (instances, keys, ran_on) = shard.matched(shape, &labels);
    let job = shape.job(&shard.profiles, &shard.slot_of_rank);
    let prepared = prepare(&job, &instances, Some(&keys));
    if ran_on || prepared.len() != placements.len() {
        return Err(corrupt());
    }
    let events =
        write_prepared(&job, &instances, &prepared, &placements, fallback_phase).finish(Vec::new());
    let partial = partials_in_sweep_order(&job, &instances, origin)
        .into_iter()
        .map(|(k, p)| (keys[k], p))
        .collect();
    Ok(ShardEvents { events, partial })
}

/// The import from the framed job's heads and every shard's events: the
/// events in the job's order (`order` from [`place_shards`]), the partial
/// collectives in time order, and the job's members and checks (`files`:
/// how many were read), as
/// [`super::job::import_job`] writes them.
///
/// # Errors
/// Nothing importable, or (with `strict`) a partial collective.
#[allow(clippy::too_many_arguments)]
pub fn assemble(
    frame: &AlignedJob,
    facts: CallFacts,
    shards: Vec<ShardEvents>,
    order: &[(usize, usize)],
    ambiguous: u64,
    origin: f64,
    files: u64,
    options: &JobOptions,
) -> Result<JobImport> {
    let mut b = TraceBuilder::new();
    let mut remaps: Vec<Vec<Option<u32>>> = vec![Vec::new(); shards.len()];
    for &(s, k) in order {
        let shard = (shards.get(s))
            .filter(|e| k < e.events.events.len())
            .ok_or_else(corrupt)?;
        b.push_from(&shard.events, k, &mut remaps[s]);
    }
    let mut partial: Vec<(SweepKey, PartialCollective)> =
        shards.into_iter().flat_map(|s| s.partial).collect();
    partial.sort_by(|(ka, a), (kb, b)| {
        a.start_us
            .total_cmp(&b.start_us)
            .then(ka.0.total_cmp(&kb.0))
            .then(ka.1.cmp(&kb.1))
            .then(ka.2.cmp(&kb.2))
    });
    let tail = JobTail {
        profiles: &frame.profiles,
        groups: &frame.groups,
        epoch: frame.epoch,
        files,
        facts,
        ambiguous,
        origin,
        recovered_steps: None,
    };
    finish_import(
        b,
        partial.into_iter().map(|(_, p)| p).collect(),
        &tail,
        options,
    )
}

/// The units' results once every unit's end is clean: `results` (one per
/// unit, with its check) settled ([`settle`]), each merged unit run again
/// by `run` until none merges.
///
/// # Errors
/// What `run` returns, or results that are not one per unit.
pub fn settled<T>(
    mut units: Vec<Vec<u32>>,
    mut results: Vec<(T, UnitCheck)>,
    ranges: u32,
    run: impl Fn(&[u32]) -> Result<(T, UnitCheck)>,
) -> Result<(Vec<Vec<u32>>, Vec<T>)> {
    loop {
        let checks: Vec<UnitCheck> = results.iter().map(|r| r.1).collect();
        let (next, merged) = settle(&units, &checks, ranges)?;
        if merged.is_empty() {
            return Ok((units, results.into_iter().map(|r| r.0).collect()));
        }
        let mut old: FxHashMap<u32, (T, UnitCheck)> =
            units.iter().map(|u| u[0]).zip(results).collect();
        results = Vec::with_capacity(next.len());
        for (i, unit) in next.iter().enumerate() {
            if merged.contains(&i) {
                results.push(run(unit)?);
            } else {
                results.push(old.remove(&unit[0]).ok_or_else(corrupt)?);
            }
        }
        units = next;
    }
}

/// The steps run here, one after another, each shard cut into `ranges`
/// ranges of steps (at most the job's steps): [`super::job::import_job`]'s
/// result, or `None` when the job is not for this plan ([`frame`]).
///
/// # Errors
/// As [`super::job::import_job`].
pub fn import_job_sharded(
    profiles: Vec<RankProfile>,
    labels: &[String],
    options: &JobOptions,
    ranges: u32,
) -> Result<Option<JobImport>> {
    Ok(import_in_units(profiles, labels, options, ranges)?.map(|(import, _)| import))
}

/// [`import_job_sharded`]'s import, and how many units the shards were cut
/// into and were aligned as once settled.
fn import_in_units(
    profiles: Vec<RankProfile>,
    labels: &[String],
    options: &JobOptions,
    ranges: u32,
) -> Result<Option<(JobImport, (usize, usize))>> {
    let heads: Vec<_> = profiles
        .iter()
        .map(|p| decode_head(&encode_head(p)))
        .collect::<Result<_>>()?;
    let Some((frame, facts, files, steps)) = frame(heads, labels, &options.clock_offsets_us)?
    else {
        return Ok(None);
    };
    let shape = Shape::decode(&Shape::of(&frame).encode())?;
    let mut taken: Vec<Option<RankProfile>> = profiles.into_iter().map(Some).collect();
    let mut ranks: Vec<RankProfile> = Vec::with_capacity(files.len());
    for of_slot in &files {
        let parts: Vec<RankProfile> = of_slot
            .iter()
            .map(|&i| taken[i].take().unwrap_or_default())
            .collect();
        let names: Vec<String> = of_slot.iter().map(|&i| labels[i].clone()).collect();
        ranks.push(join_profiles(parts, &names)?);
    }
    let named: Vec<Vec<u8>> = ranks
        .iter()
        .map(|p| encode_named_sets(&own_candidate_sets(p)))
        .collect();
    let sets = sets_by_index(&shape.groups, &named)?;
    let (of_group, count) = shard_map(shape.groups.len(), sets.iter().map(Vec::as_slice))?;
    let bounds = range_bounds(steps, ranges);
    let per_shard = bounds.len() as u32 + 1;
    let mut pieces: std::collections::BTreeMap<u32, Vec<Vec<u8>>> = Default::default();
    for (slot, p) in ranks.drain(..).enumerate() {
        for (u, piece) in split(&shape, slot, p, &of_group, count, &bounds)? {
            pieces.entry(u).or_default().push(piece.encode());
        }
    }
    let pieces_of = |unit: &[u32]| -> Result<Vec<Piece>> {
        unit.iter()
            .flat_map(|u| pieces.get(u).into_iter().flatten())
            .map(|b| Piece::decode(b))
            .collect()
    };
    let units: Vec<Vec<u32>> = pieces.keys().map(|&u| vec![u]).collect();
    let cut = units.len();
    let votes_of = |unit: &[u32]| -> Result<(Vec<u8>, UnitCheck)> {
        let (votes, check) = shard_votes(&shape, pieces_of(unit)?)?;
        Ok((encode_votes(&votes), check))
    };
    let first = units.iter().map(|u| votes_of(u)).collect::<Result<_>>()?;
    let (units, votes) = settled(units, first, per_shard, votes_of)?;
    let labels_bytes = labels_from_votes(votes.iter().map(Vec::as_slice))?;
    let prepare_of = |unit: &[u32]| -> Result<(ShardPrepared, UnitCheck)> {
        let (prepared, check) = shard_prepare(&shape, pieces_of(unit)?, &labels_bytes)?;
        Ok((ShardPrepared::decode(&prepared.encode())?, check))
    };
    let second = units.iter().map(|u| prepare_of(u)).collect::<Result<_>>()?;
    let (units, prepared) = settled(units, second, per_shard, prepare_of)?;
    let (origin, placements, event_order) = place_shards(shape.groups.len(), &prepared);
    let events: Vec<ShardEvents> = units
        .iter()
        .zip(&placements)
        .map(|(unit, at)| {
            let bytes = encode_placements(origin, at);
            ShardEvents::decode(
                &shard_events(
                    &shape,
                    pieces_of(unit)?,
                    &labels_bytes,
                    &bytes,
                    options.phase.as_deref(),
                )?
                .encode(),
            )
        })
        .collect::<Result<_>>()?;
    let ambiguous = prepared.iter().map(|p| p.ambiguous).sum();
    assemble(
        &frame,
        facts,
        events,
        &event_order,
        ambiguous,
        origin,
        labels.len() as u64,
        options,
    )
    .map(|import| Some((import, (cut, units.len()))))
}

#[cfg(test)]
mod tests;
