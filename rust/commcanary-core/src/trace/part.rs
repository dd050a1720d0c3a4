//! A built trace's events as bytes, and events taken one at a time from
//! such a part into another builder: how events written on one machine join
//! a trace built on another without being read back from JSON.
//!
//! A part is the events (their columns, per-rank arrivals and canonical JSON)
//! and the signatures they use; members are not carried. Decoding is total:
//! every length is bounded by the bytes that remain, and every index is
//! checked, before anything is allocated or used.

use super::{Events, Signature, Span, Trace, TraceBuilder, flag};
use crate::byte_form::{Reader, Writer, corrupt};
use crate::error::Result;

fn write_opt_bytes(w: &mut Writer, v: Option<&[u8]>) {
    match v {
        Some(b) => {
            w.u64(1);
            w.bytes(b);
        }
        None => w.u64(0),
    }
}

fn read_opt_bytes(r: &mut Reader<'_>) -> Result<Option<Vec<u8>>> {
    match r.u64()? {
        0 => Ok(None),
        1 => Ok(Some(r.bytes()?)),
        _ => Err(corrupt()),
    }
}

fn write_opt_i64(w: &mut Writer, v: Option<i64>) {
    match v {
        Some(x) => {
            w.u64(1);
            w.i64(x);
        }
        None => w.u64(0),
    }
}

fn read_opt_i64(r: &mut Reader<'_>) -> Result<Option<i64>> {
    match r.u64()? {
        0 => Ok(None),
        1 => Ok(Some(r.i64()?)),
        _ => Err(corrupt()),
    }
}

fn write_signature(w: &mut Writer, s: &Signature) {
    w.bytes(&s.phase);
    w.bytes(&s.op);
    w.i64(s.bytes);
    w.u64(s.ranks.len() as u64);
    s.ranks.iter().for_each(|&r| w.i64(r));
    w.bytes(&s.group);
    w.i64(s.concurrent_groups);
    w.u64(u64::from(s.custom_op));
    write_opt_bytes(w, s.dtype.as_deref());
    write_opt_bytes(w, s.reduction_op.as_deref());
    write_opt_bytes(w, s.root_rank.as_deref());
    write_opt_i64(w, s.sender_rank);
    write_opt_i64(w, s.receiver_rank);
    write_opt_i64(w, s.message_sequence);
    write_opt_bytes(w, s.tag.as_deref());
    write_opt_bytes(w, s.channel.as_deref());
}

fn read_signature(r: &mut Reader<'_>) -> Result<Signature> {
    let phase = r.bytes()?;
    let op = r.bytes()?;
    let bytes = r.i64()?;
    let n = r.count(8)?;
    let ranks = (0..n).map(|_| r.i64()).collect::<Result<Vec<_>>>()?;
    Ok(Signature {
        phase,
        op,
        bytes,
        ranks,
        group: r.bytes()?,
        concurrent_groups: r.i64()?,
        custom_op: match r.u64()? {
            0 => false,
            1 => true,
            _ => return Err(corrupt()),
        },
        dtype: read_opt_bytes(r)?,
        reduction_op: read_opt_bytes(r)?,
        root_rank: read_opt_bytes(r)?,
        sender_rank: read_opt_i64(r)?,
        receiver_rank: read_opt_i64(r)?,
        message_sequence: read_opt_i64(r)?,
        tag: read_opt_bytes(r)?,
        channel: read_opt_bytes(r)?,
    })
}

fn write_f64s(w: &mut Writer, v: &[f64]) {
    v.iter().for_each(|&x| w.f64(x));
}

fn read_f64s(r: &mut Reader<'_>, n: usize) -> Result<Vec<f64>> {
    (0..n).map(|_| r.f64()).collect()
}

/// The events of a trace built in this process (no event spanned in raw
/// input), as bytes.
#[must_use]
pub fn encode_part(t: &Trace) -> Vec<u8> {
    let e = &t.events;
    let mut w = Writer(Vec::with_capacity(e.canonical.len() + e.len() * 120 + 64));
    w.u64(t.signatures.len() as u64);
    t.signatures.iter().for_each(|s| write_signature(&mut w, s));
    w.u64(e.len() as u64);
    e.signature.iter().for_each(|&s| w.u64(u64::from(s)));
    for column in [
        &e.start_us,
        &e.gap_us,
        &e.arrival_skew_us,
        &e.compute_before_us,
        &e.compute_overlap_us,
        &e.compute_pressure,
        &e.observed_exposed_us,
        &e.device_us,
        &e.step,
    ] {
        write_f64s(&mut w, column);
    }
    e.flags.iter().for_each(|&f| w.u64(u64::from(f)));
    e.arrival_at.iter().for_each(|&a| w.u64(u64::from(a)));
    w.u64(e.arrivals.len() as u64);
    write_f64s(&mut w, &e.arrivals);
    for s in &e.spans {
        w.u64(s.start);
        w.u64(u64::from(s.len));
    }
    w.bytes(&e.canonical);
    w.0
}

/// A part from [`encode_part`]'s bytes, as a trace of those events.
///
/// # Errors
/// Bytes that are not an encoded part.
pub fn decode_part(bytes: &[u8]) -> Result<Trace> {
    let mut r = Reader::new(bytes);
    let signatures = (0..r.count(64)?)
        .map(|_| read_signature(&mut r))
        .collect::<Result<Vec<_>>>()?;
    // Per event: a signature, nine columns, flags, an arrival offset and a span.
    let n = r.count(8 * 14)?;
    let signature = (0..n)
        .map(|_| {
            u32::try_from(r.u64()?)
                .ok()
                .filter(|&s| (s as usize) < signatures.len())
                .ok_or_else(corrupt)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut columns = Vec::with_capacity(9);
    for _ in 0..9 {
        columns.push(read_f64s(&mut r, n)?);
    }
    let flags = (0..n)
        .map(|_| u8::try_from(r.u64()?).map_err(|_| corrupt()))
        .collect::<Result<Vec<_>>>()?;
    let arrival_at = (0..n)
        .map(|_| u32::try_from(r.u64()?).map_err(|_| corrupt()))
        .collect::<Result<Vec<_>>>()?;
    let m = r.count(8)?;
    let arrivals = read_f64s(&mut r, m)?;
    let spans = (0..n)
        .map(|_| {
            Ok(Span {
                start: r.u64()?,
                len: u32::try_from(r.u64()?).map_err(|_| corrupt())?,
                in_raw: false,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let canonical = r.bytes()?;
    if !r.done()
        || spans
            .iter()
            .any(|s| s.start.saturating_add(u64::from(s.len)) > canonical.len() as u64)
        || arrival_at.windows(2).any(|w| w[0] > w[1])
        || arrival_at
            .last()
            .is_some_and(|&a| a as usize > arrivals.len())
    {
        return Err(corrupt());
    }
    let mut c = columns.into_iter();
    let mut next = || c.next().unwrap_or_default();
    let events = Events {
        signature,
        start_us: next(),
        gap_us: next(),
        arrival_skew_us: next(),
        compute_before_us: next(),
        compute_overlap_us: next(),
        compute_pressure: next(),
        observed_exposed_us: next(),
        device_us: next(),
        step: next(),
        flags,
        arrival_at,
        arrivals,
        spans,
        canonical,
    };
    Ok(Trace {
        signatures,
        events,
        ..Trace::default()
    })
}

impl TraceBuilder {
    /// Appends event `i` of `part` (a decoded part): its signature interned
    /// here (`remap` caches the part's signatures' ids here; start it
    /// empty, one per part), its canonical JSON copied.
    pub fn push_from(&mut self, part: &Trace, i: usize, remap: &mut Vec<Option<u32>>) {
        let e = &part.events;
        let s = e.signature[i] as usize;
        if remap.len() < part.signatures.len() {
            remap.resize(part.signatures.len(), None);
        }
        let id = match remap[s] {
            Some(id) => id,
            None => {
                let id = self.intern(&part.signatures[s]);
                remap[s] = Some(id);
                id
            }
        };
        let step = e.step[i];
        let timing = super::EventTiming {
            start_us: e.start_us[i],
            gap_us: e.gap_us[i],
            arrival_skew_us: e.arrival_skew_us[i],
            compute_before_us: e.compute_before_us[i],
            compute_overlap_us: e.compute_overlap_us[i],
            compute_pressure: e.compute_pressure[i],
            observed_exposed_us: e.observed_exposed_us[i],
            device_us: e.device_us[i],
            step: if step.is_nan() { -1 } else { step as i64 },
            flags: e.flags[i],
        };
        let arrivals = (e.flags[i] & flag::HAS_ARRIVAL_MAP != 0).then(|| {
            let from = e.arrival_at[i] as usize;
            let to = e
                .arrival_at
                .get(i + 1)
                .map_or(e.arrivals.len(), |&a| a as usize);
            &e.arrivals[from..to]
        });
        let json = part.canonical_json(i);
        let span = self.write_canonical(|out| out.extend_from_slice(json));
        self.push_spanned(id, &timing, arrivals, span);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{LoadOptions, load};

    fn canonical(t: &Trace) -> Vec<u8> {
        let order: Vec<u32> = (0..t.events.len() as u32).collect();
        let mut out = Vec::new();
        t.write_projection(&order, &mut |piece: &[u8]| out.extend_from_slice(piece));
        out
    }

    #[test]
    fn events_taken_from_a_part_are_the_same_trace() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/traces/llama70b_tp8_trace.json");
        let loaded = load(&path, &LoadOptions::default()).unwrap();
        // A built trace (its events in the builder's own buffer).
        let mut built = TraceBuilder::new();
        let mut remap = Vec::new();
        for i in 0..loaded.events.len() {
            built.push_from(&loaded, i, &mut remap);
        }
        let built = built.finish(Vec::new());
        let bytes = encode_part(&built);
        let part = decode_part(&bytes).unwrap();
        let mut again = TraceBuilder::new();
        let mut remap = Vec::new();
        for i in 0..part.events.len() {
            again.push_from(&part, i, &mut remap);
        }
        let again = again.finish(Vec::new());
        assert_eq!(canonical(&again), canonical(&built));
        assert_eq!(again.signatures, loaded.signatures);
        for cut in [0, 1, 8, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode_part(&bytes[..cut]).is_err());
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(decode_part(&long).is_err());
    }
}
