//! The steps, run here, write the trace the one-process import writes.

use rustc_hash::FxHashMap;

use super::*;
use crate::import::kineto::job::import_job;
use crate::import::kineto::profile::{Source, read_file};
use crate::import::stream::ScanLimits;

fn profiles(dir: &str, files: &[&str]) -> Vec<RankProfile> {
    files
        .iter()
        .map(|f| {
            let path = crate::test_data::fixture(&format!("{dir}/{f}"));
            read_file(Source::Path(&path), &ScanLimits::default(), None).unwrap()
        })
        .collect()
}

fn options(phase: Option<&str>) -> JobOptions {
    JobOptions {
        workload_name: "w".to_owned(),
        phase: phase.map(str::to_owned),
        clock_offsets_us: FxHashMap::default(),
        strict: false,
    }
}

/// Asserts the two imports agree, with each shard whole and cut into
/// ranges of steps; whether they imported (not both refused).
fn same_as_one_process(ps: Vec<RankProfile>, labels: &[String], options: &JobOptions) -> bool {
    let mut imported = false;
    for ranges in RANGES {
        imported = same_in_ranges(ps.clone(), labels, options, ranges).is_some();
    }
    imported
}

/// Ranges of steps the tests cut each shard into.
const RANGES: [u32; 4] = [1, 2, 5, 1000];

/// Asserts the two imports agree with shards cut into `ranges` ranges;
/// the units cut and aligned, when they imported.
fn same_in_ranges(
    ps: Vec<RankProfile>,
    labels: &[String],
    options: &JobOptions,
    ranges: u32,
) -> Option<(usize, usize)> {
    let whole = import_job(ps.clone(), labels, options);
    let sharded =
        import_in_units(ps, labels, options, ranges).map(|s| s.expect("a job for the plan"));
    let (whole, sharded) = match (whole, sharded) {
        (Ok(w), Ok(s)) => (w, s),
        (Err(w), Err(s)) => {
            assert_eq!(w.message(), s.message());
            return None;
        }
        (w, s) => panic!("one process: {:?}; sharded: {:?}", w.err(), s.err()),
    };
    let bytes = |t: &crate::trace::Trace| {
        let order: Vec<u32> = (0..t.events.len() as u32).collect();
        let mut out = Vec::new();
        t.write_projection(&order, &mut |piece: &[u8]| out.extend_from_slice(piece));
        out
    };
    let (sharded, units) = sharded;
    let (a, b) = (bytes(&whole.trace), bytes(&sharded.trace));
    assert!(!a.is_empty());
    assert_eq!(whole.trace.signatures, sharded.trace.signatures);
    assert_eq!(whole.trace.events.start_us, sharded.trace.events.start_us);
    assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
    assert_eq!(whole.counts, sharded.counts);
    assert_eq!(whole.partial, sharded.partial);
    Some(units)
}

#[test]
fn fixture_jobs_import_the_same_bytes_sharded() {
    let ranks = ["rank0.json", "rank1.json", "rank2.json", "rank3.json"];
    let labels: Vec<String> = ranks.iter().map(|r| (*r).to_owned()).collect();
    for dir in [
        "kineto/gloo_tp4_decode",
        "kineto/gloo_w4_ddp_straggler/markers",
    ] {
        for phase in [None, Some("train")] {
            assert!(same_as_one_process(
                profiles(dir, &ranks),
                &labels,
                &options(phase)
            ));
        }
        // Files in another order, and a rank missing (partial collectives).
        let mut reversed = profiles(dir, &ranks);
        reversed.reverse();
        let rev_labels: Vec<String> = labels.iter().rev().cloned().collect();
        assert!(same_as_one_process(reversed, &rev_labels, &options(None)));
        same_as_one_process(profiles(dir, &ranks[..3]), &labels[..3], &options(None));
    }
}

#[test]
fn jobs_without_markers_are_not_for_the_plan() {
    let ranks = ["rank0.json", "rank1.json", "rank2.json", "rank3.json"];
    let labels: Vec<String> = ranks.iter().map(|r| (*r).to_owned()).collect();
    let ps = profiles("kineto/gloo_w4_ddp_straggler/nomarkers", &ranks);
    let sharded = import_job_sharded(ps, &labels, &options(None), 4);
    assert!(sharded.unwrap().is_none());
}

#[test]
fn windows_join_and_a_rank_given_twice_is_refused_as_in_one_process() {
    let windows = crate::test_data::SIGKILL_WINDOWS;
    let labels: Vec<String> = windows.iter().map(|r| (*r).to_owned()).collect();
    let mut ps = profiles("hang/gloo_w4_rank_sigkill", &windows);
    assert!(ps.iter().any(|p| p.calls.iter().any(|c| c.step >= 0)));
    assert!(same_as_one_process(ps.clone(), &labels, &options(None)));
    // In another file order the windows join the same.
    ps.reverse();
    let rev: Vec<String> = labels.iter().rev().cloned().collect();
    assert!(same_as_one_process(ps, &rev, &options(None)));
    let ranks = ["rank0.json", "rank1.json", "rank2.json", "rank3.json"];
    let mut twice = profiles("kineto/gloo_tp4_decode", &ranks);
    twice.push(twice[0].clone());
    let mut l: Vec<String> = ranks.iter().map(|r| (*r).to_owned()).collect();
    l.push("again".to_owned());
    assert!(!same_as_one_process(twice, &l, &options(None)));
}

#[test]
fn messages_round_trip_and_refuse_damage() {
    let ps = profiles("kineto/gloo_tp4_decode", &["rank0.json", "rank1.json"]);
    let bytes = encode_head(&ps[1]);
    let (back, facts) = decode_head(&bytes).unwrap();
    assert!(back.calls.is_empty() && facts.markers);
    assert_eq!(facts.span, crate::import::kineto::job::window_span(&ps[1]));
    for cut in [0, 1, bytes.len() / 2] {
        assert!(decode_head(&bytes[..cut]).is_err());
    }
    let named = own_candidate_sets(&ps[1]);
    assert!(
        !named.is_empty(),
        "a gloo all_reduce fits the world and the rank's pair"
    );
    let groups = ps[1].groups.clone();
    let bytes = encode_named_sets(&named);
    let sets = sets_by_index(&groups, std::slice::from_ref(&bytes)).unwrap();
    assert_eq!(sets.len(), named.len());
    assert!(sets_by_index(&groups, &[bytes[..9].to_vec()]).is_err());
    assert!(sets_by_index(&groups[..1], &[bytes]).is_err());
    assert!(shard_map(2, [&[0_u32, 5][..]]).is_err());
    let piece = Piece {
        slot: 1,
        profile: ps[1].clone(),
        calls: (0..ps[1].calls.len()).collect(),
        fence: true,
    };
    assert_eq!(
        Piece::decode(&piece.encode()).unwrap().encode(),
        piece.encode()
    );
    assert!(Piece::decode(&piece.encode()[..20]).is_err());
    let mut flag = piece.encode();
    flag[8] = 2;
    assert!(Piece::decode(&flag).is_err());
}

#[test]
fn generated_jobs_import_the_same_bytes_sharded() {
    use crate::import::kineto::generated_jobs::generated;
    let (mut shards_seen, mut imported) = (0, 0);
    for seed in 0..12 {
        for (named, world_calls) in [(true, true), (true, false), (false, false), (false, true)] {
            let g = generated(seed, named, world_calls);
            shards_seen = shards_seen.max(crate::import::kineto::shard::shards(&g.job()).len());
            let labels: Vec<String> = (0..8).map(|r| format!("rank{r}.json")).collect();
            imported += usize::from(same_as_one_process(g.profiles, &labels, &options(None)));
        }
    }
    assert!(shards_seen >= 6);
    assert_eq!(imported, 48);
}

#[test]
fn step_ranges_stay_apart_where_their_ends_are_clean_and_merge_where_not() {
    use crate::import::kineto::generated_jobs::generated;
    let labels: Vec<String> = (0..8).map(|r| format!("rank{r}.json")).collect();
    let (mut cut, mut aligned, mut merged_jobs, mut apart_jobs) = (0, 0, 0, 0);
    for seed in 0..12 {
        for (named, world_calls) in [(true, true), (false, false), (false, true)] {
            let g = generated(seed, named, world_calls);
            let shards = crate::import::kineto::shard::shards(&g.job()).len();
            let (c, a) = same_in_ranges(g.profiles, &labels, &options(None), 12)
                .expect("a generated job imports");
            assert!(a <= c && a >= shards);
            merged_jobs += usize::from(a < c);
            apart_jobs += usize::from(a > shards);
            (cut, aligned) = (cut + c, aligned + a);
        }
    }
    // Missing calls make some searches read past a range's end (merged);
    // most ends are clean, and those ranges align apart.
    assert!(
        merged_jobs > 0 && apart_jobs > 0,
        "{merged_jobs} {apart_jobs}"
    );
    assert!(aligned * 2 > cut, "{aligned} of {cut}");
    // A real job: the straggler fixture's steps, one range each.
    let ranks = ["rank0.json", "rank1.json", "rank2.json", "rank3.json"];
    let rank_labels: Vec<String> = ranks.iter().map(|r| (*r).to_owned()).collect();
    let ps = profiles("kineto/gloo_w4_ddp_straggler/markers", &ranks);
    let (c, a) = same_in_ranges(ps, &rank_labels, &options(None), 1000).unwrap();
    assert!(a > 1, "the fixture's steps align apart: {a} of {c}");
}
