//! Program-level SHA-256 commitments.
//!
//! * `execution_semantic_sha256` commits to what the replay model executes and
//!   nothing else: canonical JSON of
//!   `{"events": [{"execution_occurrence_base": b, "signature": {...},
//!   "timing_runs": [{"item": {"arrival_offsets_us", "compute_overlap_us",
//!   "compute_pressure", "gap_us"}, "weight": k}, ...]}, ...], "format": F}`
//!   over logical events, with per-occurrence items (9 decimals) run-length
//!   encoded. Flat and motif encodings of the same execution, or two
//!   groupings with identical occurrences, share it.
//! * `calibration_evaluation_sha256` commits to the observed latencies the
//!   calibration is computed from: `{"events": [{"observed_runs": runs|null,
//!   "signature": {...}}], "format": F}`.

use sha2::{Digest, Sha256};

use super::expand::{for_each_logical_event, for_each_occurrence_of};
use super::write::write_signature;
use super::{CANARY_FORMAT, Program};
use crate::json::canon;
use crate::pyfloat::round;
use crate::trace::hex;

#[derive(Clone, PartialEq)]
struct Item {
    gap: f64,
    point: u32,
}

/// The `timing_runs` items of one logical event (run-length encoded).
fn write_timing_runs(buf: &mut Vec<u8>, program: &Program, runs: &[(Item, u64)], ranks: usize) {
    for (i, (item, weight)) in runs.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        let p = &program.points[item.point as usize];
        buf.extend_from_slice(b"{\"item\":{\"arrival_offsets_us\":[");
        for (k, &o) in program.point_offsets(p, ranks).iter().enumerate() {
            if k > 0 {
                buf.push(b',');
            }
            canon::write_f64_rounded(buf, round(o, 9), 9);
        }
        buf.extend_from_slice(b"],\"compute_overlap_us\":");
        canon::write_f64_rounded(buf, round(p.compute_overlap_us, 9), 9);
        buf.extend_from_slice(b",\"compute_pressure\":");
        canon::write_f64_rounded(buf, round(p.compute_pressure, 9), 9);
        buf.extend_from_slice(b",\"gap_us\":");
        canon::write_f64_rounded(buf, item.gap, 9);
        buf.extend_from_slice(b"},\"weight\":");
        canon::write_i64(buf, *weight as i64);
        buf.push(b'}');
    }
}

/// The `observed_runs` of one logical event, or `null` when some occurrence
/// lacks an observed latency.
fn write_observed_runs(cbuf: &mut Vec<u8>, observed_runs: Option<&[(f64, u64)]>) {
    let Some(observed_runs) = observed_runs else {
        cbuf.extend_from_slice(b"null");
        return;
    };
    cbuf.push(b'[');
    for (i, (v, w)) in observed_runs.iter().enumerate() {
        if i > 0 {
            cbuf.push(b',');
        }
        cbuf.extend_from_slice(b"{\"item\":");
        canon::write_f64(cbuf, *v);
        cbuf.extend_from_slice(b",\"weight\":");
        canon::write_i64(cbuf, *w as i64);
        cbuf.push(b'}');
    }
    cbuf.push(b']');
}

/// `(execution_semantic_sha256, calibration_evaluation_sha256)` of a program.
#[must_use]
pub fn program_digests(program: &Program) -> (String, String) {
    let signatures: Vec<Vec<u8>> = program
        .signatures
        .iter()
        .map(|s| {
            let mut v = Vec::new();
            write_signature(&mut v, s);
            v
        })
        .collect();
    let mut exec = Sha256::new();
    let mut calib = Sha256::new();
    exec.update(b"{\"events\":[");
    calib.update(b"{\"events\":[");
    let mut first = true;
    let mut buf = Vec::with_capacity(4096);
    let mut cbuf = Vec::with_capacity(1024);
    let same_item = |a: &Item, b: &Item, ranks: usize| -> bool {
        if a.gap.to_bits() != b.gap.to_bits() {
            return false;
        }
        if a.point == b.point {
            return true;
        }
        let pa = &program.points[a.point as usize];
        let pb = &program.points[b.point as usize];
        pa.compute_overlap_us == pb.compute_overlap_us
            && pa.compute_pressure == pb.compute_pressure
            && program.point_offsets(pa, ranks) == program.point_offsets(pb, ranks)
    };
    for_each_logical_event(program, |event| {
        let sig = &program.signatures[event.signature as usize];
        let ranks = sig.rank_count();
        buf.clear();
        cbuf.clear();
        if !first {
            buf.push(b',');
            cbuf.push(b',');
        }
        first = false;
        buf.extend_from_slice(b"{\"execution_occurrence_base\":");
        canon::write_i64(&mut buf, event.base as i64);
        buf.extend_from_slice(b",\"signature\":");
        buf.extend_from_slice(&signatures[event.signature as usize]);
        buf.extend_from_slice(b",\"timing_runs\":[");
        cbuf.extend_from_slice(b"{\"observed_runs\":");
        let mut runs: Vec<(Item, u64)> = Vec::new();
        let mut observed_runs: Vec<(f64, u64)> = Vec::new();
        let mut observed = program.has_observed;
        for_each_occurrence_of(program, event, |occ| {
            let item = Item {
                gap: round(occ.gap_us, 9),
                point: occ.point,
            };
            match runs.last_mut() {
                Some((last, w)) if same_item(last, &item, ranks) => *w += 1,
                _ => runs.push((item, 1)),
            }
            let obs = program.points[occ.point as usize].observed_exposed_us;
            if obs.is_nan() {
                observed = false;
            } else {
                let v = round(obs, 9);
                match observed_runs.last_mut() {
                    Some((last, w)) if last.to_bits() == v.to_bits() => *w += 1,
                    _ => observed_runs.push((v, 1)),
                }
            }
        });
        write_timing_runs(&mut buf, program, &runs, ranks);
        buf.extend_from_slice(b"]}");
        write_observed_runs(&mut cbuf, observed.then_some(observed_runs.as_slice()));
        cbuf.extend_from_slice(b",\"signature\":");
        cbuf.extend_from_slice(&signatures[event.signature as usize]);
        cbuf.push(b'}');
        exec.update(&buf);
        calib.update(&cbuf);
    });
    let mut tail = Vec::new();
    tail.extend_from_slice(b"],\"format\":");
    canon::write_str(&mut tail, CANARY_FORMAT);
    tail.push(b'}');
    exec.update(&tail);
    calib.update(&tail);
    (hex(&exec.finalize()), hex(&calib.finalize()))
}
