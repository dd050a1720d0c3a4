//! The identity of an occurrence, hashed to seed its noise.
//!
//! An occurrence's identity is the canonical JSON of its arrival offsets, its
//! signature's identity fields and its occurrence number; the first eight
//! bytes of its SHA-256 (big-endian) seed [`super::cost::uniforms`]. So noise
//! depends on what ran, not on how the compiler grouped events.

use sha2::{Digest, Sha256};

use crate::json::canon;
use crate::pyfloat::round;
use crate::trace::Signature;

/// Canonical identity JSON of an occurrence, split around the parts that
/// vary: `{"arrival_offsets_us":[…],` + middle + `"occurrence":N,` + tail.
pub(super) struct IdentityTemplate {
    middle: Vec<u8>,
    tail: Vec<u8>,
}

pub(super) fn identity_template(sig: &Signature) -> IdentityTemplate {
    // Keys sorted: arrival_offsets_us, channel, group, message_sequence,
    // occurrence, op, phase, ranks, receiver_rank, reduction_op, root_rank,
    // sender_rank, tag.
    let mut middle = Vec::new();
    if let Some(c) = &sig.channel {
        middle.extend_from_slice(b"\"channel\":");
        canon::write_wtf8(&mut middle, c);
        middle.push(b',');
    }
    middle.extend_from_slice(b"\"group\":");
    canon::write_wtf8(&mut middle, &sig.group);
    middle.push(b',');
    if let Some(m) = sig.message_sequence {
        middle.extend_from_slice(b"\"message_sequence\":");
        canon::write_i64(&mut middle, m);
        middle.push(b',');
    }
    let mut tail = Vec::new();
    tail.extend_from_slice(b",\"op\":");
    canon::write_wtf8(&mut tail, &sig.op);
    tail.extend_from_slice(b",\"phase\":");
    canon::write_wtf8(&mut tail, &sig.phase);
    tail.extend_from_slice(b",\"ranks\":[");
    for (i, r) in sig.ranks.iter().enumerate() {
        if i > 0 {
            tail.push(b',');
        }
        canon::write_i64(&mut tail, *r);
    }
    tail.push(b']');
    if let Some(r) = sig.receiver_rank {
        tail.extend_from_slice(b",\"receiver_rank\":");
        canon::write_i64(&mut tail, r);
    }
    if let Some(r) = &sig.reduction_op {
        tail.extend_from_slice(b",\"reduction_op\":");
        tail.extend_from_slice(r);
    }
    if let Some(r) = &sig.root_rank {
        tail.extend_from_slice(b",\"root_rank\":");
        tail.extend_from_slice(r);
    }
    if let Some(s) = sig.sender_rank {
        tail.extend_from_slice(b",\"sender_rank\":");
        canon::write_i64(&mut tail, s);
    }
    if let Some(t) = &sig.tag {
        tail.extend_from_slice(b",\"tag\":");
        canon::write_wtf8(&mut tail, t);
    }
    tail.push(b'}');
    IdentityTemplate { middle, tail }
}

impl IdentityTemplate {
    /// The identity hash of occurrence `occurrence` with `offsets`; `buf` is
    /// scratch space reused across calls.
    #[inline]
    pub(super) fn hash(&self, offsets: &[f64], occurrence: u64, buf: &mut Vec<u8>) -> u64 {
        buf.clear();
        buf.extend_from_slice(b"{\"arrival_offsets_us\":[");
        for (i, o) in offsets.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            canon::write_f64_rounded(buf, round(*o, 9), 9);
        }
        buf.extend_from_slice(b"],");
        buf.extend_from_slice(&self.middle);
        buf.extend_from_slice(b"\"occurrence\":");
        canon::write_i64(buf, occurrence as i64);
        buf.extend_from_slice(&self.tail);
        let digest = Sha256::digest(&buf[..]);
        let mut head = [0u8; 8];
        head.copy_from_slice(&digest[..8]);
        u64::from_be_bytes(head)
    }
}
