//! Noise calibration: how much a statistic drifts between repeated runs of
//! one configuration (A/A), and the threshold and smallest detectable
//! regression that follow.
//!
//! * Split-half drift: the runs (in the order they were made) split into
//!   their first and second halves, and into alternate runs; the larger
//!   difference of the halves' means, in percent of the overall mean and in
//!   the statistic's unit.
//! * Leave-one-out drift: the largest difference between one run and the
//!   mean of the others.
//! * The threshold is `multiple ×` the worse of the two, never below the
//!   floors (1.5×, 1% and 1 µs by default, as Meta's monarch gate sets
//!   them).
//! * The smallest detectable regression at `n` runs per side and
//!   confidence `c`: a true change `d` fails when its interval's near end
//!   clears the threshold `t`, i.e. `d − z·s·√(2/n) > t`, with `s` the
//!   runs' standard deviation and `z` the normal quantile of `(1 + c)/2`;
//!   so `d = t + z·s·√(2/n)`, reported in percent of the mean.

/// A statistic's run-to-run noise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Noise {
    /// Runs measured.
    pub runs: usize,
    /// Mean over runs.
    pub mean: f64,
    /// Sample standard deviation over runs (0 for one run).
    pub sd: f64,
    /// Split-half drift, the statistic's unit.
    pub split_half: f64,
    /// Leave-one-out drift, the statistic's unit.
    pub leave_one_out: f64,
}

impl Noise {
    /// The worse drift, in the statistic's unit.
    #[must_use]
    pub fn drift(&self) -> f64 {
        self.split_half.max(self.leave_one_out)
    }

    /// The worse drift in percent of the mean (`None` for a zero mean).
    #[must_use]
    pub fn drift_pct(&self) -> Option<f64> {
        (self.mean != 0.0).then(|| self.drift() / self.mean.abs() * 100.0)
    }
}

/// How thresholds follow from noise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoisePolicy {
    /// Threshold = multiple × drift.
    pub multiple: f64,
    /// Lowest percent threshold.
    pub floor_pct: f64,
    /// Lowest absolute threshold (the statistic's unit).
    pub floor_absolute: f64,
}

impl Default for NoisePolicy {
    fn default() -> Self {
        Self {
            multiple: 1.5,
            floor_pct: 1.0,
            floor_absolute: 1.0,
        }
    }
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// The noise of a statistic over runs in the order they were made.
#[must_use]
pub fn noise(values: &[f64]) -> Noise {
    let n = values.len();
    let m = mean(values);
    let sd = if n > 1 {
        (values.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    let split_half = if n >= 2 {
        let (first, second) = values.split_at(n / 2);
        let even: Vec<f64> = values.iter().step_by(2).copied().collect();
        let odd: Vec<f64> = values.iter().skip(1).step_by(2).copied().collect();
        (mean(first) - mean(second))
            .abs()
            .max((mean(&even) - mean(&odd)).abs())
    } else {
        0.0
    };
    let total: f64 = values.iter().sum();
    let leave_one_out = if n >= 2 {
        values
            .iter()
            .map(|v| (v - (total - v) / (n - 1) as f64).abs())
            .fold(0.0, f64::max)
    } else {
        0.0
    };
    Noise {
        runs: n,
        mean: m,
        sd,
        split_half,
        leave_one_out,
    }
}

/// The `(percent, absolute)` threshold a statistic with `noise` gets.
#[must_use]
pub fn threshold_for(noise: &Noise, policy: &NoisePolicy) -> (f64, f64) {
    let pct = noise.drift_pct().unwrap_or(0.0) * policy.multiple;
    let absolute = noise.drift() * policy.multiple;
    (
        pct.max(policy.floor_pct),
        absolute.max(policy.floor_absolute),
    )
}

/// The smallest regression (percent of the mean) a gate with threshold
/// `threshold_pct`, `runs` per side and `confidence` fails at this noise;
/// `None` for a zero mean.
#[must_use]
pub fn detectable_regression(
    noise: &Noise,
    threshold_pct: f64,
    runs: usize,
    confidence: f64,
) -> Option<f64> {
    if noise.mean == 0.0 || runs == 0 {
        return None;
    }
    let z = normal_quantile(f64::midpoint(1.0, confidence));
    let spread = z * noise.sd * (2.0 / runs as f64).sqrt() / noise.mean.abs() * 100.0;
    Some(threshold_pct + spread)
}

/// The standard normal quantile of `p` in (0, 1): Acklam's rational
/// approximation (relative error below 1.2e-9).
#[must_use]
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_and_thresholds() {
        let n = noise(&[100.0, 102.0, 98.0, 104.0, 96.0, 100.0]);
        assert_eq!(n.mean, 100.0);
        // Halves: 100 against 100; alternate runs: 98 against 102.
        assert_eq!(n.split_half, 4.0);
        assert!((n.leave_one_out - 4.8).abs() < 1e-9, "{n:?}");
        let (pct, abs) = threshold_for(&n, &NoisePolicy::default());
        assert!((pct - 7.2).abs() < 1e-9 && (abs - 7.2).abs() < 1e-9);
        // Identical runs: the floors.
        let flat = noise(&[5.0; 4]);
        assert_eq!(threshold_for(&flat, &NoisePolicy::default()), (1.0, 1.0));
        assert_eq!(detectable_regression(&flat, 1.0, 5, 0.95), Some(1.0));
    }

    #[test]
    fn the_normal_quantile() {
        assert!((normal_quantile(0.975) - 1.959_963_985).abs() < 1e-8);
        assert!((normal_quantile(0.5)).abs() < 1e-12);
        assert!((normal_quantile(0.005) + 2.575_829_304).abs() < 1e-8);
    }
}
