//! Sharded alignment is the whole-job alignment: on the real fixture jobs
//! and on generated jobs of several groups (NCCL-named calls, gloo calls
//! on per-group threads, calls missing on some ranks, jittered arrivals).

use rustc_hash::FxHashMap;

use super::*;
use crate::import::kineto::align::align;
use crate::import::kineto::job::align_job;
use crate::import::kineto::ops::Kind;
use crate::import::kineto::profile::{Call, GroupDecl, Source, read_file};
use crate::import::stream::ScanLimits;

fn fixture_job(dir: &str, files: &[&str]) -> crate::import::kineto::job::AlignedJob {
    let profiles: Vec<RankProfile> = files
        .iter()
        .map(|f| {
            let path = crate::test_data::fixture(&format!("{dir}/{f}"));
            read_file(Source::Path(&path), &ScanLimits::default(), None).unwrap()
        })
        .collect();
    let labels: Vec<String> = files.iter().map(|f| (*f).to_owned()).collect();
    align_job(profiles, &labels, &FxHashMap::default()).unwrap()
}

#[test]
fn fixture_jobs_align_the_same_sharded() {
    let ranks = ["rank0.json", "rank1.json", "rank2.json", "rank3.json"];
    let windows = [
        "rank0.window1.json",
        "rank0.window2.json",
        "rank1.window1.json",
        "rank1.window2.json",
        "rank1.window3.json",
        "rank2.window1.json",
        "rank2.window2.json",
        "rank2.window3.json",
        "rank3.window1.json",
        "rank3.window2.json",
        "rank3.window3.json",
    ];
    let jobs = [
        fixture_job("kineto/gloo_tp4_decode", &ranks),
        fixture_job("kineto/gloo_w4_ddp_straggler/markers", &ranks),
        fixture_job("hang/gloo_w4_rank_sigkill", &windows),
    ];
    for aligned in &jobs {
        let job = aligned.job();
        assert!(!aligned.instances.is_empty());
        assert_eq!(align_sharded(&job), align(&job));
        let held: usize = shards(&job).iter().map(Shard::len).sum();
        assert_eq!(held, aligned.profiles.iter().map(|p| p.calls.len()).sum());
    }
}

/// A tiny deterministic generator (the tests' own, no dependency).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// 8 ranks: the world, two tensor-parallel groups of 4 and four
/// data-parallel pairs. Per step: an all_reduce on each TP group, an
/// all_gather on each DP pair, and (when `gloo`) sometimes one world
/// all_reduce. `named`: calls name their group (NCCL); otherwise they are
/// gloo calls run on a thread per group. Some calls are missing on a rank,
/// and arrivals are jittered.
struct Generated {
    profiles: Vec<RankProfile>,
    groups: Vec<GroupDecl>,
    shifts: Vec<f64>,
    slot_of_rank: FxHashMap<i64, usize>,
    group_maps: Vec<Vec<usize>>,
}

impl Generated {
    fn job(&self) -> Job<'_> {
        Job {
            profiles: &self.profiles,
            shifts: &self.shifts,
            groups: &self.groups,
            slot_of_rank: &self.slot_of_rank,
            group_maps: &self.group_maps,
        }
    }
}

fn generated(seed: u64, named: bool, world_calls: bool) -> Generated {
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
    for _step in 0..12 {
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
                c.dtype = "Float";
                c.in_elems = bytes / 4;
                c.out_elems = if kind == Kind::AllGather {
                    bytes / 4 * size
                } else {
                    bytes / 4
                };
                if named {
                    c.group = g as i64;
                    c.seq = seqs[g];
                } else {
                    c.thread = 100 + g as i64;
                }
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
                groups: groups.clone(),
                calls: cs,
                ..RankProfile::default()
            }
        })
        .collect();
    Generated {
        shifts: vec![0.0; 8],
        slot_of_rank: (0..8).map(|r| (r as i64, r)).collect(),
        group_maps: vec![(0..groups.len()).collect(); 8],
        groups,
        profiles,
    }
}

#[test]
fn generated_jobs_align_the_same_sharded() {
    for seed in 0..40 {
        for (named, world_calls) in [(true, true), (true, false), (false, false), (false, true)] {
            let g = generated(seed, named, world_calls);
            let job = g.job();
            let whole = align(&job);
            assert!(whole.iter().any(|i| i.complete));
            assert_eq!(
                align_sharded(&job),
                whole,
                "seed {seed}, named {named}, world {world_calls}"
            );
        }
    }
}

#[test]
fn named_groups_and_sized_gathers_are_shards_of_their_own() {
    // NCCL: one shard per group that has calls.
    let g = generated(7, true, true);
    let s = shards(&g.job());
    assert!(s.len() >= 6, "{} shards", s.len());
    assert!(s.iter().all(|x| x.groups.len() == 1 || x.groups.is_empty()));
    // gloo: an all_reduce names no group and fits every group of its rank
    // (the world, its TP group, its DP pair), so they are one shard; an
    // all_gather fits only the groups of its size.
    let g = generated(7, false, false);
    let s = shards(&g.job());
    let groups: Vec<&[usize]> = s.iter().map(|x| x.groups.as_slice()).collect();
    assert_eq!(groups, vec![&[0, 1, 2, 3, 4, 5, 6][..]]);
    let mut gathers = generated(7, false, false);
    for p in &mut gathers.profiles {
        p.calls.retain(|c| c.kind == Kind::AllGather);
    }
    let s = shards(&gathers.job());
    let groups: Vec<&[usize]> = s.iter().map(|x| x.groups.as_slice()).collect();
    assert_eq!(groups, vec![&[3][..], &[4], &[5], &[6]]);
    assert_eq!(align_sharded(&gathers.job()), align(&gathers.job()));
}
