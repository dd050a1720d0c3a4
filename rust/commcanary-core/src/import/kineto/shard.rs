//! The cross-rank alignment split into shards that match independently:
//! what lets a job be aligned group by group, on as many workers as it
//! has shards, instead of in one process.
//!
//! Two groups share a shard when some call could be on either (its
//! candidate groups, [`super::align`]). A named (NCCL) call has one
//! candidate, so each group of an NCCL job is a shard of its own; a gloo
//! `all_reduce` fits every group its rank is in and joins them, while a
//! gloo `all_gather` fits only the groups of its size. A shard holds every
//! call whose candidates are its groups; the calls that fit no group are one
//! more shard (each is a partial instance on its own).
//!
//! Matching a shard alone gives exactly the instances that matching the
//! whole job gives for its calls:
//! * a partner search looks only at calls that can be on the group it
//!   searches, all of which are in the shard;
//! * the sweep meets a shard's calls in the job's order (arrival on the job
//!   clock, slot, call), so each instance is opened by the same call;
//! * the second pass's thread labels come from every shard's first-pass
//!   votes, summed ([`first_pass`] per shard, [`thread_labels`] once,
//!   [`second_pass`] per shard).
//!
//! [`merge`] then orders the shards' instances by the key of the call that
//! opened each, which is the order the whole-job sweep emits them in.
//! [`align_sharded`] runs the three steps here; a cluster runs a shard's
//! steps where the shard's calls are.

use rustc_hash::FxHashMap;

use super::align::{
    Instance, Job, Member, SweepKey, ThreadVotes, candidates, restrict_threads, sweep_fenced,
    thread_votes,
};
use super::profile::RankProfile;

pub use super::align::thread_labels;

/// The job of a shard's `profiles`: the whole job's clocks, groups and maps.
#[must_use]
pub fn shard_job<'a>(job: &'a Job<'_>, profiles: &'a [RankProfile]) -> Job<'a> {
    Job {
        profiles,
        shifts: job.shifts,
        groups: job.groups,
        slot_of_rank: job.slot_of_rank,
        group_maps: job.group_maps,
    }
}

/// A set of groups whose calls match independently of every other's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// The job groups it holds, ascending (empty: the calls that fit no group).
    pub groups: Vec<usize>,
    /// Per slot, the job's indices of the calls it holds, ascending.
    pub calls: Vec<Vec<usize>>,
}

impl Shard {
    /// Calls held, over every slot.
    #[must_use]
    pub fn len(&self) -> usize {
        self.calls.iter().map(Vec::len).sum()
    }

    /// Whether it holds no call.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The union-find root of group `g`.
pub(super) fn root(parent: &mut [usize], mut g: usize) -> usize {
    while parent[g] != g {
        parent[g] = parent[parent[g]];
        g = parent[g];
    }
    g
}

/// Groups `0..groups` joined by every candidate set (the groups of one set
/// are one shard): each group's union-find parent, roots the lowest group.
pub(super) fn union_groups<'s>(
    groups: usize,
    sets: impl IntoIterator<Item = &'s [u32]>,
) -> Vec<usize> {
    let mut parent: Vec<usize> = (0..groups).collect();
    for set in sets {
        if let Some((&first, rest)) = set.split_first() {
            for &g in rest {
                let (a, b) = (
                    root(&mut parent, first as usize),
                    root(&mut parent, g as usize),
                );
                if a != b {
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
    }
    parent
}

/// The job's shards, ordered by their lowest group (the no-group shard
/// last); shards without calls are left out.
#[must_use]
pub fn shards(job: &Job<'_>) -> Vec<Shard> {
    let cands = candidates(job);
    let n = job.groups.len();
    let sets = (job.profiles.iter().enumerate())
        .flat_map(|(slot, p)| (0..p.calls.len()).map(move |i| (slot, i)))
        .map(|(slot, i)| cands.of(slot, i));
    let mut parent = union_groups(n, sets);
    // One shard per root, in order of the root (its lowest group), plus the
    // no-group shard at index `n`.
    let mut index_of_root: FxHashMap<usize, usize> = FxHashMap::default();
    let mut out: Vec<Shard> = Vec::new();
    for g in 0..n {
        let r = root(&mut parent, g);
        let k = *index_of_root.entry(r).or_insert_with(|| {
            out.push(Shard {
                groups: Vec::new(),
                calls: vec![Vec::new(); job.profiles.len()],
            });
            out.len() - 1
        });
        out[k].groups.push(g);
    }
    let mut orphans = Shard {
        groups: Vec::new(),
        calls: vec![Vec::new(); job.profiles.len()],
    };
    for (slot, p) in job.profiles.iter().enumerate() {
        for i in 0..p.calls.len() {
            match cands.of(slot, i).first() {
                Some(&g) => {
                    let k = index_of_root[&root(&mut parent, g as usize)];
                    out[k].calls[slot].push(i);
                }
                None => orphans.calls[slot].push(i),
            }
        }
    }
    out.push(orphans);
    out.retain(|s| !s.is_empty());
    out
}

/// The shard's profiles: every slot kept, with its rank and only the
/// shard's calls (what the matcher reads of a profile).
#[must_use]
pub fn shard_profiles(profiles: &[RankProfile], shard: &Shard) -> Vec<RankProfile> {
    profiles
        .iter()
        .zip(&shard.calls)
        .map(|(p, held)| RankProfile {
            rank: p.rank,
            calls: held.iter().map(|&i| p.calls[i].clone()).collect(),
            ..RankProfile::default()
        })
        .collect()
}

/// A shard's first matching pass (its job: [`shard_profiles`] with the
/// whole job's shifts, groups and maps): its thread votes, to be summed
/// with every other shard's.
#[must_use]
pub fn first_pass(job: &Job<'_>) -> ThreadVotes {
    first_pass_fenced(job, &[]).0
}

/// [`first_pass`] over calls that end at fences (per slot, the index of its
/// fence: [`super::ranges`]), and whether some partner search ran past one.
#[must_use]
pub fn first_pass_fenced(job: &Job<'_>, fences: &[Option<usize>]) -> (ThreadVotes, bool) {
    let cands = candidates(job);
    let swept = sweep_fenced(job, &cands, fences);
    (thread_votes(job, &swept.instances), swept.ran_on)
}

/// A shard's second pass under the job's thread labels: its instances and
/// the keys of the calls that opened them, in the shard's call indices.
#[must_use]
pub fn second_pass(
    job: &Job<'_>,
    labels: &FxHashMap<(usize, i64), usize>,
) -> (Vec<Instance>, Vec<SweepKey>) {
    let (instances, keys, _) = second_pass_fenced(job, labels, &[]);
    (instances, keys)
}

/// [`second_pass`] over calls that end at fences, and whether some partner
/// search ran past one.
#[must_use]
pub fn second_pass_fenced(
    job: &Job<'_>,
    labels: &FxHashMap<(usize, i64), usize>,
    fences: &[Option<usize>],
) -> (Vec<Instance>, Vec<SweepKey>, bool) {
    let mut cands = candidates(job);
    restrict_threads(job, labels, &mut cands);
    let swept = sweep_fenced(job, &cands, fences);
    (swept.instances, swept.keys, swept.ran_on)
}

/// Sums shards' votes.
pub fn add_votes(total: &mut ThreadVotes, votes: ThreadVotes) {
    for (thread, counts) in votes {
        let into = total.entry(thread).or_default();
        for (g, n) in counts {
            *into.entry(g).or_default() += n;
        }
    }
}

/// The job's instances from its shards' second passes (each with its
/// shard): call indices mapped back to the job's, in the order the
/// whole-job sweep gives.
#[must_use]
pub fn merge(results: Vec<(&Shard, Vec<Instance>, Vec<SweepKey>)>) -> Vec<Instance> {
    let mut keyed: Vec<(SweepKey, Instance)> = Vec::new();
    for (shard, instances, keys) in results {
        for (mut inst, (at, slot, i)) in instances.into_iter().zip(keys) {
            for m in &mut inst.members {
                *m = Member {
                    slot: m.slot,
                    call: shard.calls[m.slot][m.call],
                };
            }
            keyed.push(((at, slot, shard.calls[slot][i]), inst));
        }
    }
    keyed.sort_by(|(a, _), (b, _)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    keyed.into_iter().map(|(_, inst)| inst).collect()
}

/// [`super::align::align`]'s result, computed shard by shard.
#[must_use]
pub fn align_sharded(job: &Job<'_>) -> Vec<Instance> {
    let shards = shards(job);
    let parts: Vec<Vec<RankProfile>> = shards
        .iter()
        .map(|s| shard_profiles(job.profiles, s))
        .collect();
    let mut votes = ThreadVotes::default();
    for p in &parts {
        add_votes(&mut votes, first_pass(&shard_job(job, p)));
    }
    let labels = thread_labels(votes);
    let results = shards
        .iter()
        .zip(&parts)
        .map(|(s, p)| {
            let (instances, keys) = second_pass(&shard_job(job, p), &labels);
            (s, instances, keys)
        })
        .collect();
    merge(results)
}

#[cfg(test)]
mod tests;
