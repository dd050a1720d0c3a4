//! The cost terms and the noise of `deterministic-scheduler-v4`.
//!
//! One occurrence's collective latency is the noise-free [`base_latency_us`]
//! plus [`noise_us`], floored at 0.5 µs:
//!
//! ```text
//! base  = F + 1.15·log2(max(2, n)) + 4 + (8·bytes / (1000·B))·op_factor·(1 + 0.22·(g−1))·(1 + 0.18·p)
//! noise = −0.45 + 1.35·u0                       (jitter)
//!       + [u1 ≤ p_tail] · −ln(1 − u2)·(3.5 + 8·p + 0.08·skew)   (rare tail window)
//! p_tail = min(0.35, 0.015 + skew/180 + 0.035·p + 0.04·(g−1))
//! ```
//!
//! The uniforms `u0, u1, u2` come from SplitMix64 over the seed, the
//! iteration and the occurrence's identity hash ([`uniforms`]). The
//! expressions are evaluated in exactly this order: reports are byte-exact.
//! An op a calibrated backend pipelines ([`Settings::pipelined_ops`]) costs
//! `1.15·log2(max(2, n)) + 4 + max(F·steps, transfer)` instead: on a host
//! where each step waits on a peer being scheduled, the chunk's copy runs
//! inside that wait.

use super::Settings;
use crate::trace::Signature;

/// The algorithm factor of an operation over `n` ranks (ring all-reduce
/// moves `2(n−1)/n` of the buffer, ...).
#[must_use]
pub fn op_factor(sig: &Signature, n: f64) -> f64 {
    match sig.op.as_slice() {
        b"all_reduce" => 2.0 * (n - 1.0) / n,
        b"reduce_scatter" | b"all_gather" => (n - 1.0) / n,
        b"all_to_all" => 1.6,
        b"broadcast" => 0.8,
        _ => 1.0,
    }
}

/// The steps of an operation's algorithm over `n` ranks, each paying the
/// latency floor once under [`Settings::floor_per_step`] (the α term of
/// the α–β cost): a ring all_reduce `2(n−1)` (reduce-scatter, then
/// all-gather), a ring all_gather, reduce_scatter or all_to_all `n−1`, a
/// tree broadcast, reduce, gather or scatter `⌈log2 n⌉`, a transfer 1.
#[must_use]
pub fn algorithm_steps(op: &[u8], n: f64) -> f64 {
    let n = n.max(2.0);
    match op {
        b"all_reduce" => 2.0 * (n - 1.0),
        b"reduce_scatter" | b"all_gather" | b"all_to_all" => n - 1.0,
        b"broadcast" | b"reduce" | b"gather" | b"scatter" => n.log2().ceil(),
        _ => 1.0,
    }
}

/// Pressure the model applies: the backend's `compute_pressure` scaled by the
/// record's pressure relative to the reference 0.55, clamped to `[0, 1.5]`.
#[inline]
#[must_use]
pub fn effective_pressure(backend_pressure: f64, record_pressure: f64) -> f64 {
    (backend_pressure * record_pressure / 0.55).clamp(0.0, 1.5)
}

/// Communicators sharing the links besides this one, `max(0, g − 1)`.
#[inline]
#[must_use]
pub fn other_groups(sig: &Signature) -> f64 {
    (sig.concurrent_groups - 1).max(0) as f64
}

/// [`other_groups`], or 0 when the settings serialize communicators or
/// make them independent ([`Settings::independent_groups`]).
#[inline]
#[must_use]
pub fn other_groups_under(sig: &Signature, settings: &Settings) -> f64 {
    if settings.serialize_groups || settings.independent_groups {
        0.0
    } else {
        other_groups(sig)
    }
}

/// The noise-free collective latency of one occurrence of `sig`, µs.
#[inline]
#[must_use]
pub fn base_latency_us(sig: &Signature, settings: &Settings, pressure: f64) -> f64 {
    base_terms(sig, settings, pressure).latency(1.0)
}

/// An occurrence's noise-free cost in its terms, µs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BaseTerms {
    /// The start-up: the floors and the per-rank term `1.15·log2(n) + 4`,
    /// summed in the spec's order (not `floors + per_rank`: byte-exact).
    pub startup: f64,
    /// The floors alone (the α term, once per step under
    /// [`Settings::floor_per_step`]).
    pub floors: f64,
    /// The per-rank term alone.
    pub per_rank: f64,
    /// The transfer (the bandwidth term).
    pub transfer: f64,
    /// Its op's steps are pipelined ([`Settings::pipelined_ops`]).
    pub pipelined: bool,
}

impl BaseTerms {
    /// The latency with the transfer term times `factor` (the rate
    /// spread's, 1 without it): `startup + transfer·factor`, or for a
    /// pipelined op `per_rank + max(floors, transfer·factor)`, each step
    /// taking the longer of its hand-off and its chunk's transfer.
    #[inline]
    #[must_use]
    pub fn latency(&self, factor: f64) -> f64 {
        match self.pipelined {
            true => self.per_rank + self.floors.max(self.transfer * factor),
            // At factor 1 the second term is +0.0: exactly the sum.
            false => (self.startup + self.transfer) + self.transfer * (factor - 1.0),
        }
    }
}

/// Whether `sig`'s op is pipelined: named in [`Settings::pipelined_ops`],
/// or for a `send` or `recv`, `point_to_point` is.
#[must_use]
pub fn pipelined(settings: &Settings, sig: &Signature) -> bool {
    let named = |op: &[u8]| (settings.pipelined_ops.iter()).any(|o| o.as_bytes() == op);
    named(&sig.op) || matches!(sig.op.as_slice(), b"send" | b"recv") && named(b"point_to_point")
}

/// [`base_latency_us`] in its terms ([`BaseTerms`]).
#[inline]
#[must_use]
pub fn base_terms(sig: &Signature, settings: &Settings, pressure: f64) -> BaseTerms {
    let nf = sig.rank_count() as f64;
    let log_ranks = nf.max(2.0).log2();
    let (floor, bandwidth) = op_override(settings, sig)
        .map_or((settings.latency_floor_us, settings.bandwidth_gbps), |o| {
            (o.latency_floor_us, o.bandwidth_gbps)
        });
    let transfer = (sig.bytes as f64 * settings.bytes_scale * 8.0) / (bandwidth * 1000.0);
    let contention = 1.0 + 0.22 * other_groups_under(sig, settings);
    let penalty = 1.0 + 0.18 * pressure;
    let floor = match settings.floor_per_step {
        true => floor * algorithm_steps(&sig.op, nf),
        false => floor,
    };
    BaseTerms {
        startup: floor + 1.15 * log_ranks + 4.0,
        floors: floor,
        per_rank: 1.15 * log_ranks + 4.0,
        transfer: transfer * op_factor(sig, nf) * contention * penalty,
        pipelined: pipelined(settings, sig),
    }
}

/// The counter lane of an occurrence's transfer-rate draw: past every lane
/// [`stall_us`] can use (one per algorithm step, at most 1e6 steps).
const RATE_LANE: u64 = 1 << 32;

/// The factor on an occurrence's transfer term (see
/// [`Settings::rate_spread`]): `exp(σ·z)`, `z` standard normal by
/// Box–Muller from lanes `RATE_LANE` and `RATE_LANE + 1` of its counter;
/// exactly 1 without a spread. Its median is 1 and its mean `exp(σ²/2)`.
#[must_use]
pub fn rate_factor(settings: &Settings, iteration: u32, identity_hash: u64) -> f64 {
    let sigma = settings.rate_spread;
    if sigma == 0.0 {
        return 1.0;
    }
    let [u, v] = lanes::<2>(settings.seed, iteration, identity_hash, RATE_LANE);
    let radius = (-2.0 * (1.0 - u).max(1e-15).ln()).sqrt();
    (sigma * radius * (std::f64::consts::TAU * v).cos()).exp()
}

/// How much a host of `host_cpus` cores stretches a latency while `busy`
/// ranks run on it (processor sharing): `max(1, busy / host_cpus)`. Ranks
/// waiting for a collective's peers or sleeping through a gap use no core,
/// so `busy` counts only the ranks inside a running occurrence.
#[must_use]
pub fn host_stretch(busy: usize, host_cpus: f64) -> f64 {
    (busy as f64 / host_cpus).max(1.0)
}

/// The calibrated override of `sig`'s op: its own, or for a `send` or
/// `recv` without one, that of `point_to_point` (the same transfer, named by
/// one side; the Kineto importer names both sides `point_to_point`).
fn op_override<'a>(settings: &'a Settings, sig: &Signature) -> Option<&'a super::OpOverride> {
    let find = |op: &[u8]| (settings.op_overrides.iter()).find(|o| o.op.as_bytes() == op);
    find(&sig.op).or_else(|| match sig.op.as_slice() {
        b"send" | b"recv" => find(b"point_to_point"),
        _ => None,
    })
}

/// A host stall of an occurrence (see [`Settings::stall_probability`]),
/// `steps` the steps of its algorithm ([`stall_steps`]). Each step stalls
/// with the probability and each stall is exponential with the mean, so
/// the occurrence stalls with `1 − (1 − q)^steps` and its delay is the sum
/// of its stalls. Lane 3 of its counter decides whether any step stalls,
/// lane 4 draws the first stall (one step: `−ln(1 − u4)·mean` when
/// `u3 < q`), lane 5 how many more, lanes 6 and up their delays.
#[must_use]
pub fn stall_us(settings: &Settings, iteration: u32, identity_hash: u64, steps: u32) -> f64 {
    let q = settings.stall_probability;
    let steps = steps.max(1);
    let [u3, u4, u5] = lanes::<3>(settings.seed, iteration, identity_hash, 3);
    let any = 1.0 - (1.0 - q).powi(steps as i32);
    if u3 >= any {
        return 0.0;
    }
    let exp = |u: f64| -(1.0 - u).max(1e-15).ln() * settings.stall_mean_us;
    let mut total = exp(u4);
    for lane in 0..stalls_beyond_one(q, steps, u5 * any) {
        let [u] = lanes::<1>(settings.seed, iteration, identity_hash, 6 + u64::from(lane));
        total += exp(u);
    }
    total
}

/// How many stalls beyond the first, of `steps` steps each stalling with
/// `q`, by inversion of the binomial: `target` is a uniform times
/// `P(at least one)`, and the count is the first `m ≥ 1` whose
/// `P(1 ≤ stalls ≤ m)` reaches it, minus one.
fn stalls_beyond_one(q: f64, steps: u32, target: f64) -> u32 {
    if steps == 1 || q <= 0.0 {
        return 0;
    }
    let ratio = q / (1.0 - q).max(1e-15);
    // P(exactly 1) = steps·q·(1 − q)^(steps − 1).
    let mut pmf = f64::from(steps) * q * (1.0 - q).powi(steps as i32 - 1);
    let mut cumulative = pmf;
    let mut m = 1u32;
    while cumulative < target && m < steps {
        pmf *= f64::from(steps - m) / f64::from(m + 1) * ratio;
        cumulative += pmf;
        m += 1;
    }
    m - 1
}

/// The steps over which an occurrence of `sig` can stall: its algorithm's
/// ([`algorithm_steps`]) when the floor is paid per step (each step hands
/// off to a peer that may be descheduled), else one.
#[must_use]
pub fn stall_steps(sig: &Signature, settings: &Settings) -> u32 {
    match settings.floor_per_step {
        true => algorithm_steps(&sig.op, sig.rank_count() as f64)
            .round()
            .clamp(1.0, 1e6) as u32,
        false => 1,
    }
}

/// The noise of one occurrence from its three uniforms; `no_tail` is the
/// `rare_tail_windows` ablation.
#[inline]
#[must_use]
pub fn noise_us(u: [f64; 3], skew: f64, pressure: f64, other_groups: f64, no_tail: bool) -> f64 {
    let [u0, u1, u2] = u;
    let p_tail = (0.015 + skew / 180.0 + 0.035 * pressure + 0.04 * other_groups).min(0.35);
    let jitter = -0.45 + 1.35 * u0;
    if no_tail || u1 > p_tail {
        jitter
    } else {
        jitter + (-(1.0 - u2).max(1e-15).ln()) * (3.5 + 8.0 * pressure + 0.08 * skew)
    }
}

fn splitmix64(mut v: u64) -> u64 {
    v = v.wrapping_add(0x9E37_79B9_7F4A_7C15);
    v = (v ^ (v >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    v = (v ^ (v >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    v ^ (v >> 31)
}

/// The three deterministic uniforms of an occurrence.
#[must_use]
pub fn uniforms(seed: i64, iteration: u32, identity_hash: u64) -> [f64; 3] {
    lanes::<3>(seed, iteration, identity_hash, 0)
}

/// `N` deterministic uniforms of an occurrence's counter, lanes `first..`.
fn lanes<const N: usize>(seed: i64, iteration: u32, identity_hash: u64, first: u64) -> [f64; N] {
    let ctr = (seed as u64)
        ^ u64::from(iteration + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93)
        ^ identity_hash;
    let mut out = [0.0; N];
    for (lane, u) in (first..).zip(out.iter_mut()) {
        let x = splitmix64(ctr ^ lane.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        *u = (x >> 11) as f64 / (1u64 << 53) as f64;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_follow_their_probability_and_mean_and_none_is_the_spec() {
        let none = Settings::default();
        assert!((0..1000u64).all(|h| stall_us(&none, 0, h, 6) == 0.0));
        let settings = Settings {
            stall_probability: 0.25,
            stall_mean_us: 100.0,
            ..none
        };
        let draws: Vec<f64> = (0..20_000u64)
            .map(|h| stall_us(&settings, 1, h * 7919, 1))
            .collect();
        let stalled: Vec<f64> = draws.iter().copied().filter(|d| *d > 0.0).collect();
        let share = stalled.len() as f64 / draws.len() as f64;
        let mean = stalled.iter().sum::<f64>() / stalled.len() as f64;
        assert!((share - 0.25).abs() < 0.02, "{share}");
        assert!((mean - 100.0).abs() < 8.0, "{mean}");
        assert_eq!(stall_us(&settings, 1, 42, 1), stall_us(&settings, 1, 42, 1));
    }

    #[test]
    fn the_rate_factor_is_lognormal_with_median_one_and_none_is_the_spec() {
        let none = Settings::default();
        assert!((0..1000u64).all(|h| rate_factor(&none, 0, h) == 1.0));
        let settings = Settings {
            rate_spread: 0.25,
            ..none
        };
        let n = 40_000u64;
        let mut logs: Vec<f64> = (0..n)
            .map(|h| rate_factor(&settings, 3, h * 7919).ln())
            .collect();
        logs.sort_by(f64::total_cmp);
        let median = logs[logs.len() / 2];
        let mean = logs.iter().sum::<f64>() / n as f64;
        let sd = (logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        assert!(median.abs() < 0.01, "{median}");
        assert!((sd - 0.25).abs() < 0.005, "{sd}");
        assert_eq!(rate_factor(&settings, 3, 42), rate_factor(&settings, 3, 42));
        // Its own lanes: the stall draws of the same occurrence are untouched.
        let stalled = Settings {
            stall_probability: 0.2,
            stall_mean_us: 50.0,
            ..settings.clone()
        };
        let plain = Settings {
            rate_spread: 0.0,
            ..stalled.clone()
        };
        assert!((0..200u64).all(|h| stall_us(&stalled, 1, h, 6) == stall_us(&plain, 1, h, 6)));
    }

    #[test]
    fn each_step_stalls_with_the_probability_and_the_stalls_add_up() {
        let settings = Settings {
            stall_probability: 0.1,
            stall_mean_us: 100.0,
            ..Settings::default()
        };
        let n = 40_000u64;
        let draws: Vec<f64> = (0..n)
            .map(|h| stall_us(&settings, 2, h * 7919, 6))
            .collect();
        let share = draws.iter().filter(|d| **d > 0.0).count() as f64 / n as f64;
        let mean = draws.iter().sum::<f64>() / n as f64;
        // P(any of 6) = 1 - 0.9^6 = 0.4686; the mean delay 6 * 0.1 * 100.
        assert!((share - 0.4686).abs() < 0.015, "{share}");
        assert!((mean - 60.0).abs() < 3.0, "{mean}");
        // A stall over one step is the first draw alone, as before steps.
        let one: Vec<f64> = (0..n)
            .map(|h| stall_us(&settings, 2, h * 7919, 1))
            .collect();
        let one_share = one.iter().filter(|d| **d > 0.0).count() as f64 / n as f64;
        assert!((one_share - 0.1).abs() < 0.01, "{one_share}");
    }

    #[test]
    fn the_binomial_inversion_counts_every_step_at_most() {
        assert_eq!(stalls_beyond_one(0.3, 1, 0.99), 0);
        assert_eq!(stalls_beyond_one(0.99, 4, 1.0), 3);
        assert_eq!(stalls_beyond_one(0.1, 6, 0.0), 0);
    }

    #[test]
    fn a_host_with_fewer_cores_than_busy_ranks_stretches_by_their_ratio() {
        assert_eq!(host_stretch(8, 2.0), 4.0);
        assert_eq!(host_stretch(3, 2.0), 1.5);
        assert_eq!(host_stretch(2, 2.0), 1.0);
        assert_eq!(host_stretch(1, 64.0), 1.0);
    }

    #[test]
    fn a_point_to_point_override_prices_both_sides_of_a_transfer() {
        let settings = Settings {
            op_overrides: vec![super::super::OpOverride {
                op: "point_to_point".to_owned(),
                latency_floor_us: 1000.0,
                bandwidth_gbps: 1.0,
            }],
            ..Settings::default()
        };
        let mut sig = Signature {
            op: b"send".to_vec(),
            ranks: vec![0, 1],
            bytes: 1000,
            ..Signature::default()
        };
        let send = base_latency_us(&sig, &settings, 0.0);
        sig.op = b"all_reduce".to_vec();
        let other = base_latency_us(&sig, &settings, 0.0);
        assert!(send > 1000.0 && other < 20.0, "{send} {other}");
    }

    #[test]
    fn a_floor_per_step_is_paid_once_per_algorithm_step() {
        let per_step = Settings {
            latency_floor_us: 100.0,
            floor_per_step: true,
            ..Settings::default()
        };
        let once = Settings {
            floor_per_step: false,
            ..per_step.clone()
        };
        let sig = |op: &[u8], n: i64| Signature {
            op: op.to_vec(),
            ranks: (0..n).collect(),
            bytes: 0,
            ..Signature::default()
        };
        let extra =
            |s: &Signature| base_latency_us(s, &per_step, 0.0) - base_latency_us(s, &once, 0.0);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(extra(&sig(b"all_reduce", 4)), 500.0)); // 6 steps
        assert!(close(extra(&sig(b"all_gather", 4)), 200.0)); // 3 steps
        assert!(close(extra(&sig(b"all_gather", 2)), 0.0)); // 1 step
        assert!(close(extra(&sig(b"broadcast", 5)), 200.0)); // ceil(log2 5) = 3
        assert!(close(extra(&sig(b"send", 2)), 0.0));
    }

    #[test]
    fn a_pipelined_op_pays_the_longer_of_its_floors_and_its_transfer() {
        let sig = |op: &[u8], bytes: i64| Signature {
            op: op.to_vec(),
            ranks: (0..4).collect(),
            bytes,
            ..Signature::default()
        };
        let summed = Settings {
            latency_floor_us: 100.0,
            bandwidth_gbps: 8.0,
            floor_per_step: true,
            ..Settings::default()
        };
        let piped = Settings {
            pipelined_ops: vec!["all_reduce".to_owned(), "point_to_point".to_owned()],
            ..summed.clone()
        };
        let per_rank = 1.15 * 2.0 + 4.0;
        // 6 steps of 100 µs; 1000 bytes · 1.5 at 8 Gbit/s is 1.5 µs: floors win.
        let small = base_terms(&sig(b"all_reduce", 1000), &piped, 0.0);
        assert!((small.latency(1.0) - (per_rank + 600.0)).abs() < 1e-9);
        // 8 MB · 1.5 at 8 Gbit/s is 12000 µs: the transfer wins, floors hidden.
        let big = base_terms(&sig(b"all_reduce", 8_000_000), &piped, 0.0);
        assert!((big.latency(1.0) - (per_rank + 12_000.0)).abs() < 1e-6);
        assert!((big.latency(0.5) - (per_rank + 6_000.0)).abs() < 1e-6);
        let sum = base_terms(&sig(b"all_reduce", 8_000_000), &summed, 0.0);
        assert!((sum.latency(1.0) - (per_rank + 12_600.0)).abs() < 1e-6);
        // Other ops keep the sum; a send follows point_to_point.
        let gather = sig(b"all_gather", 1000);
        assert_eq!(
            base_latency_us(&gather, &piped, 0.0),
            base_latency_us(&gather, &summed, 0.0)
        );
        assert!(pipelined(&piped, &sig(b"send", 10)));
        assert!(!pipelined(&summed, &sig(b"send", 10)));
    }

    #[test]
    fn uniforms_are_in_the_unit_interval_and_deterministic() {
        let a = uniforms(7, 0, 0xDEAD_BEEF);
        assert_eq!(a, uniforms(7, 0, 0xDEAD_BEEF));
        assert_ne!(a, uniforms(7, 1, 0xDEAD_BEEF));
        assert!(a.iter().all(|u| (0.0..1.0).contains(u)));
    }

    #[test]
    fn noise_without_tail_is_the_jitter() {
        assert_eq!(noise_us([0.0, 0.0, 0.5], 0.0, 0.0, 0.0, true), -0.45);
        // u1 = 0 is always inside the tail window unless it is ablated.
        assert!(noise_us([0.0, 0.0, 0.5], 0.0, 0.0, 0.0, false) > -0.45);
    }

    #[test]
    fn pressure_is_clamped() {
        assert_eq!(effective_pressure(10.0, 1.0), 1.5);
        assert_eq!(effective_pressure(0.55, 0.55), 0.55);
    }
}
