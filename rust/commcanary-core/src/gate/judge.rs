//! The verdict of one statistic from its change interval.
//!
//! A change is *beyond* a threshold when it exceeds both its absolute part
//! and its percent part (the absolute floor keeps fast operations from
//! turning noise into red builds; with a zero baseline any increase past the
//! absolute part counts). The one-run gate fails a point beyond the
//! threshold and warns a point beyond half of it; with an interval:
//! * `fail` — the interval's near end is beyond the threshold;
//! * `pass` — its far end is not, and the estimate is not beyond half;
//! * `warn` — its far end is not, and the estimate is beyond half;
//! * `inconclusive` — it straddles the threshold: the runs cannot tell a
//!   regression from noise.
//!
//! For a statistic where lower is worse (the hidden share of communication)
//! the change is turned into a drop first.

use super::interval::Change;

/// Which way a statistic gets worse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Higher is worse (latencies).
    Increase,
    /// Lower is worse (the hidden share); thresholds are on the drop.
    Decrease,
}

/// A statistic's fail threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Percent of the baseline the change must exceed (`None`: none).
    pub percent: Option<f64>,
    /// The statistic's unit the change must exceed.
    pub absolute: f64,
}

/// A statistic's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Within the threshold, estimate within half of it.
    Pass,
    /// Within the threshold, estimate beyond half of it.
    Warn,
    /// The interval straddles the threshold.
    Inconclusive,
    /// Wholly beyond the threshold.
    Fail,
}

impl Verdict {
    /// The name documents use.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Warn => "warn",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Fail => "fail",
        }
    }
}

impl Thresholds {
    /// Whether a change of `absolute` (and `percent` of the baseline, `None`
    /// for a zero baseline) is beyond `fraction` of this threshold.
    #[must_use]
    pub fn exceeded(&self, absolute: f64, percent: Option<f64>, fraction: f64) -> bool {
        if absolute <= self.absolute * fraction {
            return false;
        }
        match (self.percent, percent) {
            (None, _) => true,
            (Some(_), None) => absolute > 0.0,
            (Some(t), Some(p)) => p > t * fraction,
        }
    }
}

/// The verdict of `change` against `thresholds`.
#[must_use]
pub fn judge(change: &Change, thresholds: &Thresholds, direction: Direction) -> Verdict {
    // (near, estimate, far) ends of the worsening, absolute and percent.
    let flip = |v: Option<f64>| v.map(|x| -x);
    let (near, est, far) = match direction {
        Direction::Increase => (
            (change.low, change.low_pct),
            (change.estimate, change.estimate_pct),
            (change.high, change.high_pct),
        ),
        Direction::Decrease => (
            (-change.high, flip(change.high_pct)),
            (-change.estimate, flip(change.estimate_pct)),
            (-change.low, flip(change.low_pct)),
        ),
    };
    if thresholds.exceeded(near.0, near.1, 1.0) {
        Verdict::Fail
    } else if thresholds.exceeded(far.0, far.1, 1.0) {
        Verdict::Inconclusive
    } else if thresholds.exceeded(est.0, est.1, 0.5) {
        Verdict::Warn
    } else {
        Verdict::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(low: f64, estimate: f64, high: f64) -> Change {
        let pct = |x: f64| Some(x);
        Change {
            baseline: 100.0,
            candidate: 100.0 + estimate,
            estimate,
            low,
            high,
            estimate_pct: pct(estimate),
            low_pct: pct(low),
            high_pct: pct(high),
        }
    }

    const T: Thresholds = Thresholds {
        percent: Some(10.0),
        absolute: 1.0,
    };

    #[test]
    fn the_interval_decides() {
        use Direction::Increase;
        assert_eq!(
            judge(&change(12.0, 15.0, 18.0), &T, Increase),
            Verdict::Fail
        );
        assert_eq!(
            judge(&change(5.0, 11.0, 18.0), &T, Increase),
            Verdict::Inconclusive
        );
        assert_eq!(judge(&change(4.0, 6.0, 9.0), &T, Increase), Verdict::Warn);
        assert_eq!(judge(&change(-3.0, 1.0, 4.0), &T, Increase), Verdict::Pass);
        // Faster is never a regression.
        assert_eq!(
            judge(&change(-30.0, -20.0, -12.0), &T, Increase),
            Verdict::Pass
        );
    }

    #[test]
    fn a_point_is_judged_as_the_one_run_gate_judges_it() {
        use Direction::Increase;
        assert_eq!(
            judge(&change(10.5, 10.5, 10.5), &T, Increase),
            Verdict::Fail
        );
        assert_eq!(
            judge(&change(10.0, 10.0, 10.0), &T, Increase),
            Verdict::Warn
        );
        assert_eq!(judge(&change(5.0, 5.0, 5.0), &T, Increase), Verdict::Pass);
        // Both parts must be exceeded: 50% of a 1 µs baseline is 0.5 µs.
        let tiny = Change {
            baseline: 1.0,
            candidate: 1.5,
            estimate: 0.5,
            low: 0.5,
            high: 0.5,
            estimate_pct: Some(50.0),
            low_pct: Some(50.0),
            high_pct: Some(50.0),
        };
        assert_eq!(judge(&tiny, &T, Increase), Verdict::Pass);
    }

    #[test]
    fn a_drop_is_judged_on_its_points() {
        let hidden = Thresholds {
            percent: None,
            absolute: 5.0,
        };
        let mut c = change(-9.0, -7.0, -6.0);
        c.low_pct = None;
        c.estimate_pct = None;
        c.high_pct = None;
        assert_eq!(judge(&c, &hidden, Direction::Decrease), Verdict::Fail);
        assert_eq!(
            judge(&change(-6.0, -3.0, 1.0), &hidden, Direction::Decrease),
            Verdict::Inconclusive
        );
        assert_eq!(
            judge(&change(1.0, 3.0, 6.0), &hidden, Direction::Decrease),
            Verdict::Pass
        );
    }
}
