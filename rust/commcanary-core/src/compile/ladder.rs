//! The timing compression ladder of one signature group.
//!
//! For samples `s[0..n)` and limit `L`, the first rung that applies wins:
//!
//! 1. all exact, when `n ≤ L`;
//! 2. one whole periodic pattern: the smallest period `p ≤ min(max(1, L−1), n/2)`
//!    dividing `n` with `s[i] = s[i mod p]`;
//! 3. a prefix of `a ∈ 1..min(4, n−1)` exact records plus a periodic tail, when
//!    `L ≥ 4` and `n ≥ 4`, accepted when `a + 1 + p ≤ L`, first `(a, p)` wins;
//! 4. run-length records, when there are at most `L` runs;
//! 5. bounded intervals around priority anchors ([`super::bounded`]).

use super::bounded::bounded_intervals;
use super::record::GroupRecord;
use super::samples::Samples;

fn periodic(class: &[u32], p: usize) -> bool {
    class.len() % p == 0 && (p..class.len()).all(|i| class[i] == class[i - p])
}

/// Compresses samples `start..start+n` (all of one signature with
/// `rank_count` ranks) under limit `limit`, appending records to `out`.
pub fn compress_group(
    samples: &Samples,
    start: usize,
    n: usize,
    limit: usize,
    rank_count: usize,
    out: &mut Vec<GroupRecord>,
) {
    let class = &samples.class[start..start + n];
    if n <= limit {
        out.extend((0..n).map(|i| GroupRecord::Plain {
            first: (start + i) as u32,
            weight: 1,
        }));
        return;
    }
    let max_period = (limit.saturating_sub(1)).max(1).min(n / 2);
    for p in 1..=max_period {
        if periodic(class, p) {
            out.push(GroupRecord::Pattern {
                first: start as u32,
                period: p as u32,
                repeats: (n / p) as u32,
            });
            return;
        }
    }
    if limit >= 4 && n >= 4 {
        for a in 1..(n - 1).min(4) {
            let m = n - a;
            let max_period = (limit as i64 - a as i64 - 1).max(1) as usize;
            let max_period = max_period.min(m / 2);
            for p in 1..=max_period {
                if a + 1 + p > limit {
                    continue;
                }
                if periodic(&class[a..], p) {
                    out.extend((0..a).map(|i| GroupRecord::Plain {
                        first: (start + i) as u32,
                        weight: 1,
                    }));
                    out.push(GroupRecord::Pattern {
                        first: (start + a) as u32,
                        period: p as u32,
                        repeats: (m / p) as u32,
                    });
                    return;
                }
            }
        }
    }
    let runs = 1 + class.windows(2).filter(|w| w[0] != w[1]).count();
    if runs <= limit {
        let mut i = 0;
        while i < n {
            let mut j = i + 1;
            while j < n && class[j] == class[i] {
                j += 1;
            }
            out.push(GroupRecord::Plain {
                first: (start + i) as u32,
                weight: (j - i) as u32,
            });
            i = j;
        }
        return;
    }
    bounded_intervals(samples, start, n, limit, rank_count, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(classes: &[u32]) -> Samples {
        let n = classes.len();
        Samples {
            signature: vec![0; n],
            gap: classes.iter().map(|&c| f64::from(c)).collect(),
            skew: vec![0.0; n],
            before: vec![0.0; n],
            overlap: vec![0.0; n],
            pressure: vec![0.5; n],
            observed: vec![f64::NAN; n],
            uncertain: vec![false; n],
            offsets_at: (0..n as u32).collect(),
            offsets: vec![0.0; n],
            class: classes.to_vec(),
        }
    }

    fn compress(classes: &[u32], limit: usize) -> Vec<GroupRecord> {
        let s = samples(classes);
        let mut out = Vec::new();
        compress_group(&s, 0, classes.len(), limit, 1, &mut out);
        out
    }

    #[test]
    fn exact_when_within_limit() {
        assert_eq!(compress(&[1, 1, 2], 3).len(), 3);
    }

    #[test]
    fn whole_pattern() {
        let out = compress(&[1, 2, 1, 2, 1, 2], 3);
        assert_eq!(
            out,
            vec![GroupRecord::Pattern {
                first: 0,
                period: 2,
                repeats: 3
            }]
        );
    }

    #[test]
    fn prefix_then_pattern() {
        let out = compress(&[9, 1, 2, 1, 2, 1, 2], 4);
        assert_eq!(
            out[0],
            GroupRecord::Plain {
                first: 0,
                weight: 1
            }
        );
        assert_eq!(
            out[1],
            GroupRecord::Pattern {
                first: 1,
                period: 2,
                repeats: 3
            }
        );
    }

    #[test]
    fn runs() {
        let out = compress(&[1, 1, 1, 2, 2, 3, 3, 3, 3], 3);
        assert_eq!(
            out,
            vec![
                GroupRecord::Plain {
                    first: 0,
                    weight: 3
                },
                GroupRecord::Plain {
                    first: 3,
                    weight: 2
                },
                GroupRecord::Plain {
                    first: 5,
                    weight: 4
                }
            ]
        );
    }
}
