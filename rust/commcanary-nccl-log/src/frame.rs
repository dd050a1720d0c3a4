//! The file: a segment is a run of frames, each `[u32 length][u32 CRC-32 of
//! the payload][payload]` (little-endian), the payload's first byte its kind.
//!
//! A segment opens with a [`Header`] and repeats every communicator and
//! string the process has announced so far, so each segment reads alone. A
//! sealed segment ends with a seal frame. A process killed while writing
//! leaves its last segment unsealed, its last frame possibly cut: the reader
//! skips a cut or mis-checksummed *last* frame and counts what it held; the
//! same damage before the end is corruption.

use crate::record::{MIN_ENCODED, Record};

/// The first bytes of a header frame's payload after its kind.
pub const MAGIC: &[u8; 8] = b"CCNCCL01";
/// This format's version.
pub const FORMAT_VERSION: u32 = 1;
/// The largest frame a reader accepts (bounds allocation on hostile input).
pub const MAX_FRAME: usize = 64 << 20;
/// The longest string a frame carries.
pub const MAX_STRING: usize = 4096;

/// Frame kinds: the first payload byte.
pub mod kind {
    /// [`super::Frame::Header`]
    pub const HEADER: u8 = 1;
    /// [`super::Frame::Comm`]
    pub const COMM: u8 = 2;
    /// [`super::Frame::String`]
    pub const STRING: u8 = 3;
    /// [`super::Frame::Records`]
    pub const RECORDS: u8 = 4;
    /// [`super::Frame::Drops`]
    pub const DROPS: u8 = 5;
    /// [`super::Frame::Finalize`]
    pub const FINALIZE: u8 = 6;
    /// [`super::Frame::Seal`]
    pub const SEAL: u8 = 7;
}

/// What opens a segment: who wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Header {
    /// [`FORMAT_VERSION`] of the writer.
    pub format_version: u32,
    /// The profiler ABI NCCL loaded (4, 5 or 6).
    pub abi: u32,
    /// Process id.
    pub pid: u32,
    /// `RANK` of the process's environment, −1 when unset.
    pub world_rank: i64,
    /// `LOCAL_RANK`, −1 when unset.
    pub local_rank: i64,
    /// `WORLD_SIZE`, −1 when unset.
    pub world_size: i64,
    /// When the plugin started, host wall clock ns.
    pub started_ns: u64,
    /// This segment's number in the process's file set, from 1.
    pub segment: u32,
    /// Host name.
    pub host: String,
    /// Job id (`TORCHELASTIC_RUN_ID`, `SLURM_JOB_ID`, … or empty).
    pub job: String,
}

/// A communicator NCCL initialised the plugin for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Comm {
    /// Index in the process: start records name it.
    pub context: u32,
    /// `commId` (v5, v6) or `commHash` (v4).
    pub comm_id: u64,
    /// `nNodes`.
    pub n_nodes: i32,
    /// `nranks`.
    pub nranks: i32,
    /// `rank` in the communicator.
    pub rank: i32,
    /// The activation mask the plugin set.
    pub mask: u32,
    /// The ABI of this `init`.
    pub abi: u32,
    /// `commName` (PyTorch passes `<group_desc>:<group_name>`), possibly empty.
    pub name: String,
}

/// One frame, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Opens a segment.
    Header(Header),
    /// A communicator.
    Comm(Comm),
    /// The text at a string pointer some record holds.
    String {
        /// The pointer value.
        pointer: u64,
        /// Its text (at most [`MAX_STRING`] bytes, lossy UTF-8).
        text: String,
    },
    /// Records drained from one thread's ring, in its order.
    Records {
        /// The ring's thread number in the process.
        thread: u32,
        /// The records.
        records: Vec<Record>,
    },
    /// Records a thread's full ring refused, so far (cumulative).
    Drops {
        /// The ring's thread number.
        thread: u32,
        /// Records dropped since the process started.
        dropped: u64,
    },
    /// `finalize` for a communicator.
    Finalize {
        /// Its context.
        context: u32,
        /// When, host wall clock ns.
        ts_ns: u64,
    },
    /// The segment is complete.
    Seal {
        /// Records in the segment.
        records: u64,
        /// When, host wall clock ns.
        ts_ns: u64,
    },
}

/// Appends one frame whose payload `write` produces.
pub fn put_frame(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
    let at = out.len();
    out.extend_from_slice(&[0; 8]);
    write(out);
    let payload = &out[at + 8..];
    let len = payload.len() as u32;
    let crc = crc32fast::hash(payload);
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    out[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    let s = &s[..s.len().min(MAX_STRING)];
    out.extend_from_slice(&(s.len() as u16).to_le_bytes());
    out.extend_from_slice(s);
}

impl Frame {
    /// Appends this frame.
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_frame(out, |p| match self {
            Frame::Header(h) => {
                p.push(kind::HEADER);
                p.extend_from_slice(MAGIC);
                p.extend_from_slice(&h.format_version.to_le_bytes());
                p.extend_from_slice(&h.abi.to_le_bytes());
                p.extend_from_slice(&h.pid.to_le_bytes());
                p.extend_from_slice(&h.world_rank.to_le_bytes());
                p.extend_from_slice(&h.local_rank.to_le_bytes());
                p.extend_from_slice(&h.world_size.to_le_bytes());
                p.extend_from_slice(&h.started_ns.to_le_bytes());
                p.extend_from_slice(&h.segment.to_le_bytes());
                put_str(p, h.host.as_bytes());
                put_str(p, h.job.as_bytes());
            }
            Frame::Comm(c) => {
                p.push(kind::COMM);
                p.extend_from_slice(&c.context.to_le_bytes());
                p.extend_from_slice(&c.comm_id.to_le_bytes());
                p.extend_from_slice(&c.n_nodes.to_le_bytes());
                p.extend_from_slice(&c.nranks.to_le_bytes());
                p.extend_from_slice(&c.rank.to_le_bytes());
                p.extend_from_slice(&c.mask.to_le_bytes());
                p.extend_from_slice(&c.abi.to_le_bytes());
                put_str(p, c.name.as_bytes());
            }
            Frame::String { pointer, text } => {
                p.push(kind::STRING);
                p.extend_from_slice(&pointer.to_le_bytes());
                put_str(p, text.as_bytes());
            }
            Frame::Records { thread, records } => {
                put_records_payload(p, *thread, records);
            }
            Frame::Drops { thread, dropped } => {
                p.push(kind::DROPS);
                p.extend_from_slice(&thread.to_le_bytes());
                p.extend_from_slice(&dropped.to_le_bytes());
            }
            Frame::Finalize { context, ts_ns } => {
                p.push(kind::FINALIZE);
                p.extend_from_slice(&context.to_le_bytes());
                p.extend_from_slice(&ts_ns.to_le_bytes());
            }
            Frame::Seal { records, ts_ns } => {
                p.push(kind::SEAL);
                p.extend_from_slice(&records.to_le_bytes());
                p.extend_from_slice(&ts_ns.to_le_bytes());
            }
        });
    }
}

/// Appends a records frame's payload (the writer's path, without building a
/// [`Frame`]).
pub fn put_records_payload(p: &mut Vec<u8>, thread: u32, records: &[Record]) {
    p.push(kind::RECORDS);
    p.extend_from_slice(&thread.to_le_bytes());
    p.extend_from_slice(&(records.len() as u32).to_le_bytes());
    for r in records {
        r.encode(p);
    }
}

/// A segment file, read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Segment {
    /// Its header.
    pub header: Header,
    /// Every frame after the header, in file order.
    pub frames: Vec<Frame>,
    /// Whether it ends with a seal frame.
    pub sealed: bool,
    /// Records in a cut last frame, skipped (1 when the frame's count could
    /// not be read: the partial record itself).
    pub torn_records: u64,
    /// Bytes of that cut frame.
    pub torn_bytes: u64,
}

/// A little-endian field reader over one payload.
struct Fields<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| "a frame ends inside a field".to_string())?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().unwrap_or_default(),
        ))
    }
    fn i32(&mut self) -> Result<i32, String> {
        Ok(self.u32()? as i32)
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().unwrap_or_default(),
        ))
    }
    fn i64(&mut self) -> Result<i64, String> {
        Ok(self.u64()? as i64)
    }
    fn str(&mut self) -> Result<String, String> {
        let n = u16::from_le_bytes(self.take(2)?.try_into().unwrap_or_default()) as usize;
        if n > MAX_STRING {
            return Err(format!("a string of {n} bytes (at most {MAX_STRING})"));
        }
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }
}

fn decode_payload(payload: &[u8]) -> Result<Frame, String> {
    let mut f = Fields {
        bytes: payload,
        at: 1,
    };
    let frame = match payload[0] {
        kind::HEADER => {
            if f.take(8)? != MAGIC {
                return Err("the header's magic is not CCNCCL01".into());
            }
            let format_version = f.u32()?;
            if format_version != FORMAT_VERSION {
                return Err(format!(
                    "format version {format_version} (this reader reads {FORMAT_VERSION})"
                ));
            }
            Frame::Header(Header {
                format_version,
                abi: f.u32()?,
                pid: f.u32()?,
                world_rank: f.i64()?,
                local_rank: f.i64()?,
                world_size: f.i64()?,
                started_ns: f.u64()?,
                segment: f.u32()?,
                host: f.str()?,
                job: f.str()?,
            })
        }
        kind::COMM => Frame::Comm(Comm {
            context: f.u32()?,
            comm_id: f.u64()?,
            n_nodes: f.i32()?,
            nranks: f.i32()?,
            rank: f.i32()?,
            mask: f.u32()?,
            abi: f.u32()?,
            name: f.str()?,
        }),
        kind::STRING => Frame::String {
            pointer: f.u64()?,
            text: f.str()?,
        },
        kind::RECORDS => {
            let thread = f.u32()?;
            let count = f.u32()? as usize;
            if count > (payload.len() - f.at) / MIN_ENCODED {
                return Err(format!(
                    "a records frame claims {count} records, more than its bytes hold"
                ));
            }
            let mut records = Vec::with_capacity(count);
            for _ in 0..count {
                let r = Record::decode(payload, &mut f.at)
                    .ok_or_else(|| "a record is cut or out of range".to_string())?;
                records.push(r);
            }
            Frame::Records { thread, records }
        }
        kind::DROPS => Frame::Drops {
            thread: f.u32()?,
            dropped: f.u64()?,
        },
        kind::FINALIZE => Frame::Finalize {
            context: f.u32()?,
            ts_ns: f.u64()?,
        },
        kind::SEAL => Frame::Seal {
            records: f.u64()?,
            ts_ns: f.u64()?,
        },
        other => return Err(format!("unknown frame kind {other}")),
    };
    if f.at != payload.len() {
        return Err("a frame has bytes after its fields".into());
    }
    Ok(frame)
}

/// What a cut last frame held: its record count when readable, else 1.
fn torn_count(rest: &[u8]) -> u64 {
    match (rest.get(8), rest.get(13..17)) {
        (Some(&kind::RECORDS), Some(n)) => {
            u64::from(u32::from_le_bytes(n.try_into().unwrap_or_default())).max(1)
        }
        _ => 1,
    }
}

/// The next frame of `rest`, as a follower of a growing file sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// A whole frame, and the bytes it took.
    Frame(Frame, usize),
    /// The bytes end inside the frame: wait for more (or, at the end of a
    /// finished file, a cut frame).
    Short,
    /// The frame is whole but its checksum does not match: at the end of a
    /// growing file, a write still in progress; before other frames,
    /// damage.
    BadChecksum(usize),
    /// The frame cannot be one (its length, or its fields).
    Damaged(String),
}

/// Reads the frame at the start of `rest`.
#[must_use]
pub fn next_frame(rest: &[u8]) -> Next {
    if rest.len() < 8 {
        return Next::Short;
    }
    let len = u32::from_le_bytes(rest[..4].try_into().unwrap_or_default()) as usize;
    let crc = u32::from_le_bytes(rest[4..8].try_into().unwrap_or_default());
    if len == 0 || len > MAX_FRAME {
        return Next::Damaged(format!("a frame of {len} bytes (1 to {MAX_FRAME})"));
    }
    let Some(payload) = rest.get(8..8 + len) else {
        return Next::Short;
    };
    if crc32fast::hash(payload) != crc {
        return Next::BadChecksum(8 + len);
    }
    match decode_payload(payload) {
        Ok(frame) => Next::Frame(frame, 8 + len),
        Err(e) => Next::Damaged(e),
    }
}

/// Reads a segment file's bytes.
///
/// # Errors
/// Not a segment (no header frame first), a frame over [`MAX_FRAME`], or
/// damage before the last frame: one line saying what and at which byte.
pub fn read_segment(bytes: &[u8]) -> Result<Segment, String> {
    let mut seg = Segment::default();
    let mut at = 0usize;
    let mut first = true;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let cut = |seg: &mut Segment| {
            seg.torn_records = torn_count(rest);
            seg.torn_bytes = rest.len() as u64;
        };
        let (frame, took) = match next_frame(rest) {
            Next::Frame(frame, took) => (frame, took),
            Next::Short if first => {
                return Err("not a commcanary NCCL log segment (its first frame is cut)".into());
            }
            Next::Short => {
                cut(&mut seg);
                break;
            }
            Next::BadChecksum(took) if took == rest.len() && !first => {
                cut(&mut seg);
                break;
            }
            Next::Damaged(_) if first => {
                return Err("not a commcanary NCCL log segment (no header frame)".into());
            }
            Next::BadChecksum(_) => {
                return Err(format!(
                    "byte {at}: a frame's checksum does not match its bytes"
                ));
            }
            Next::Damaged(e) => return Err(format!("byte {at}: {e}")),
        };
        match frame {
            Frame::Header(h) if first => seg.header = h,
            _ if first => return Err("not a commcanary NCCL log segment (no header frame)".into()),
            Frame::Header(_) => return Err(format!("byte {at}: a second header")),
            Frame::Seal { .. } => {
                seg.sealed = true;
                seg.frames.push(frame);
            }
            other => {
                if seg.sealed {
                    return Err(format!("byte {at}: a frame after the seal"));
                }
                seg.frames.push(other);
            }
        }
        first = false;
        at += took;
    }
    if first {
        return Err("not a commcanary NCCL log segment (empty)".into());
    }
    Ok(seg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::call;

    fn sample() -> (Vec<u8>, usize) {
        let mut out = Vec::new();
        Frame::Header(Header {
            format_version: 1,
            abi: 6,
            pid: 7,
            world_rank: 3,
            segment: 1,
            host: "h".into(),
            ..Header::default()
        })
        .encode(&mut out);
        Frame::Comm(Comm {
            context: 0,
            comm_id: 99,
            nranks: 4,
            rank: 3,
            name: "tp:1".into(),
            ..Comm::default()
        })
        .encode(&mut out);
        let records: Vec<Record> = (1..=5)
            .map(|i| Record {
                call: call::STOP,
                id: i,
                ts_ns: 10 * i,
                ..Record::default()
            })
            .collect();
        let before_last = out.len();
        Frame::Records { thread: 2, records }.encode(&mut out);
        (out, before_last)
    }

    #[test]
    fn a_segment_reads_back_and_a_cut_tail_is_counted() {
        let (bytes, before_last) = sample();
        let seg = read_segment(&bytes).unwrap();
        assert_eq!(seg.header.world_rank, 3);
        assert_eq!(seg.frames.len(), 2);
        assert!(!seg.sealed);
        assert_eq!(read_segment(&bytes[..before_last]).unwrap().torn_records, 0);
        for cut in before_last + 1..bytes.len() {
            let seg = read_segment(&bytes[..cut]).unwrap();
            assert_eq!(seg.frames.len(), 1, "cut at {cut}");
            assert_eq!(
                seg.torn_records,
                if cut >= before_last + 17 { 5 } else { 1 }
            );
        }
        let mut flipped = bytes.clone();
        flipped[before_last - 2] ^= 1;
        assert!(read_segment(&flipped).unwrap_err().contains("checksum"));
        let mut header_hit = bytes.clone();
        header_hit[12] ^= 1;
        assert!(read_segment(&header_hit).unwrap_err().contains("checksum"));
        assert!(read_segment(b"hello world, not a log").is_err());
        assert!(read_segment(&[]).is_err());
    }

    #[test]
    fn a_huge_claimed_count_is_refused_before_allocating() {
        let mut out = Vec::new();
        Frame::Header(Header {
            format_version: 1,
            ..Header::default()
        })
        .encode(&mut out);
        put_frame(&mut out, |p| {
            p.push(kind::RECORDS);
            p.extend_from_slice(&0u32.to_le_bytes());
            p.extend_from_slice(&u32::MAX.to_le_bytes());
        });
        Frame::Seal {
            records: 0,
            ts_ns: 0,
        }
        .encode(&mut out);
        assert!(read_segment(&out).unwrap_err().contains("claims"));
    }
}
