//! A [`RankProfile`] as bytes, for the per-file cache: little-endian
//! fixed-width numbers, length-prefixed strings and lists, in field order.
//!
//! Decoding is total: every length is bounded by the bytes that remain
//! before anything is allocated, and any inconsistency is an error (the
//! cache then rebuilds the entry). The cache checks a BLAKE3 digest of the
//! payload before decoding, so this only ever sees corrupted bytes by a
//! digest collision or a bug; it must still not panic.

use super::ops::Kind;
use super::profile::{Call, FileFacts, GroupDecl, ProfileCounts, RankProfile};
use crate::byte_form::{Reader, Writer, corrupt};
use crate::error::Result;

const KINDS: [Kind; 11] = [
    Kind::AllReduce,
    Kind::AllGather,
    Kind::ReduceScatter,
    Kind::AllToAll,
    Kind::Broadcast,
    Kind::Reduce,
    Kind::Gather,
    Kind::Scatter,
    Kind::Send,
    Kind::Recv,
    Kind::Other,
];

/// Canonical dtype names a call can carry (see [`super::ops::dtype`]).
const DTYPES: [&str; 17] = [
    "float32",
    "float64",
    "float16",
    "bfloat16",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
    "complex32",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
];

/// Writes a list of groups (the profile's, or a job's).
pub(crate) fn write_groups(w: &mut Writer, groups: &[GroupDecl]) {
    w.u64(groups.len() as u64);
    for g in groups {
        w.str(&g.name);
        w.str(&g.desc);
        w.u64(g.ranks.len() as u64);
        g.ranks.iter().for_each(|&r| w.i64(r));
    }
}

/// Reads what [`write_groups`] wrote.
pub(crate) fn read_groups(r: &mut Reader<'_>) -> Result<Vec<GroupDecl>> {
    let mut groups = Vec::new();
    for _ in 0..r.count(24)? {
        let name = r.str()?;
        let desc = r.str()?;
        let n = r.count(8)?;
        let ranks = (0..n).map(|_| r.i64()).collect::<Result<Vec<_>>>()?;
        groups.push(GroupDecl { name, desc, ranks });
    }
    Ok(groups)
}

/// Encodes a profile.
#[must_use]
pub fn encode(p: &RankProfile) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(256 + p.calls.len() * 160));
    w.i64(p.rank);
    w.i64(p.world_size.unwrap_or(-1));
    w.str(p.backend.as_deref().unwrap_or("\u{0}"));
    write_groups(&mut w, &p.groups);
    w.i64(p.epoch_ns);
    w.strs(&p.names);
    w.strs(&p.phases);
    w.u64(p.steps.len() as u64);
    for &(n, s, e) in &p.steps {
        w.i64(n);
        w.f64(s);
        w.f64(e);
    }
    w.u64(p.barriers.len() as u64);
    p.barriers.iter().for_each(|&t| w.f64(t));
    w.u64(p.files.len() as u64);
    for f in &p.files {
        w.u64(f.bytes);
        w.i64(f.base_time_ns);
        w.i64(f.process);
    }
    let c = &p.counts;
    for v in [
        c.events, c.control, c.empty, c.nested, c.undtyped, c.unlinked,
    ] {
        w.u64(v);
    }
    w.u64(p.calls.len() as u64);
    for call in &p.calls {
        encode_call(&mut w, call);
    }
    w.0
}

fn encode_call(w: &mut Writer, c: &Call) {
    let kind = KINDS
        .iter()
        .position(|k| *k == c.kind)
        .unwrap_or(KINDS.len() - 1);
    let dtype = DTYPES.iter().position(|d| *d == c.dtype).unwrap_or(0);
    let flags = u64::from(c.end_measured) | u64::from(c.algorithm) << 8;
    for v in [
        kind as u64,
        dtype as u64,
        flags,
        u64::from(c.name),
        u64::from(c.caller),
        u64::from(c.kernels),
        u64::from(c.file),
    ] {
        w.u64(v);
    }
    for v in [
        c.bytes,
        c.in_elems,
        c.out_elems,
        c.out_tensors,
        c.peer,
        c.peer_global,
        c.tag,
        c.group,
        c.seq,
        c.thread,
        c.step,
        c.phase,
    ] {
        w.i64(v);
    }
    for v in [
        c.arrival,
        c.end,
        c.device_us,
        c.compute_before,
        c.compute_overlap,
    ] {
        w.f64(v);
    }
    w.u64(c.index);
}

/// Bytes of one encoded call.
const CALL_BYTES: usize = 8 * (7 + 12 + 5 + 1);

/// Decodes a profile.
///
/// # Errors
/// Bytes that are not an encoded profile.
pub fn decode(bytes: &[u8]) -> Result<RankProfile> {
    let mut r = Reader::new(bytes);
    let rank = r.i64()?;
    let world = r.i64()?;
    let backend = r.str()?;
    let groups = read_groups(&mut r)?;
    let epoch_ns = r.i64()?;
    let names = r.strs()?;
    let phases = r.strs()?;
    let steps = (0..r.count(24)?)
        .map(|_| Ok((r.i64()?, r.f64()?, r.f64()?)))
        .collect::<Result<Vec<_>>>()?;
    let barriers = (0..r.count(8)?)
        .map(|_| r.f64())
        .collect::<Result<Vec<_>>>()?;
    let files = (0..r.count(16)?)
        .map(|_| {
            Ok(FileFacts {
                bytes: r.u64()?,
                base_time_ns: r.i64()?,
                process: r.i64()?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut c = [0_u64; 6];
    for v in &mut c {
        *v = r.u64()?;
    }
    let counts = ProfileCounts {
        events: c[0],
        control: c[1],
        empty: c[2],
        nested: c[3],
        undtyped: c[4],
        unlinked: c[5],
    };
    let n = r.count(CALL_BYTES)?;
    let mut calls = Vec::with_capacity(n);
    for _ in 0..n {
        calls.push(decode_call(&mut r, names.len(), phases.len())?);
    }
    if !r.done() {
        return Err(corrupt());
    }
    Ok(RankProfile {
        rank,
        world_size: (world >= 0).then_some(world),
        backend: (backend != "\u{0}").then_some(backend),
        groups,
        epoch_ns,
        calls,
        names,
        phases,
        steps,
        barriers,
        files,
        counts,
    })
}

fn decode_call(r: &mut Reader<'_>, names: usize, phases: usize) -> Result<Call> {
    let mut u = [0_u64; 7];
    for v in &mut u {
        *v = r.u64()?;
    }
    let mut i = [0_i64; 12];
    for v in &mut i {
        *v = r.i64()?;
    }
    let mut f = [0_f64; 5];
    for v in &mut f {
        *v = r.f64()?;
    }
    let index = r.u64()?;
    let kind = *KINDS.get(u[0] as usize).ok_or_else(corrupt)?;
    let dtype = *DTYPES.get(u[1] as usize).ok_or_else(corrupt)?;
    let small = |v: u64| u32::try_from(v).map_err(|_| corrupt());
    if u[3] as usize >= names || i[11] >= phases as i64 {
        return Err(corrupt());
    }
    Ok(Call {
        kind,
        name: small(u[3])?,
        bytes: i[0],
        in_elems: i[1],
        out_elems: i[2],
        out_tensors: i[3],
        dtype,
        peer: i[4],
        peer_global: i[5],
        tag: i[6],
        group: i[7],
        seq: i[8],
        arrival: f[0],
        end: f[1],
        end_measured: u[2] & 1 == 1,
        algorithm: u8::try_from(u[2] >> 8)
            .ok()
            .filter(|&a| usize::from(a) < super::ops::ALGORITHMS.len())
            .ok_or_else(corrupt)?,
        thread: i[9],
        caller: small(u[4])?,
        device_us: f[2],
        kernels: small(u[5])?,
        step: i[10],
        phase: i[11],
        compute_before: f[3],
        compute_overlap: f[4],
        file: small(u[6])?,
        index,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::kineto::profile::{Source, read_file};
    use crate::import::stream::ScanLimits;

    #[test]
    fn round_trips_and_refuses_damage() {
        let path = crate::test_data::fixture("kineto/gloo_tp4_decode/rank2.json.gz");
        let p = read_file(Source::Path(&path), &ScanLimits::default(), None).unwrap();
        let bytes = encode(&p);
        assert_eq!(encode(&decode(&bytes).unwrap()), bytes);
        for cut in [0, 1, 9, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_err());
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(decode(&long).is_err());
        let mut huge = bytes;
        huge[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&huge).is_err());
    }
}
