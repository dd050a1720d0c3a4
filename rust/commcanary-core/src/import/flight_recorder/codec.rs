//! An [`FrDump`] as bytes, for a dump read by a distributed task: the
//! shared byte form ([`crate::import::bytes`]), in field order. Decoding is
//! total (bounded, refusing any inconsistency) and gives back the dump
//! exactly: `decode(encode(d)) == d`.

use super::{EntryState, FrDump, FrEntry, PgConfig, PgStatus};
use crate::byte_form::{Reader, Writer, corrupt};
use crate::error::Result;
use crate::import::stacks::Frame;

/// The canonical ops an entry can name (see `entry::canonical_op`).
const OPS: [&str; 13] = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "barrier",
    "send",
    "recv",
    "coalesced",
    "other",
];
const ENCODINGS: [&str; 2] = ["pickle", "json"];
const STATES: [EntryState; 3] = [
    EntryState::Scheduled,
    EntryState::Started,
    EntryState::Completed,
];

fn index_of<T: PartialEq>(table: &[T], value: &T) -> u64 {
    // Every value a reader produces is in its table; `other` stands for
    // anything else so encoding never fails.
    table
        .iter()
        .position(|v| v == value)
        .unwrap_or(table.len() - 1) as u64
}

/// Encodes a dump.
#[must_use]
pub fn encode(d: &FrDump) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(256 + d.entries.len() * 190));
    w.str(&d.version);
    w.str(&d.comm_lib_version);
    w.u64(d.pg_config.len() as u64);
    for c in &d.pg_config {
        w.str(&c.name);
        w.str(&c.desc);
        match &c.ranks {
            None => w.i64(-1),
            Some(ranks) => {
                w.i64(ranks.len() as i64);
                ranks.iter().for_each(|&r| w.i64(r));
            }
        }
    }
    w.u64(d.unnamed_ranks.len() as u64);
    d.unnamed_ranks.iter().for_each(|&r| w.i64(r));
    w.u64(d.pg_status.len() as u64);
    for s in &d.pg_status {
        [s.pg_id, s.enqueued, s.started, s.completed]
            .iter()
            .for_each(|&v| w.i64(v));
    }
    w.u64(d.groups.len() as u64);
    for (name, desc) in &d.groups {
        w.str(name);
        w.str(desc);
    }
    w.strs(&d.texts);
    w.u64(d.stacks.len() as u64);
    for stack in &d.stacks {
        w.u64(stack.len() as u64);
        for f in stack {
            w.str(&f.file);
            w.u64(u64::from(f.line));
            w.str(&f.func);
        }
    }
    w.u64(d.entries.len() as u64);
    for e in &d.entries {
        encode_entry(&mut w, e);
    }
    w.u64(u64::from(d.timing));
    w.u64(index_of(&ENCODINGS, &d.encoding));
    w.0
}

fn encode_entry(w: &mut Writer, e: &FrEntry) {
    for v in [
        u64::from(e.group),
        u64::from(e.name),
        u64::from(e.in_sizes),
        u64::from(e.out_sizes),
        u64::from(e.in_dtypes),
        u64::from(e.out_dtypes),
        index_of(&OPS, &e.op),
        index_of(&STATES, &e.state),
        u64::from(e.is_p2p) | (u64::from(e.retired) << 1),
    ] {
        w.u64(v);
    }
    for v in [
        e.pg_id,
        e.record_id,
        e.op_id,
        e.seq,
        e.p2p_seq,
        e.peer,
        e.in_numel,
        e.out_numel,
        e.created_ns,
        e.started_ns,
        e.completed_ns,
        e.timeout_ms,
        e.stack,
    ] {
        w.i64(v);
    }
    w.f64(e.duration_ms);
}

/// Decodes what [`encode`] wrote.
///
/// # Errors
/// Bytes that are not an encoded dump (truncated, inconsistent, trailing).
pub fn decode(bytes: &[u8]) -> Result<FrDump> {
    let mut r = Reader::new(bytes);
    let version = r.str()?;
    let comm_lib_version = r.str()?;
    let n = r.count(24)?;
    let mut pg_config = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.str()?;
        let desc = r.str()?;
        let len = r.i64()?;
        let ranks = if len < 0 {
            None
        } else {
            let len = usize::try_from(len).map_err(|_| corrupt())?;
            if len > bytes.len() / 8 {
                return Err(corrupt());
            }
            Some((0..len).map(|_| r.i64()).collect::<Result<Vec<_>>>()?)
        };
        pg_config.push(PgConfig { name, desc, ranks });
    }
    let n = r.count(8)?;
    let unnamed_ranks = (0..n).map(|_| r.i64()).collect::<Result<Vec<_>>>()?;
    let n = r.count(32)?;
    let mut pg_status = Vec::with_capacity(n);
    for _ in 0..n {
        pg_status.push(PgStatus {
            pg_id: r.i64()?,
            enqueued: r.i64()?,
            started: r.i64()?,
            completed: r.i64()?,
        });
    }
    let n = r.count(16)?;
    let groups = (0..n)
        .map(|_| Ok((r.str()?, r.str()?)))
        .collect::<Result<Vec<_>>>()?;
    let texts = r.strs()?;
    let n = r.count(8)?;
    let mut stacks = Vec::with_capacity(n);
    for _ in 0..n {
        let frames = r.count(24)?;
        let mut stack = Vec::with_capacity(frames);
        for _ in 0..frames {
            let file = r.str()?;
            let line = u32::try_from(r.u64()?).map_err(|_| corrupt())?;
            let func = r.str()?;
            stack.push(Frame { file, line, func });
        }
        stacks.push(stack);
    }
    let n = r.count(9 * 8 + 13 * 8 + 8)?;
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        entries.push(decode_entry(&mut r, &texts, &groups, &stacks)?);
    }
    let timing = match r.u64()? {
        0 => false,
        1 => true,
        _ => return Err(corrupt()),
    };
    let encoding = *ENCODINGS
        .get(usize::try_from(r.u64()?).map_err(|_| corrupt())?)
        .ok_or_else(corrupt)?;
    if !r.done() {
        return Err(corrupt());
    }
    Ok(FrDump {
        version,
        comm_lib_version,
        pg_config,
        unnamed_ranks,
        pg_status,
        groups,
        texts,
        stacks,
        entries,
        timing,
        encoding,
    })
}

fn decode_entry(
    r: &mut Reader<'_>,
    texts: &[String],
    groups: &[(String, String)],
    stacks: &[Vec<Frame>],
) -> Result<FrEntry> {
    let mut u = [0u64; 9];
    for v in &mut u {
        *v = r.u64()?;
    }
    let mut i = [0i64; 13];
    for v in &mut i {
        *v = r.i64()?;
    }
    let duration_ms = r.f64()?;
    let text = |v: u64| {
        u32::try_from(v)
            .ok()
            .filter(|&t| (t as usize) < texts.len())
            .ok_or_else(corrupt)
    };
    let group = u32::try_from(u[0])
        .ok()
        .filter(|&g| (g as usize) < groups.len())
        .ok_or_else(corrupt)?;
    let stack = i[12];
    if stack < -1 || (stack >= 0 && stack as usize >= stacks.len()) || u[8] > 3 {
        return Err(corrupt());
    }
    Ok(FrEntry {
        group,
        name: text(u[1])?,
        in_sizes: text(u[2])?,
        out_sizes: text(u[3])?,
        in_dtypes: text(u[4])?,
        out_dtypes: text(u[5])?,
        op: OPS
            .get(usize::try_from(u[6]).map_err(|_| corrupt())?)
            .ok_or_else(corrupt)?,
        state: *STATES
            .get(usize::try_from(u[7]).map_err(|_| corrupt())?)
            .ok_or_else(corrupt)?,
        is_p2p: u[8] & 1 == 1,
        retired: u[8] & 2 == 2,
        pg_id: i[0],
        record_id: i[1],
        op_id: i[2],
        seq: i[3],
        p2p_seq: i[4],
        peer: i[5],
        in_numel: i[6],
        out_numel: i[7],
        created_ns: i[8],
        started_ns: i[9],
        completed_ns: i[10],
        timeout_ms: i[11],
        stack,
        duration_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::flight_recorder::read_dump;

    #[test]
    fn real_dumps_round_trip_and_damage_is_refused() {
        for rank in 0..4 {
            for suffix in ["", ".json"] {
                let rel = format!(
                    "hang/gloo_w4_desync_broadcast/fr_during_hang/fr_trace_rank_{rank}{suffix}"
                );
                let dump = read_dump(&crate::test_data::fixture_bytes(&rel)).unwrap();
                assert!(!dump.entries.is_empty());
                let encoded = encode(&dump);
                let back = decode(&encoded).unwrap();
                // Debug text compares NaN durations as equal.
                assert_eq!(format!("{back:?}"), format!("{dump:?}"));
                assert_eq!(encode(&back), encoded);
                for cut in [0, 1, encoded.len() / 2, encoded.len() - 1] {
                    assert!(decode(&encoded[..cut]).is_err());
                }
                let mut longer = encoded.clone();
                longer.push(0);
                assert!(decode(&longer).is_err());
            }
        }
    }
}
