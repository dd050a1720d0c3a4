//! Sharded alignment is the whole-job alignment: on the real fixture jobs
//! and on generated jobs of several groups (NCCL-named calls, gloo calls
//! on per-group threads, calls missing on some ranks, jittered arrivals).

use rustc_hash::FxHashMap;

use super::*;
use crate::import::kineto::align::align;
use crate::import::kineto::generated_jobs::generated;
use crate::import::kineto::job::align_job;
use crate::import::kineto::ops::Kind;
use crate::import::kineto::profile::{Source, read_file};
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
    let windows = crate::test_data::SIGKILL_WINDOWS;
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
        assert_eq!(
            held,
            aligned
                .profiles
                .iter()
                .map(|p| p.calls.len())
                .sum::<usize>()
        );
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
