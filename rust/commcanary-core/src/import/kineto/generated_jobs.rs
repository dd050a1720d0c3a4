//! Generated jobs for the matcher's and the sharded import's tests: 8 ranks
//! in a world, two tensor-parallel groups of 4 and four data-parallel
//! pairs, NCCL-named or gloo calls, some missing, arrivals jittered.

use super::job::AlignedJob;
use super::ops::Kind;
use super::profile::{Call, GroupDecl, RankProfile};

/// A tiny deterministic generator (the tests' own, no dependency).
pub(crate) struct Lcg(pub(crate) u64);

impl Lcg {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// 8 ranks: the world, two tensor-parallel groups of 4 and four
/// data-parallel pairs. Per step: an all_reduce on each TP group, an
/// all_gather on each DP pair, and (when `gloo`) sometimes one world
/// all_reduce. `named`: calls name their group (NCCL); otherwise they are
/// gloo calls run on a thread per group. Some calls are missing on a rank,
/// and arrivals are jittered.
pub(crate) fn generated(seed: u64, named: bool, world_calls: bool) -> AlignedJob {
    let mut rng = Lcg(seed);
    let decl = |name: &str, ranks: Vec<i64>| GroupDecl {
        name: name.to_owned(),
        desc: String::new(),
        ranks,
    };
    let mut groups = vec![decl("0", (0..8).collect())];
    groups.push(decl("tp0", vec![0, 1, 2, 3]));
    groups.push(decl("tp1", vec![4, 5, 6, 7]));
    for d in 0..4 {
        groups.push(decl(&format!("dp{d}"), vec![d, d + 4]));
    }
    let mut calls: Vec<Vec<Call>> = vec![Vec::new(); 8];
    let mut seqs = vec![0_i64; groups.len()];
    let mut t = 0.0;
    for step in 0..12 {
        let mut plan: Vec<(usize, Kind)> = vec![(1, Kind::AllReduce), (2, Kind::AllReduce)];
        plan.extend((3..7).map(|g| (g, Kind::AllGather)));
        if world_calls && rng.below(3) == 0 {
            plan.push((0, Kind::AllReduce));
        }
        for (g, kind) in plan {
            let size = groups[g].ranks.len() as i64;
            let bytes = 1024 * (1 + rng.below(4) as i64);
            for &r in &groups[g].ranks {
                if rng.below(40) == 0 {
                    continue; // this rank's trace lacks the call
                }
                let arrival = t + rng.below(300) as f64;
                let mut c = Call::bare(kind, arrival, t + 400.0 + rng.below(50) as f64);
                c.end_measured = true;
                c.bytes = bytes;
                c.dtype = "float32";
                c.in_elems = bytes / 4;
                c.out_elems = if kind == Kind::AllGather {
                    bytes / 4 * size
                } else {
                    bytes / 4
                };
                if named {
                    // The rank's own index of the group (it lists its groups only).
                    c.group = groups
                        .iter()
                        .take(g)
                        .filter(|x| x.ranks.contains(&r))
                        .count() as i64;
                    c.seq = seqs[g];
                } else {
                    c.thread = 100 + g as i64;
                }
                c.name = u32::from(kind == Kind::AllGather);
                c.step = step;
                c.phase = 0;
                calls[r as usize].push(c);
            }
            seqs[g] += 1;
            t += 1000.0;
        }
    }
    let profiles: Vec<RankProfile> = calls
        .into_iter()
        .enumerate()
        .map(|(r, mut cs)| {
            cs.sort_by(|a, b| a.arrival.total_cmp(&b.arrival));
            RankProfile {
                rank: r as i64,
                world_size: Some(8),
                groups: groups
                    .iter()
                    .filter(|g| g.ranks.contains(&(r as i64)))
                    .cloned()
                    .collect(),
                calls: cs,
                names: vec!["nccl:all_reduce".to_owned(), "nccl:all_gather".to_owned()],
                phases: vec!["train".to_owned()],
                ..RankProfile::default()
            }
        })
        .collect();
    AlignedJob {
        labels: (0..8).map(|r| format!("rank{r}.json")).collect(),
        epoch: 0,
        instances: Vec::new(),
        source: "kineto",
        in_flight: Vec::new(),
        shifts: vec![0.0; 8],
        slot_of_rank: (0..8).map(|r| (r as i64, r)).collect(),
        group_maps: (0..8)
            .map(|r| {
                (0..groups.len())
                    .filter(|&g| groups[g].ranks.contains(&r))
                    .collect()
            })
            .collect(),
        groups,
        profiles,
    }
}
