//! A bounded single-producer, single-consumer ring of records.
//!
//! Each NCCL calling thread owns one ring ([`crate::threads`]) and is its only
//! producer; the writer thread is its only consumer. A push is two relaxed
//! loads, an acquire load, a 128-byte copy and a release store: no lock, no
//! system call, no wait. A full ring refuses the record and counts it.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use commcanary_nccl_log::Record;

/// Keeps a hot atomic on its own cache line.
#[repr(align(64))]
struct Padded<T>(T);

/// One thread's ring.
pub struct Ring {
    slots: Box<[UnsafeCell<Record>]>,
    mask: u64,
    /// Next slot the producer writes (only the producer stores it).
    head: Padded<AtomicU64>,
    /// Next slot the consumer reads (only the consumer stores it).
    tail: Padded<AtomicU64>,
    /// Records refused because the ring was full (producer stores).
    dropped: AtomicU64,
    /// Handles issued by this thread (producer only).
    issued: AtomicU64,
    /// This thread's number in the process, from 0.
    pub thread: u32,
    /// False once the owning thread has exited.
    alive: AtomicBool,
}

// SAFETY: a slot is written only by the producer while it is outside
// `tail..head` and read only by the consumer while inside it; `head`'s
// release store publishes a slot's bytes before the consumer's acquire load
// sees it, and `tail`'s release store hands a slot back the same way.
unsafe impl Sync for Ring {}
// SAFETY: the ring owns its slots; see `Sync`.
unsafe impl Send for Ring {}

impl Ring {
    /// A ring of at least `capacity` records (rounded up to a power of two).
    #[must_use]
    pub fn new(capacity: usize, thread: u32) -> Self {
        let cap = capacity.clamp(2, 1 << 20).next_power_of_two();
        let slots: Box<[UnsafeCell<Record>]> = (0..cap)
            .map(|_| UnsafeCell::new(Record::default()))
            .collect();
        // Touch every page now, on registration, so the first lap of the ring
        // takes no page faults on the calling thread.
        for slot in slots.iter().step_by(4096 / std::mem::size_of::<Record>()) {
            // SAFETY: the ring is not shared yet; a volatile write keeps the
            // page from staying a lazily mapped zero page.
            unsafe { std::ptr::write_volatile(slot.get(), Record::default()) };
        }
        Self {
            slots,
            mask: cap as u64 - 1,
            head: Padded(AtomicU64::new(0)),
            tail: Padded(AtomicU64::new(0)),
            dropped: AtomicU64::new(0),
            issued: AtomicU64::new(0),
            thread,
            alive: AtomicBool::new(true),
        }
    }

    /// A new handle, unique in the process and never 0: the thread's number
    /// in the top 24 bits, a count below. Producer only.
    #[inline]
    pub fn next_id(&self) -> u64 {
        let n = self.issued.load(Ordering::Relaxed) + 1;
        self.issued.store(n, Ordering::Relaxed);
        (u64::from(self.thread) + 1) << 40 | (n & ((1 << 40) - 1))
    }

    /// Appends `r`, or counts it dropped when the ring is full. Producer only.
    #[inline]
    pub fn push(&self, r: &Record) -> bool {
        let head = self.head.0.load(Ordering::Relaxed);
        let tail = self.tail.0.load(Ordering::Acquire);
        if head.wrapping_sub(tail) > self.mask {
            let d = self.dropped.load(Ordering::Relaxed);
            self.dropped.store(d + 1, Ordering::Relaxed);
            return false;
        }
        let slot = &self.slots[(head & self.mask) as usize];
        let noted = crate::tsan::active();
        if noted {
            crate::tsan::acquire(slot.get());
        }
        // SAFETY: `head` is outside `tail..head`, so the consumer does not
        // read this slot until the release store below publishes it.
        unsafe { *slot.get() = *r };
        if noted {
            crate::tsan::release(slot.get());
        }
        self.head.0.store(head.wrapping_add(1), Ordering::Release);
        true
    }

    /// Moves every published record into `out`. Consumer only.
    pub fn drain(&self, out: &mut Vec<Record>) -> usize {
        let tail = self.tail.0.load(Ordering::Relaxed);
        let head = self.head.0.load(Ordering::Acquire);
        let n = head.wrapping_sub(tail);
        let noted = crate::tsan::active();
        for i in 0..n {
            let slot = &self.slots[(tail.wrapping_add(i) & self.mask) as usize];
            if noted {
                crate::tsan::acquire(slot.get());
            }
            // SAFETY: the slot is inside `tail..head`: published by the
            // producer's release store, which the acquire load above saw.
            out.push(unsafe { *slot.get() });
            if noted {
                crate::tsan::release(slot.get());
            }
        }
        self.tail.0.store(head, Ordering::Release);
        n as usize
    }

    /// Records refused so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Marks the owning thread gone: once drained, the ring can be freed.
    pub fn retire(&self) {
        self.alive.store(false, Ordering::Release);
    }

    /// Whether the owning thread is gone and nothing is left to drain.
    pub fn finished(&self) -> bool {
        !self.alive.load(Ordering::Acquire)
            && self.head.0.load(Ordering::Acquire) == self.tail.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_full_ring_counts_what_it_refuses() {
        let ring = Ring::new(4, 0);
        for i in 0..6 {
            ring.push(&Record {
                id: i,
                ..Record::default()
            });
        }
        assert_eq!(ring.dropped(), 2);
        let mut out = Vec::new();
        assert_eq!(ring.drain(&mut out), 4);
        assert_eq!(out.iter().map(|r| r.id).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert!(ring.push(&Record::default()));
    }

    #[test]
    fn a_producer_and_a_consumer_on_two_threads_lose_and_reorder_nothing() {
        let ring = Arc::new(Ring::new(64, 3));
        let producer = {
            let ring = Arc::clone(&ring);
            std::thread::spawn(move || {
                let mut sent = Vec::new();
                for _ in 0..200_000 {
                    let id = ring.next_id();
                    if ring.push(&Record {
                        id,
                        ts_ns: id ^ 0x5555,
                        ..Record::default()
                    }) {
                        sent.push(id);
                    }
                }
                ring.retire();
                sent
            })
        };
        let mut got = Vec::new();
        while !ring.finished() {
            ring.drain(&mut got);
        }
        let sent = producer.join().unwrap();
        ring.drain(&mut got);
        assert_eq!(got.iter().map(|r| r.id).collect::<Vec<_>>(), sent);
        assert!(got.iter().all(|r| r.ts_ns == r.id ^ 0x5555));
        assert_eq!(sent.len() as u64 + ring.dropped(), 200_000);
        assert_eq!(sent[0] >> 40, 4);
    }
}
