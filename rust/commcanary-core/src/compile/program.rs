//! Builds the canary program from ordered samples: the signature groups and
//! their limits, each group's ladder records turned into program records and
//! points, and the fidelity accounting over them (per-field maxima, the exact
//! total-gap check, `lossless_timing` and the error budgets).

use rustc_hash::FxHashMap;

use super::ladder::compress_group;
use super::record::GroupRecord;
use super::samples::Samples;
use super::{CompileOptions, Fidelity, budget_error};
use crate::canary::{Bounded, Leaf, Point, Program, Record};
use crate::error::{Error, Result};
use crate::pyfloat::{self, py_sum, round};
use crate::trace::Trace;

/// Adjacent samples with equal signatures, and the limit each group gets.
pub(super) struct Groups {
    /// `(trace signature, first sample, sample count)` of each group.
    pub spans: Vec<(u32, usize, usize)>,
    /// Timing sample limit of each group.
    pub limits: Vec<usize>,
    /// The per-group overrides applied, sorted and unique.
    pub overrides: Vec<(usize, usize)>,
}

/// Groups adjacent equal signatures and applies the per-group limits.
///
/// # Errors
/// An override naming an unknown group or a limit outside `2..=limit`.
pub(super) fn signature_groups(samples: &Samples, options: &CompileOptions) -> Result<Groups> {
    let limit = options.timing_sample_limit;
    let mut spans: Vec<(u32, usize, usize)> = Vec::new();
    for (k, &sig) in samples.signature.iter().enumerate() {
        match spans.last_mut() {
            Some((s, _, len)) if *s == sig => *len += 1,
            _ => spans.push((sig, k, 1)),
        }
    }
    let mut limits = vec![limit; spans.len()];
    let mut overrides = options.timing_sample_limits_by_group.clone();
    overrides.sort_unstable();
    overrides.dedup();
    for &(g, l) in &overrides {
        if g >= spans.len() {
            return Err(Error::invalid(format!(
                "timing_sample_limits_by_group names unknown group {g} (the trace has {} groups)",
                spans.len()
            )));
        }
        if l < 2 || l > limit {
            return Err(Error::invalid(format!(
                "timing_sample_limits_by_group[{g}]={l} must be between 2 and timing_sample_limit={limit}"
            )));
        }
        limits[g] = l;
    }
    Ok(Groups {
        spans,
        limits,
        overrides,
    })
}

/// The flat program (one block per leaf) and what its records cost.
pub(super) struct Built {
    /// The program; `blocks` are still one leaf each.
    pub program: Program,
    /// Per-field maximum errors over bounded records (fidelity order).
    pub maxima: [f64; 8],
    /// Records over logical events (pattern children included).
    pub recursive: u64,
    /// Bounded records.
    pub approximate: u64,
    /// The gap sum each record encodes, in record order.
    pub encoded_gap_sums: Vec<f64>,
}

/// Compresses every group and builds the program.
pub(super) fn build_program(
    trace: &Trace,
    samples: &Samples,
    groups: &Groups,
    count: usize,
) -> Built {
    build_program_with(trace, samples, groups, count, false)
}

/// [`build_program`], compressing the groups on every core first when
/// `parallel` (a step loop's few long slot streams, whose bounded intervals
/// hash their segments); the program is the same either way.
pub(super) fn build_program_with(
    trace: &Trace,
    samples: &Samples,
    groups: &Groups,
    count: usize,
    parallel: bool,
) -> Built {
    use rayon::prelude::*;
    let compress = |g: usize| -> Vec<GroupRecord> {
        let (sig, start, len) = groups.spans[g];
        let ranks = trace.signatures[sig as usize].rank_count();
        let mut out = Vec::new();
        compress_group(samples, start, len, groups.limits[g], ranks, &mut out);
        out
    };
    let mut compressed: Vec<Vec<GroupRecord>> = if parallel {
        (0..groups.spans.len())
            .into_par_iter()
            .map(compress)
            .collect()
    } else {
        Vec::new()
    };
    let mut built = Built {
        program: Program {
            has_observed: count > 0 && !samples.observed[0].is_nan(),
            ..Program::default()
        },
        maxima: [0.0; 8],
        recursive: 0,
        approximate: 0,
        encoded_gap_sums: Vec::with_capacity(count),
    };
    let mut sig_map: FxHashMap<u32, u32> = FxHashMap::default();
    let mut scratch: Vec<GroupRecord> = Vec::new();
    for (g, &(sig, start, len)) in groups.spans.iter().enumerate() {
        let ranks = trace.signatures[sig as usize].rank_count();
        scratch.clear();
        if parallel {
            scratch.append(&mut compressed[g]);
        } else {
            compress_group(samples, start, len, groups.limits[g], ranks, &mut scratch);
        }
        let program = &mut built.program;
        let next_sig = sig_map.len() as u32;
        let signature = *sig_map.entry(sig).or_insert_with(|| {
            program
                .signatures
                .push(trace.signatures[sig as usize].clone());
            next_sig
        });
        let first_record = program.records.len() as u32;
        for record in scratch.drain(..) {
            let r = built.record(samples, record, ranks);
            built.program.records.push(r);
        }
        let program = &mut built.program;
        program.leaves.push(Leaf {
            signature,
            first_record,
            record_count: program.records.len() as u32 - first_record,
        });
    }
    built
}

impl Built {
    /// Turns one ladder record into a program record, adding its points.
    fn record(&mut self, samples: &Samples, record: GroupRecord, ranks: usize) -> Record {
        self.recursive += 1;
        let program = &mut self.program;
        match record {
            GroupRecord::Plain { first, weight } => {
                let point = push_point(program, samples, first as usize, ranks);
                let gap = samples.gap[first as usize];
                self.encoded_gap_sums.push(if weight == 1 {
                    gap
                } else {
                    round(gap * f64::from(weight), 9)
                });
                Record::Plain {
                    point,
                    weight: u64::from(weight),
                }
            }
            GroupRecord::Pattern {
                first,
                period,
                repeats,
            } => {
                self.recursive += u64::from(period);
                let covered = first as usize..first as usize + (period * repeats) as usize;
                let gap_sum_us = round(pyfloat::fsum(samples.gap[covered].iter().copied()), 9);
                self.encoded_gap_sums.push(gap_sum_us);
                let first_point = program.points.len() as u32;
                for c in first..first + period {
                    push_point(program, samples, c as usize, ranks);
                }
                Record::Pattern {
                    first_point,
                    period,
                    repeats: u64::from(repeats),
                    gap_sum_us,
                }
            }
            GroupRecord::Bounded(b) => {
                self.approximate += 1;
                for (slot, v) in self.maxima.iter_mut().zip(b.errors.fidelity_values()) {
                    *slot = slot.max(v);
                }
                self.encoded_gap_sums.push(b.gap_sum_us);
                let point = push_point(program, samples, b.representative as usize, ranks);
                program.points[point as usize].gap_us = b.gap_us;
                program.bounded.push(Bounded {
                    point,
                    weight: u64::from(b.weight),
                    gap_sum_us: b.gap_sum_us,
                    representative_index: u64::from(b.representative_index),
                    errors: b.errors,
                    segment_sha256: b.segment_sha256,
                    uncertain_weight: u64::from(b.uncertain_weight),
                });
                Record::Bounded(program.bounded.len() as u32 - 1)
            }
        }
    }
}

fn push_point(program: &mut Program, samples: &Samples, i: usize, ranks: usize) -> u32 {
    let offsets_at = program.offsets.len() as u32;
    program
        .offsets
        .extend_from_slice(samples.offsets_of(i, ranks));
    program.points.push(Point {
        gap_us: samples.gap[i],
        compute_before_us: samples.before[i],
        compute_overlap_us: samples.overlap[i],
        compute_pressure: samples.pressure[i],
        observed_exposed_us: samples.observed[i],
        offsets_at,
        uncertain: samples.uncertain[i],
    });
    program.points.len() as u32 - 1
}

/// Fidelity accounting over the source's gaps in source order: the exact
/// total-gap check, then `lossless_timing` and the error budgets.
///
/// # Errors
/// A changed total gap ([`crate::ErrorKind::Invalid`]), a lossless request
/// that needed approximation or a budget exceeded ([`crate::ErrorKind::Budget`]).
pub(super) fn account_fidelity(
    source_gaps: &[f64],
    built: &Built,
    count: usize,
    options: &CompileOptions,
) -> Result<Fidelity> {
    let source_gap_total = py_sum(source_gaps.iter().copied());
    let encoded_gap_total = py_sum(built.encoded_gap_sums.iter().copied());
    let difference = (source_gap_total - encoded_gap_total).abs();
    // Every stored gap sum is rounded to 9 decimals (≤ 5e-10 each) and both
    // totals carry floating-point error relative to their magnitude; the
    // tolerance scales with both so large traces are judged fairly.
    let magnitude = source_gap_total.abs().max(encoded_gap_total.abs());
    let tolerance =
        1e-6 + (built.encoded_gap_sums.len() + count) as f64 * (5e-10 + magnitude * f64::EPSILON);
    if difference > tolerance {
        return Err(Error::invalid(format!(
            "timing compression changed total gap duration by {} us",
            pyfloat::repr(round(difference, 9))
        )));
    }
    let fidelity = Fidelity {
        bounded: built.approximate > 0,
        approximate_timing_records: built.approximate,
        maxima: built.maxima,
        source_gap_total_us: round(source_gap_total, 9),
        encoded_gap_total_us: round(encoded_gap_total, 9),
        total_gap_error_us: round(difference, 9),
    };
    if options.lossless_timing && fidelity.bounded {
        return Err(budget_error(
            "lossless timing was requested but bounded approximation was required".to_owned(),
        ));
    }
    for ((name, budget), actual) in options.budgets.entries().into_iter().zip(fidelity.maxima) {
        if let Some(b) = budget
            && actual > b + 1e-6
        {
            return Err(budget_error(format!(
                "timing fidelity {name}={} us exceeds budget {} us",
                pyfloat::repr(actual),
                pyfloat::repr(b)
            )));
        }
    }
    Ok(fidelity)
}
