//! Communication performance: per (group, op, message-size bucket), the
//! count, the algorithm, and the algorithm and bus bandwidth of nccl-tests,
//! with the instances far below their class's own typical bandwidth.
//!
//! For one instance of `S` bytes (the larger of a member's input and output,
//! which is the size nccl-tests divides by: the whole buffer of an
//! all_reduce, the gathered output of an all_gather, the scattered input of
//! a reduce_scatter) over `n` ranks, taking `t` from the last arrival to the
//! last end (waiting excluded): `algbw = S / t` and `busbw = algbw · f`,
//! with `f = 2(n−1)/n` for all_reduce, `(n−1)/n` for all_gather,
//! reduce_scatter and all_to_all, and 1 for broadcast, reduce and p2p
//! (one `send_recv` row per transfer size, both ends counted once).
//! Buckets are powers of two (`[2^k, 2^(k+1))` bytes).
//!
//! An instance is flagged when its bus bandwidth is below half its class's
//! median *and* its time is above the class's median + [`super::SLOW_Z`]
//! robust σ (σ at least 5% of the median and 1 µs): far below, and beyond
//! the class's own noise.
//!
//! Invariants: rows sorted by (group, op, bucket); flagged instances by
//! (step, time) within a row, at most [`MAX_FLAGGED`] listed (all counted).

use std::collections::BTreeMap;

use crate::import::kineto::ops::ALGORITHMS;
use crate::json::Json;

/// Flagged instances listed per row (all are counted).
pub const MAX_FLAGGED: usize = 32;

/// One instance as the table sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Job group index.
    pub group: usize,
    /// Canonical op.
    pub op: &'static str,
    /// Message bytes.
    pub bytes: i64,
    /// Ranks in the group.
    pub ranks: usize,
    /// Last arrival to last end, µs.
    pub time_us: f64,
    /// Its step (−1 when none).
    pub step: i64,
    /// The member that ended last.
    pub slowest_rank: i64,
    /// Index into [`ALGORITHMS`].
    pub algorithm: u8,
    /// Instance index in the aligned job.
    pub instance: usize,
}

/// A flagged instance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flagged {
    /// Its step.
    pub step: i64,
    /// The member that ended last.
    pub rank: i64,
    /// Its time, µs.
    pub time_us: f64,
    /// Its bus bandwidth, GB/s.
    pub busbw_gbps: f64,
    /// Instance index in the aligned job.
    pub instance: usize,
}

/// One (group, op, bucket) row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Job group index.
    pub group: usize,
    /// Canonical op.
    pub op: &'static str,
    /// The bucket's lower bound, bytes (a power of two).
    pub bucket_bytes: i64,
    /// Smallest and largest message in it.
    pub bytes_min: i64,
    /// Largest message.
    pub bytes_max: i64,
    /// Instances.
    pub count: usize,
    /// The algorithm most instances ran (`""` when unknown, as for gloo).
    pub algorithm: &'static str,
    /// Ranks in the group.
    pub ranks: usize,
    /// nccl-tests' bus factor.
    pub bus_factor: f64,
    /// Median time, µs.
    pub median_time_us: f64,
    /// Median algorithm bandwidth, GB/s.
    pub median_algbw_gbps: f64,
    /// Median bus bandwidth, GB/s.
    pub median_busbw_gbps: f64,
    /// Instances far below the median (see the module doc).
    pub flagged_count: usize,
    /// The first [`MAX_FLAGGED`] of them.
    pub flagged: Vec<Flagged>,
}

/// nccl-tests' bus bandwidth factor of `op` over `n` ranks.
#[must_use]
pub fn bus_factor(op: &str, n: usize) -> f64 {
    let n = n.max(1) as f64;
    match op {
        "all_reduce" => 2.0 * (n - 1.0) / n,
        "all_gather" | "reduce_scatter" | "all_to_all" => (n - 1.0) / n,
        _ => 1.0,
    }
}

/// GB/s of `bytes` in `time_us` (∞ for a zero time).
fn gbps(bytes: i64, time_us: f64) -> f64 {
    if time_us > 0.0 {
        bytes as f64 / time_us / 1e3
    } else {
        f64::INFINITY
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

/// The table over `samples`.
#[must_use]
pub fn table(samples: &[Sample]) -> Vec<Row> {
    let mut classes: BTreeMap<(usize, &'static str, i64), Vec<&Sample>> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.bytes > 0) {
        let bucket = 1_i64 << (63 - s.bytes.leading_zeros());
        classes.entry((s.group, s.op, bucket)).or_default().push(s);
    }
    classes
        .into_iter()
        .map(|((group, op, bucket_bytes), list)| row(group, op, bucket_bytes, &list))
        .collect()
}

fn row(group: usize, op: &'static str, bucket_bytes: i64, list: &[&Sample]) -> Row {
    let ranks = list.iter().map(|s| s.ranks).max().unwrap_or(1);
    let factor = bus_factor(op, ranks);
    let mut times: Vec<f64> = list.iter().map(|s| s.time_us).collect();
    let median_time = median(&mut times);
    let mut dev: Vec<f64> = list
        .iter()
        .map(|s| (s.time_us - median_time).abs())
        .collect();
    let sigma = (1.4826 * median(&mut dev)).max(0.05 * median_time).max(1.0);
    let limit = median_time + super::SLOW_Z * sigma;
    let mut alg: Vec<f64> = list.iter().map(|s| gbps(s.bytes, s.time_us)).collect();
    let median_alg = median(&mut alg);
    let median_bus = median_alg * factor;
    let mut flagged: Vec<Flagged> = list
        .iter()
        .filter_map(|s| {
            let bus = gbps(s.bytes, s.time_us) * factor;
            (s.time_us > limit && bus < 0.5 * median_bus).then_some(Flagged {
                step: s.step,
                rank: s.slowest_rank,
                time_us: s.time_us,
                busbw_gbps: bus,
                instance: s.instance,
            })
        })
        .collect();
    flagged.sort_by(|a, b| {
        (a.step, a.time_us)
            .partial_cmp(&(b.step, b.time_us))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let flagged_count = flagged.len();
    flagged.truncate(MAX_FLAGGED);
    let mut votes = [0_usize; ALGORITHMS.len()];
    for s in list {
        votes[usize::from(s.algorithm).min(ALGORITHMS.len() - 1)] += 1;
    }
    let top = (1..ALGORITHMS.len())
        .max_by_key(|&a| (votes[a], std::cmp::Reverse(a)))
        .filter(|&a| votes[a] > 0);
    Row {
        group,
        op,
        bucket_bytes,
        bytes_min: list.iter().map(|s| s.bytes).min().unwrap_or(0),
        bytes_max: list.iter().map(|s| s.bytes).max().unwrap_or(0),
        count: list.len(),
        algorithm: top.map_or("", |a| ALGORITHMS[a]),
        ranks,
        bus_factor: factor,
        median_time_us: median_time,
        median_algbw_gbps: median_alg,
        median_busbw_gbps: median_bus,
        flagged_count,
        flagged,
    }
}

/// Bandwidths in GB/s for documents, to the kB/s (an infinite one, of a zero
/// time, is written as 0).
#[must_use]
pub fn round_gbps(x: f64) -> f64 {
    if x.is_finite() {
        (x * 1e6).round() / 1e6 + 0.0
    } else {
        0.0
    }
}

/// The members every document's row shares (`op`, sizes, `count`, `ranks`,
/// `bus_factor`, the medians, `flagged_count`); callers add how they name
/// the group and list the flagged instances.
#[must_use]
pub fn row_json(r: &Row) -> Json {
    Json::object()
        .with("op", r.op)
        .with("bucket_bytes", r.bucket_bytes)
        .with("bytes_min", r.bytes_min)
        .with("bytes_max", r.bytes_max)
        .with("count", r.count)
        .with("ranks", r.ranks)
        .with("bus_factor", r.bus_factor)
        .with(
            "median_time_us",
            crate::analysis::round_us(r.median_time_us),
        )
        .with("median_algbw_gbps", round_gbps(r.median_algbw_gbps))
        .with("median_busbw_gbps", round_gbps(r.median_busbw_gbps))
        .with("flagged_count", r.flagged_count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bus_factors_are_nccl_tests() {
        assert_eq!(bus_factor("all_reduce", 4), 1.5);
        assert_eq!(bus_factor("all_gather", 4), 0.75);
        assert_eq!(bus_factor("reduce_scatter", 8), 0.875);
        assert_eq!(bus_factor("all_to_all", 2), 0.5);
        assert_eq!(bus_factor("broadcast", 8), 1.0);
        assert_eq!(bus_factor("send", 2), 1.0);
    }

    #[test]
    fn a_slow_instance_is_flagged_and_sizes_are_bucketed() {
        let sample = |bytes: i64, time_us: f64, step: i64| Sample {
            group: 0,
            op: "all_reduce",
            bytes,
            ranks: 4,
            time_us,
            step,
            slowest_rank: step % 4,
            algorithm: 1,
            instance: step as usize,
        };
        let mut samples: Vec<Sample> = (0..20)
            .map(|s| sample(1 << 20, 100.0 + (s % 3) as f64, s))
            .collect();
        samples.push(sample(1 << 20, 1000.0, 20));
        samples.push(sample((1 << 10) + 5, 10.0, 21));
        let rows = table(&samples);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].bucket_bytes, rows[0].count), (1024, 1));
        let big = &rows[1];
        assert_eq!(
            (big.count, big.algorithm, big.flagged_count),
            (21, "ring", 1)
        );
        assert_eq!(big.flagged[0].step, 20);
        // 1 MiB in 101 µs: 10.38 GB/s algorithm, ×1.5 on the bus.
        assert!((big.median_algbw_gbps - 1048.576 / 101.0).abs() < 1e-9);
        assert!((big.median_busbw_gbps - 1.5 * big.median_algbw_gbps).abs() < 1e-9);
    }
}
