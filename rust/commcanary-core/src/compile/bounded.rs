//! Bounded-interval approximation of a signature group (the ladder's last rung).
//!
//! 1. Every sample may be offered priority `(tier, magnitude)` anchors; the
//!    highest offer wins (tiers: endpoints 100, observed tail 90, backlog
//!    transition 80, skew with overlap 75, high skew 70, high overlap 60, high
//!    pressure 50, sensitivity transition 40, long gap 20, zero-gap transition
//!    10, change magnitude 0).
//! 2. Candidates are tried by (tier desc, magnitude desc, index asc); a
//!    candidate becomes an exact anchor if the record count stays within the
//!    limit (anchors plus one interval per non-empty stretch between them).
//! 3. Each stretch becomes one bounded interval: the exact gap sum, the sample
//!    nearest the component-wise median (normalised L1; the gap centre is the
//!    mean gap) as representative, per-field maximum errors, and the SHA-256 of
//!    the canonical segment `{"samples": [...]}`.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

use super::record::{BoundedRecord, GroupRecord};
use super::samples::Samples;
use crate::canary::IntervalErrors;
use crate::json::canon::{self, ObjectWriter};
use crate::pyfloat::{py_sum, quantile, round};

const ENDPOINT: u8 = 100;
const OBSERVED_TAIL: u8 = 90;
const BACKLOG_TRANSITION: u8 = 80;
const SKEW_WITH_OVERLAP: u8 = 75;
const HIGH_SKEW: u8 = 70;
const HIGH_OVERLAP: u8 = 60;
const HIGH_PRESSURE: u8 = 50;
const SENSITIVITY_TRANSITION: u8 = 40;
const LONG_GAP: u8 = 20;
const ZERO_GAP_TRANSITION: u8 = 10;
const CHANGE_MAGNITUDE: u8 = 0;

/// Anchor priorities of a group's samples (`None` = not a candidate).
fn priorities(s: &Samples, start: usize, n: usize) -> Vec<Option<(u8, f64)>> {
    let at = |v: &Vec<f64>, i: usize| v[start + i];
    let p95_skew = quantile(&s.skew[start..start + n], 95.0);
    let p95_overlap = quantile(&s.overlap[start..start + n], 95.0);
    let p95_pressure = quantile(&s.pressure[start..start + n], 95.0);
    let has_observed = !s.observed[start].is_nan();
    let p95_observed = if has_observed {
        quantile(&s.observed[start..start + n], 95.0)
    } else {
        0.0
    };
    let positive: Vec<f64> = s.gap[start..start + n]
        .iter()
        .copied()
        .filter(|&g| g > 0.0)
        .collect();
    let median_positive_gap = quantile(&positive, 50.0);

    let mut prio: Vec<Option<(u8, f64)>> = vec![None; n];
    let mut offer = |i: usize, tier: u8, magnitude: f64| {
        let better = match prio[i] {
            None => true,
            Some((t, m)) => tier > t || (tier == t && magnitude > m),
        };
        if better {
            prio[i] = Some((tier, magnitude));
        }
    };
    let delta = |i: usize| -> f64 {
        let mut d = (at(&s.gap, i) - at(&s.gap, i - 1)).abs()
            + (at(&s.skew, i) - at(&s.skew, i - 1)).abs()
            + (at(&s.before, i) - at(&s.before, i - 1)).abs()
            + (at(&s.overlap, i) - at(&s.overlap, i - 1)).abs()
            + (at(&s.pressure, i) - at(&s.pressure, i - 1)).abs();
        let (a, b) = (at(&s.observed, i), at(&s.observed, i - 1));
        if !a.is_nan() && !b.is_nan() {
            d += (a - b).abs();
        }
        d
    };
    let sensitive = |i: usize| at(&s.skew, i) >= p95_skew || at(&s.overlap, i) >= p95_overlap;
    let mut backlog_prev = 0.0f64;
    for i in 0..n {
        let gap = at(&s.gap, i);
        let skew = at(&s.skew, i);
        let overlap = at(&s.overlap, i);
        let pressure = at(&s.pressure, i);
        if i == 0 || i == n - 1 {
            offer(i, ENDPOINT, 0.0);
        }
        if has_observed && i >= 1 && at(&s.observed, i) >= p95_observed {
            offer(i, OBSERVED_TAIL, at(&s.observed, i));
        }
        let service = 8.0 + 0.15 * skew + 8.0 * pressure;
        let backlog = (backlog_prev + service - gap).max(0.0);
        if (backlog == 0.0) != (backlog_prev == 0.0) {
            offer(i, BACKLOG_TRANSITION, (backlog - backlog_prev).abs());
        }
        backlog_prev = backlog;
        if skew > 0.0 && overlap > 0.0 {
            offer(i, SKEW_WITH_OVERLAP, skew + overlap);
        }
        if p95_skew > 0.0 && skew >= p95_skew {
            offer(i, HIGH_SKEW, skew);
        }
        if p95_overlap > 0.0 && overlap >= p95_overlap {
            offer(i, HIGH_OVERLAP, overlap);
        }
        if p95_pressure > 0.0 && pressure >= p95_pressure {
            offer(i, HIGH_PRESSURE, pressure);
        }
        if i >= 1 && sensitive(i) != sensitive(i - 1) {
            offer(i, SENSITIVITY_TRANSITION, delta(i));
        }
        if gap > 0.0 && (median_positive_gap == 0.0 || gap >= 4.0 * median_positive_gap) {
            offer(i, LONG_GAP, gap);
        }
        if i >= 1 {
            let prev = at(&s.gap, i - 1);
            if (gap == 0.0) != (prev == 0.0) {
                offer(i, ZERO_GAP_TRANSITION, (gap - prev).abs());
            }
            let d = delta(i);
            if d > 0.0 {
                offer(i, CHANGE_MAGNITUDE, d);
            }
        }
    }
    prio
}

/// Greedy anchor selection: returns sorted anchor positions.
fn select_anchors(prio: &[Option<(u8, f64)>], limit: usize) -> Vec<usize> {
    let n = prio.len();
    let mut candidates: Vec<(u8, f64, usize)> = prio
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.map(|(t, m)| (t, m, i)))
        .collect();
    candidates.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)).then(a.2.cmp(&b.2)));
    let mut anchors: BTreeSet<usize> = BTreeSet::new();
    let mut count = usize::from(n > 0);
    for (_, _, x) in candidates {
        let prev = anchors.range(..x).next_back().map_or(-1, |&p| p as i64);
        let next = anchors
            .range(x + 1..)
            .next()
            .map_or(n as i64, |&q| q as i64);
        let x = x as i64;
        let delta = usize::from(x - prev - 1 > 0) + usize::from(next - x - 1 > 0);
        if count + delta <= limit {
            anchors.insert(x as usize);
            count += delta;
        }
    }
    if anchors.is_empty() {
        anchors.insert(0);
    }
    anchors.into_iter().collect()
}

/// Emits anchors and bounded intervals for samples `start..start+n`.
pub fn bounded_intervals(
    s: &Samples,
    start: usize,
    n: usize,
    limit: usize,
    rank_count: usize,
    out: &mut Vec<GroupRecord>,
) {
    let prio = priorities(s, start, n);
    let anchors = select_anchors(&prio, limit);
    let mut next = 0usize;
    for &a in &anchors {
        if a > next {
            out.push(GroupRecord::Bounded(Box::new(interval(
                s,
                start,
                next,
                a - 1,
                rank_count,
            ))));
        }
        out.push(GroupRecord::Plain {
            first: (start + a) as u32,
            weight: 1,
        });
        next = a + 1;
    }
    if next < n {
        out.push(GroupRecord::Bounded(Box::new(interval(
            s,
            start,
            next,
            n - 1,
            rank_count,
        ))));
    }
}

fn max_abs_dev(values: &[f64], center: f64) -> f64 {
    values
        .iter()
        .fold(0.0f64, |m, &v| m.max((v - center).abs()))
}

/// Summarises group-relative samples `lo..=hi` of the group starting at `start`.
fn interval(s: &Samples, start: usize, lo: usize, hi: usize, ranks: usize) -> BoundedRecord {
    let (a, b) = (start + lo, start + hi + 1);
    let w = b - a;
    let gaps = &s.gap[a..b];
    let skews = &s.skew[a..b];
    let befores = &s.before[a..b];
    let overlaps = &s.overlap[a..b];
    let pressures = &s.pressure[a..b];
    let observed = &s.observed[a..b];
    let has_observed = !observed[0].is_nan();

    let gap_sum = py_sum(gaps.iter().copied());
    let avg_gap = gap_sum / w as f64;
    let scale = |v: &[f64]| v.iter().copied().fold(1.0f64, f64::max);
    let (sg, ss, sb, so, sp) = (
        scale(gaps),
        scale(skews),
        scale(befores),
        scale(overlaps),
        scale(pressures),
    );
    let so_bs = if has_observed { scale(observed) } else { 1.0 };
    let (cs, cb, co, cp) = (
        quantile(skews, 50.0),
        quantile(befores, 50.0),
        quantile(overlaps, 50.0),
        quantile(pressures, 50.0),
    );
    let c_obs = if has_observed {
        quantile(observed, 50.0)
    } else {
        0.0
    };

    let mut best = 0usize;
    let mut best_distance = f64::INFINITY;
    let mut terms = [0.0f64; 6];
    for j in 0..w {
        terms[0] = (gaps[j] - avg_gap).abs() / sg;
        terms[1] = (skews[j] - cs).abs() / ss;
        terms[2] = (befores[j] - cb).abs() / sb;
        terms[3] = (overlaps[j] - co).abs() / so;
        terms[4] = (pressures[j] - cp).abs() / sp;
        let k = if has_observed {
            terms[5] = (observed[j] - c_obs).abs() / so_bs;
            6
        } else {
            5
        };
        let d = py_sum(terms[..k].iter().copied());
        if d < best_distance {
            best_distance = d;
            best = j;
        }
    }
    let rep = a + best;

    let rep_offsets = s.offsets_of(rep, ranks);
    let mut offset_error = 0.0f64;
    for j in a..b {
        for (x, r) in s.offsets_of(j, ranks).iter().zip(rep_offsets) {
            offset_error = offset_error.max((x - r).abs());
        }
    }
    let mut prefix_error = 0.0f64;
    let mut running = 0.0f64;
    for (k, &g) in gaps.iter().enumerate() {
        running += g;
        prefix_error = prefix_error.max((running - (k + 1) as f64 * avg_gap).abs());
    }
    let errors = IntervalErrors {
        gap: round(max_abs_dev(gaps, avg_gap), 9),
        skew: round(max_abs_dev(skews, s.skew[rep]), 9),
        arrival_offset: round(offset_error, 9),
        compute_before: round(max_abs_dev(befores, s.before[rep]), 9),
        overlap: round(max_abs_dev(overlaps, s.overlap[rep]), 9),
        pressure: round(max_abs_dev(pressures, s.pressure[rep]), 6),
        observed: if has_observed {
            round(max_abs_dev(observed, s.observed[rep]), 9)
        } else {
            f64::NAN
        },
        prefix_gap: round(prefix_error, 9),
        representative_gap: round((s.gap[rep] - avg_gap).abs(), 9),
    };
    BoundedRecord {
        start: a as u32,
        weight: w as u32,
        representative: rep as u32,
        representative_index: (rep - start) as u32,
        gap_us: round(avg_gap, 9),
        gap_sum_us: round(gap_sum, 9),
        errors,
        segment_sha256: segment_digest(s, a, b, ranks),
        uncertain_weight: s.uncertain[a..b].iter().filter(|&&u| u).count() as u32,
    }
}

/// SHA-256 of canonical `{"samples": [normalised sample, ...]}` for samples
/// `a..b`. Each sample is `{"arrival_offsets_us", "arrival_skew_us",
/// "compute_before_us", ["compute_fields_uncertain": true],
/// "compute_overlap_us", "compute_pressure", "gap_us", ["observed_exposed_us"]}`.
#[must_use]
pub fn segment_digest(s: &Samples, a: usize, b: usize, ranks: usize) -> [u8; 32] {
    let mut hasher = Sha256::new();
    let mut buf = Vec::with_capacity(256);
    hasher.update(b"{\"samples\":[");
    for j in a..b {
        buf.clear();
        if j > a {
            buf.push(b',');
        }
        let mut o = ObjectWriter::new(&mut buf);
        canon::write_f64_array(o.key("arrival_offsets_us"), s.offsets_of(j, ranks));
        o.f64("arrival_skew_us", s.skew[j]);
        o.f64("compute_before_us", s.before[j]);
        if s.uncertain[j] {
            o.bool("compute_fields_uncertain", true);
        }
        o.f64("compute_overlap_us", s.overlap[j]);
        o.f64("compute_pressure", s.pressure[j]);
        o.f64("gap_us", s.gap[j]);
        if !s.observed[j].is_nan() {
            o.f64("observed_exposed_us", s.observed[j]);
        }
        o.end();
        hasher.update(&buf);
    }
    hasher.update(b"]}");
    hasher.finalize().into()
}
