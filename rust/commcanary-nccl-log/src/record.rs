//! One call into the plugin as a fixed-size record, and its compact form in
//! the file.
//!
//! The plugin's calling threads fill [`Record`]s into their rings; the writer
//! thread encodes them ([`Record::encode`]) with only the payload words an
//! event uses. Payload words per event type are named by the constants of
//! [`slot`]; a 32-bit signed ABI field (a root, a peer, a rank) is stored as
//! its two's-complement `u32`.

use crate::event::kind;
use crate::varint;

/// The three calls NCCL makes per event.
pub mod call {
    /// `startEvent`: the descriptor's fields.
    pub const START: u8 = 1;
    /// `stopEvent`.
    pub const STOP: u8 = 2;
    /// `recordEventState`: the state, and its arguments when given.
    pub const STATE: u8 = 3;
}

/// [`Record::flags`] bits.
pub mod flag {
    /// A state record whose `eStateArgs` pointer was not null.
    pub const HAS_ARGS: u8 = 1;
    /// A v4 descriptor (no API events; `coll`/`p2p` have no `parentGroup`).
    pub const ABI_V4: u8 = 2;
}

/// Payload words per event type (start records) and per state.
pub mod slot {
    /// `coll`: `seqNumber`.
    pub const COLL_SEQ: usize = 0;
    /// `coll`: `func` (a string pointer).
    pub const COLL_FUNC: usize = 1;
    /// `coll`: `count`.
    pub const COLL_COUNT: usize = 2;
    /// `coll`: `root`.
    pub const COLL_ROOT: usize = 3;
    /// `coll`: `datatype` (a string pointer).
    pub const COLL_DATATYPE: usize = 4;
    /// `coll`: `nChannels`.
    pub const COLL_CHANNELS: usize = 5;
    /// `coll`: `nWarps`.
    pub const COLL_WARPS: usize = 6;
    /// `coll`: `algo` (a string pointer).
    pub const COLL_ALGO: usize = 7;
    /// `coll`: `proto` (a string pointer).
    pub const COLL_PROTO: usize = 8;
    /// `coll`/`p2p`: `parentGroup` (v5 onwards; the parent is the API event).
    pub const COLL_PARENT_GROUP: usize = 9;
    /// `coll`: `sendBuff`.
    pub const COLL_SEND_BUFF: usize = 10;
    /// `p2p`: `func`.
    pub const P2P_FUNC: usize = 0;
    /// `p2p`: `datatype`.
    pub const P2P_DATATYPE: usize = 1;
    /// `p2p`: `count`.
    pub const P2P_COUNT: usize = 2;
    /// `p2p`: `peer`.
    pub const P2P_PEER: usize = 3;
    /// `p2p`: `nChannels`.
    pub const P2P_CHANNELS: usize = 4;
    /// `p2p`: `parentGroup`.
    pub const P2P_PARENT_GROUP: usize = 5;
    /// `p2p`: `buff`.
    pub const P2P_BUFF: usize = 6;
    /// `proxyOp`: `pid` of the originating process (PXN).
    pub const PROXY_OP_PID: usize = 0;
    /// `proxyOp`: `channelId`.
    pub const PROXY_OP_CHANNEL: usize = 1;
    /// `proxyOp`: `peer`.
    pub const PROXY_OP_PEER: usize = 2;
    /// `proxyOp`: `nSteps`.
    pub const PROXY_OP_STEPS: usize = 3;
    /// `proxyOp`: `chunkSize`.
    pub const PROXY_OP_CHUNK: usize = 4;
    /// `proxyOp`: `isSend`.
    pub const PROXY_OP_IS_SEND: usize = 5;
    /// `proxyStep`: `step`.
    pub const PROXY_STEP_STEP: usize = 0;
    /// `kernelCh`: `channelId`.
    pub const KERNEL_CH_CHANNEL: usize = 0;
    /// `kernelCh`: `pTimer`, the GPU's start stamp.
    pub const KERNEL_CH_TIMER: usize = 1;
    /// `netPlugin`: `id`.
    pub const NET_PLUGIN_ID: usize = 0;
    /// `netPlugin`: `data`.
    pub const NET_PLUGIN_DATA: usize = 1;
    /// `groupApi`: `graphCaptured`.
    pub const GROUP_API_GRAPH: usize = 0;
    /// `groupApi`: `groupDepth`.
    pub const GROUP_API_DEPTH: usize = 1;
    /// `collApi`/`p2pApi`: `func`.
    pub const API_FUNC: usize = 0;
    /// `collApi`/`p2pApi`: `count`.
    pub const API_COUNT: usize = 1;
    /// `collApi`/`p2pApi`: `datatype`.
    pub const API_DATATYPE: usize = 2;
    /// `collApi`: `root`; `p2pApi`: `stream`.
    pub const API_ROOT_OR_STREAM: usize = 3;
    /// `collApi`: `stream`; `p2pApi`: `graphCaptured`.
    pub const API_STREAM_OR_GRAPH: usize = 4;
    /// `collApi`: `graphCaptured`.
    pub const COLL_API_GRAPH: usize = 5;
    /// `kernelLaunch`: `stream`.
    pub const KERNEL_LAUNCH_STREAM: usize = 0;
    /// `ceColl`: `seqNumber`.
    pub const CE_COLL_SEQ: usize = 0;
    /// `ceColl`: `func`.
    pub const CE_COLL_FUNC: usize = 1;
    /// `ceColl`: `count`.
    pub const CE_COLL_COUNT: usize = 2;
    /// `ceColl`: `root`.
    pub const CE_COLL_ROOT: usize = 3;
    /// `ceColl`: `datatype`.
    pub const CE_COLL_DATATYPE: usize = 4;
    /// `ceColl`: `syncStrategy`.
    pub const CE_COLL_SYNC: usize = 5;
    /// `ceColl`: `intraBatchSync`.
    pub const CE_COLL_INTRA_SYNC: usize = 6;
    /// `ceColl`: `batchSize`.
    pub const CE_COLL_BATCH_SIZE: usize = 7;
    /// `ceColl`: `numBatches`.
    pub const CE_COLL_BATCHES: usize = 8;
    /// `ceColl`: `ceSeqNum`.
    pub const CE_COLL_CE_SEQ: usize = 9;
    /// `ceColl`: `stream`.
    pub const CE_COLL_STREAM: usize = 10;
    /// `ceCollSync`: `isComplete`.
    pub const CE_SYNC_COMPLETE: usize = 0;
    /// `ceCollSync`: `nRanks`.
    pub const CE_SYNC_RANKS: usize = 1;
    /// `ceCollBatch`: `numOps`.
    pub const CE_BATCH_OPS: usize = 0;
    /// `ceCollBatch`: `totalBytes`.
    pub const CE_BATCH_BYTES: usize = 1;
    /// `ceCollBatch`: `useIntraSync`.
    pub const CE_BATCH_INTRA_SYNC: usize = 2;
    /// A state's argument: `transSize`, `appendedProxyOps`, `data` or
    /// `pTimer`, by the state.
    pub const STATE_ARG: usize = 0;
}

/// Payload words in a record.
pub const PAYLOAD_WORDS: usize = 11;

/// One call into the plugin (128 bytes: two cache lines).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Record {
    /// [`call`]: start, stop or state.
    pub call: u8,
    /// Event type bit ([`crate::event::kind`]); start records only.
    pub kind: u8,
    /// The state ([`crate::event::state`]); state records only.
    pub state: u8,
    /// [`flag`] bits.
    pub flags: u8,
    /// The communicator's index in this process (start records).
    pub context: u32,
    /// The descriptor's originating `rank` (start records).
    pub rank: i32,
    /// Unused; keeps the layout at 128 bytes.
    pub reserved: u32,
    /// The event's handle, unique in the process.
    pub id: u64,
    /// Host wall clock (`CLOCK_REALTIME`), ns.
    pub ts_ns: u64,
    /// The descriptor's `parentObj`: a handle this plugin returned, or 0.
    pub parent: u64,
    /// Type-specific words ([`slot`]).
    pub payload: [u64; PAYLOAD_WORDS],
}

/// The payload slots of a start record of `kind` that hold C string
/// pointers, which the writer resolves to text once per pointer.
#[must_use]
pub fn string_slots(kind: u8) -> &'static [usize] {
    match kind {
        kind::COLL => &[
            slot::COLL_FUNC,
            slot::COLL_DATATYPE,
            slot::COLL_ALGO,
            slot::COLL_PROTO,
        ],
        kind::P2P => &[slot::P2P_FUNC, slot::P2P_DATATYPE],
        kind::COLL_API | kind::P2P_API => &[slot::API_FUNC, slot::API_DATATYPE],
        kind::CE_COLL => &[
            slot::CE_COLL_FUNC,
            slot::CE_COLL_DATATYPE,
            slot::CE_COLL_SYNC,
        ],
        _ => &[],
    }
}

/// The smallest encoded record: four byte fields, five one-byte numbers and
/// the payload length.
pub const MIN_ENCODED: usize = 10;

impl Record {
    /// Appends the record's compact form: the four byte fields, then the
    /// numbers as LEB128, then the payload words up to the last non-zero one.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[self.call, self.kind, self.state, self.flags]);
        varint::put(out, u64::from(self.context));
        varint::put_signed(out, i64::from(self.rank));
        varint::put(out, self.id);
        varint::put(out, self.ts_ns);
        varint::put(out, self.parent);
        let used = self
            .payload
            .iter()
            .rposition(|&w| w != 0)
            .map_or(0, |i| i + 1);
        out.push(used as u8);
        for &w in &self.payload[..used] {
            varint::put(out, w);
        }
    }

    /// Reads one record at `*at`, advancing it; `None` when the bytes end
    /// inside it or a field is out of range.
    #[must_use]
    pub fn decode(bytes: &[u8], at: &mut usize) -> Option<Self> {
        let head = bytes.get(*at..*at + 4)?;
        let mut r = Record {
            call: head[0],
            kind: head[1],
            state: head[2],
            flags: head[3],
            ..Record::default()
        };
        *at += 4;
        r.context = u32::try_from(varint::get(bytes, at)?).ok()?;
        r.rank = i32::try_from(varint::get_signed(bytes, at)?).ok()?;
        r.id = varint::get(bytes, at)?;
        r.ts_ns = varint::get(bytes, at)?;
        r.parent = varint::get(bytes, at)?;
        let used = usize::from(*bytes.get(*at)?);
        *at += 1;
        if used > PAYLOAD_WORDS {
            return None;
        }
        for w in &mut r.payload[..used] {
            *w = varint::get(bytes, at)?;
        }
        Some(r)
    }

    /// A 32-bit signed ABI field stored in a payload word.
    #[must_use]
    pub fn signed(&self, slot: usize) -> i32 {
        self.payload[slot] as u32 as i32
    }
}

/// Stores a 32-bit signed ABI field in a payload word.
#[must_use]
pub fn from_signed(v: i32) -> u64 {
    u64::from(v as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_is_two_cache_lines() {
        assert_eq!(std::mem::size_of::<Record>(), 128);
    }

    #[test]
    fn records_round_trip_and_a_cut_one_is_refused() {
        let mut r = Record {
            call: call::START,
            kind: kind::COLL,
            context: 3,
            rank: -1,
            id: (5 << 40) | 77,
            ts_ns: 1_765_000_000_123_456_789,
            parent: 9,
            ..Record::default()
        };
        r.payload[slot::COLL_SEQ] = 41;
        r.payload[slot::COLL_ROOT] = from_signed(-1);
        let stop = Record {
            call: call::STOP,
            id: 12,
            ts_ns: 1,
            ..Record::default()
        };
        let mut out = Vec::new();
        r.encode(&mut out);
        stop.encode(&mut out);
        let mut at = 0;
        let back = Record::decode(&out, &mut at).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.signed(slot::COLL_ROOT), -1);
        assert_eq!(Record::decode(&out, &mut at).unwrap(), stop);
        assert_eq!(at, out.len());
        for cut in 0..out.len() - 1 {
            let mut at = 0;
            let first = Record::decode(&out[..cut], &mut at);
            assert!(first.is_none() || at <= cut);
        }
    }
}
