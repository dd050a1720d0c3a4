//! Time-interval helpers of the Kineto importer: [`Intervals`] (a sorted
//! union of disjoint spans with prefix sums, answering "how much of `[a, b]`
//! is covered" in `O(log n)`) and [`Ranges`] (labelled spans: which step or
//! phase a moment falls in).

use rustc_hash::FxHashMap;

/// A union of disjoint, sorted spans.
#[derive(Debug, Clone, Default)]
pub struct Intervals {
    spans: Vec<(f64, f64)>,
    /// `prefix[i]` is the covered length of `spans[..i]`.
    prefix: Vec<f64>,
}

impl Intervals {
    /// The union of `spans` (empty and inverted spans are dropped).
    #[must_use]
    pub fn union(mut spans: Vec<(f64, f64)>) -> Self {
        spans.retain(|s| s.1 > s.0);
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut merged: Vec<(f64, f64)> = Vec::with_capacity(spans.len());
        for (s, e) in spans {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        Self::from_disjoint(merged)
    }

    fn from_disjoint(spans: Vec<(f64, f64)>) -> Self {
        let mut prefix = Vec::with_capacity(spans.len() + 1);
        let mut total = 0.0;
        prefix.push(0.0);
        for (s, e) in &spans {
            total += e - s;
            prefix.push(total);
        }
        Self { spans, prefix }
    }

    /// The disjoint spans, sorted.
    #[must_use]
    pub fn into_spans(self) -> Vec<(f64, f64)> {
        self.spans
    }

    /// `self` minus `other`.
    #[must_use]
    pub fn subtract(&self, other: &Intervals) -> Intervals {
        let mut out = Vec::with_capacity(self.spans.len());
        let mut j = 0;
        for &(mut s, e) in &self.spans {
            while j < other.spans.len() && other.spans[j].1 <= s {
                j += 1;
            }
            let mut k = j;
            while k < other.spans.len() && other.spans[k].0 < e {
                let (os, oe) = other.spans[k];
                if os > s {
                    out.push((s, os));
                }
                s = s.max(oe);
                k += 1;
            }
            if s < e {
                out.push((s, e));
            }
        }
        Self::from_disjoint(out)
    }

    /// Covered length inside `[a, b]`.
    #[must_use]
    pub fn within(&self, a: f64, b: f64) -> f64 {
        if b <= a || self.spans.is_empty() {
            return 0.0;
        }
        self.covered_before(b) - self.covered_before(a)
    }

    /// Covered length before `t`.
    fn covered_before(&self, t: f64) -> f64 {
        let i = self.spans.partition_point(|s| s.0 < t);
        if i == 0 {
            return 0.0;
        }
        let (s, e) = self.spans[i - 1];
        self.prefix[i - 1] + (t.min(e) - s)
    }
}

/// Labelled spans, per thread (steps use one thread-less list).
#[derive(Debug, Clone, Default)]
pub struct Ranges {
    by_thread: FxHashMap<u32, Vec<(f64, f64, i64)>>,
}

impl Ranges {
    /// `ProfilerStep#N` spans `(N, start, end)`, any thread.
    #[must_use]
    pub fn steps(steps: &[(i64, f64, f64)]) -> Self {
        let spans = steps.iter().map(|&(n, s, e)| (s, e, n)).collect();
        Self::outermost_of(u32::MAX, spans)
    }

    /// Per thread, the spans not inside another, from `(thread, label,
    /// start, end)`.
    #[must_use]
    pub fn outermost(ranges: &[(u32, u32, f64, f64)]) -> Self {
        let mut grouped: FxHashMap<u32, Vec<(f64, f64, i64)>> = FxHashMap::default();
        for &(t, label, s, e) in ranges {
            grouped.entry(t).or_default().push((s, e, i64::from(label)));
        }
        let mut out = Self::default();
        for (t, spans) in grouped {
            out.by_thread.extend(Self::outermost_of(t, spans).by_thread);
        }
        out
    }

    fn outermost_of(thread: u32, mut spans: Vec<(f64, f64, i64)>) -> Self {
        spans.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
        let mut kept: Vec<(f64, f64, i64)> = Vec::with_capacity(spans.len());
        for span in spans {
            match kept.last() {
                Some(last) if span.0 < last.1 => {}
                _ => kept.push(span),
            }
        }
        let mut by_thread = FxHashMap::default();
        by_thread.insert(thread, kept);
        Self { by_thread }
    }

    /// The step at `t`, −1 when none.
    #[must_use]
    pub fn step_at(&self, t: f64) -> i64 {
        self.label_at(u32::MAX, t)
    }

    /// The outermost label on `thread` at `t`, −1 when none.
    #[must_use]
    pub fn phase_at(&self, thread: u32, t: f64) -> i64 {
        self.label_at(thread, t)
    }

    fn label_at(&self, thread: u32, t: f64) -> i64 {
        let Some(spans) = self.by_thread.get(&thread) else {
            return -1;
        };
        let i = spans.partition_point(|s| s.0 <= t);
        if i == 0 {
            return -1;
        }
        let (_, e, label) = spans[i - 1];
        if t <= e { label } else { -1 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covered_lengths() {
        let i = Intervals::union(vec![(0.0, 2.0), (1.0, 3.0), (5.0, 6.0), (7.0, 7.0)]);
        assert_eq!(i.within(0.0, 10.0), 4.0);
        assert_eq!(i.within(2.5, 5.5), 1.0);
        assert_eq!(i.within(3.0, 5.0), 0.0);
        let cut = i.subtract(&Intervals::union(vec![(1.0, 1.5), (5.5, 9.0)]));
        assert_eq!(cut.within(0.0, 10.0), 3.0);
    }

    #[test]
    fn labels() {
        let steps = Ranges::steps(&[(3, 10.0, 20.0), (4, 20.0, 30.0)]);
        assert_eq!(steps.step_at(15.0), 3);
        assert_eq!(steps.step_at(25.0), 4);
        assert_eq!(steps.step_at(35.0), -1);
        let phases = Ranges::outermost(&[(1, 0, 0.0, 10.0), (1, 1, 2.0, 3.0), (2, 1, 0.0, 1.0)]);
        assert_eq!(phases.phase_at(1, 2.5), 0);
        assert_eq!(phases.phase_at(2, 0.5), 1);
        assert_eq!(phases.phase_at(3, 0.5), -1);
    }
}
