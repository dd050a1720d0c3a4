//! The change of one statistic between two sides of repeated runs, with a
//! percentile-bootstrap confidence interval.
//!
//! A side's centre is the mean of its runs' values. One bootstrap resample
//! draws each side's runs with replacement; for a quantile statistic whose
//! runs carry their samples, each drawn run's value is recomputed from its
//! samples drawn with replacement (the second level), else the run's stated
//! value is used. The change is `candidate − baseline` in the statistic's
//! unit and, when the baseline's centre is not zero, in percent of it. The
//! interval is the `(1 − c)/2` and `(1 + c)/2` quantiles of the resampled
//! changes (NumPy's linear rule, [`crate::pyfloat::quantile_sorted`]).
//!
//! The generator is MT19937-64 seeded with the caller's seed, so an interval
//! is reproducible bit for bit.

use rand_mt::Mt64;

use crate::pyfloat::quantile_sorted;

/// One side of a comparison: a statistic over its runs.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    /// The statistic as each run states it.
    pub values: &'a [f64],
    /// Each run's samples, sorted ascending (for a quantile statistic whose
    /// runs carry them).
    pub samples: Option<&'a [Vec<f64>]>,
}

/// How intervals are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bootstrap {
    /// Resamples (≥ 1).
    pub resamples: u32,
    /// Confidence level in (0, 1).
    pub confidence: f64,
    /// Seed of the generator.
    pub seed: u64,
    /// The quantile (percent) a run's samples give its value by, when the
    /// statistic is one; `None` for statistics only runs state.
    pub quantile: Option<f64>,
}

/// The change of a statistic and its interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    /// Baseline centre (mean over runs).
    pub baseline: f64,
    /// Candidate centre.
    pub candidate: f64,
    /// `candidate − baseline`.
    pub estimate: f64,
    /// Interval of the absolute change.
    pub low: f64,
    /// Interval of the absolute change.
    pub high: f64,
    /// The change in percent of the baseline (`None` when it is zero).
    pub estimate_pct: Option<f64>,
    /// Interval of the percent change.
    pub low_pct: Option<f64>,
    /// Interval of the percent change.
    pub high_pct: Option<f64>,
}

/// The mean as `first + mean(v − first)`: exactly the value when every run
/// states the same one (a sum of equal values need not divide back to it).
fn mean(values: &[f64]) -> f64 {
    let first = values[0];
    first + values.iter().map(|v| v - first).sum::<f64>() / values.len() as f64
}

/// A uniform index below `n` (multiply-shift; `n ≥ 1`).
fn below(rng: &mut Mt64, n: usize) -> usize {
    ((u128::from(rng.next_u64()) * n as u128) >> 64) as usize
}

/// The `q` quantile of a resample (with replacement) of `sorted`, in one
/// pass over counts: the resample's order statistics are `sorted` at its
/// drawn indices in ascending order.
fn resampled_quantile(sorted: &[f64], q: f64, rng: &mut Mt64, counts: &mut Vec<u32>) -> f64 {
    let n = sorted.len();
    counts.clear();
    counts.resize(n, 0);
    for _ in 0..n {
        counts[below(rng, n)] += 1;
    }
    let pos = (n - 1) as f64 * q / 100.0;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    let (mut lo_value, mut hi_value) = (sorted[n - 1], sorted[n - 1]);
    let mut seen = 0_usize;
    let mut found_lo = false;
    for (i, &c) in counts.iter().enumerate() {
        seen += c as usize;
        if !found_lo && seen > lo {
            lo_value = sorted[i];
            found_lo = true;
        }
        if seen > hi {
            hi_value = sorted[i];
            break;
        }
    }
    if lo == hi {
        lo_value
    } else {
        let frac = pos - lo as f64;
        lo_value * (1.0 - frac) + hi_value * frac
    }
}

/// One resample of a side's centre.
fn resampled_centre(
    side: &Side<'_>,
    quantile: Option<f64>,
    rng: &mut Mt64,
    counts: &mut Vec<u32>,
) -> f64 {
    let n = side.values.len();
    let first = side.values[0];
    let mut sum = 0.0;
    for _ in 0..n {
        let run = below(rng, n);
        let value = match (quantile, side.samples) {
            (Some(q), Some(samples)) if !samples[run].is_empty() => {
                resampled_quantile(&samples[run], q, rng, counts)
            }
            _ => side.values[run],
        };
        sum += value - first;
    }
    first + sum / n as f64
}

fn percent(change: f64, base: f64) -> Option<f64> {
    (base != 0.0).then(|| change / base.abs() * 100.0)
}

/// The change from `baseline` to `candidate` and its bootstrap interval.
/// Both sides must have runs ([`super::check_sides`]).
#[must_use]
pub fn change_interval(baseline: &Side<'_>, candidate: &Side<'_>, options: &Bootstrap) -> Change {
    let (b, c) = (mean(baseline.values), mean(candidate.values));
    let mut rng = Mt64::new(options.seed);
    let mut counts = Vec::new();
    let resamples = options.resamples.max(1) as usize;
    let mut absolute = Vec::with_capacity(resamples);
    let mut relative = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        let rb = resampled_centre(baseline, options.quantile, &mut rng, &mut counts);
        let rc = resampled_centre(candidate, options.quantile, &mut rng, &mut counts);
        absolute.push(rc - rb);
        if let Some(p) = percent(rc - rb, rb) {
            relative.push(p);
        }
    }
    absolute.sort_by(f64::total_cmp);
    relative.sort_by(f64::total_cmp);
    let tail = (1.0 - options.confidence) / 2.0 * 100.0;
    let bounds = |sorted: &[f64]| {
        (
            quantile_sorted(sorted, tail),
            quantile_sorted(sorted, 100.0 - tail),
        )
    };
    let (low, high) = bounds(&absolute);
    let estimate_pct = percent(c - b, b);
    // A resample whose baseline centre is zero has no percent change; the
    // interval is drawn from the others, and is absent only if none has one.
    let (low_pct, high_pct) = if estimate_pct.is_some() && !relative.is_empty() {
        let (lo, hi) = bounds(&relative);
        (Some(lo), Some(hi))
    } else {
        (None, None)
    };
    Change {
        baseline: b,
        candidate: c,
        estimate: c - b,
        low: low.min(c - b),
        high: high.max(c - b),
        estimate_pct,
        low_pct: low_pct.zip(estimate_pct).map(|(l, e)| l.min(e)),
        high_pct: high_pct.zip(estimate_pct).map(|(h, e)| h.max(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A side of runs that state only their values.
    fn stated(values: &[f64]) -> Side<'_> {
        Side {
            values,
            samples: None,
        }
    }

    fn options(quantile: Option<f64>) -> Bootstrap {
        Bootstrap {
            resamples: 2000,
            confidence: 0.95,
            seed: 11,
            quantile,
        }
    }

    #[test]
    fn identical_runs_give_a_point() {
        let b = [10.0; 5];
        let c = [12.0; 7];
        let change = change_interval(&stated(&b), &stated(&c), &options(None));
        assert_eq!((change.low, change.estimate, change.high), (2.0, 2.0, 2.0));
        assert_eq!(change.estimate_pct, Some(20.0));
        assert_eq!((change.low_pct, change.high_pct), (Some(20.0), Some(20.0)));
    }

    #[test]
    fn the_interval_is_seeded_and_covers_the_estimate() {
        let b = [100.0, 104.0, 97.0, 101.0, 99.0, 103.0];
        let c = [110.0, 108.0, 113.0, 109.0, 111.0, 107.0];
        let one = change_interval(&stated(&b), &stated(&c), &options(None));
        let two = change_interval(&stated(&b), &stated(&c), &options(None));
        assert_eq!(one, two);
        assert!(one.low < one.estimate && one.estimate < one.high);
        assert!(one.low > 5.0 && one.high < 14.0, "{one:?}");
    }

    #[test]
    fn a_resampled_quantile_is_a_quantile_of_some_resample() {
        let sorted: Vec<f64> = (0..101).map(f64::from).collect();
        let mut rng = Mt64::new(3);
        let mut counts = Vec::new();
        for _ in 0..200 {
            let v = resampled_quantile(&sorted, 50.0, &mut rng, &mut counts);
            assert!((20.0..=80.0).contains(&v), "{v}");
        }
        // A one-valued run always gives its value.
        assert_eq!(resampled_quantile(&[4.0], 99.0, &mut rng, &mut counts), 4.0);
    }

    #[test]
    fn samples_widen_the_interval_of_a_quantile() {
        let values = [50.0, 50.0, 50.0, 50.0];
        let runs: Vec<Vec<f64>> = (0..4)
            .map(|r| (0..200).map(|i| f64::from(i % 100 + r)).collect::<Vec<_>>())
            .map(|mut v| {
                v.sort_by(f64::total_cmp);
                v
            })
            .collect();
        let without = change_interval(&stated(&values), &stated(&values), &options(Some(50.0)));
        let with = change_interval(
            &Side {
                values: &values,
                samples: Some(&runs),
            },
            &Side {
                values: &values,
                samples: Some(&runs),
            },
            &options(Some(50.0)),
        );
        assert_eq!(without.high - without.low, 0.0);
        assert!(with.high - with.low > 1.0, "{with:?}");
    }
}
