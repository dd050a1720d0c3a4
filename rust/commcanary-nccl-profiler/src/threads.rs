//! Which ring a calling thread writes: one per thread, made on its first
//! event and announced to the writer through a lock-free list.
//!
//! Registration is a thread-local's first use plus a compare-and-swap push;
//! the writer takes the whole list with one swap. A thread's exit marks its
//! ring retired; the writer frees it once drained.

use std::ptr;
use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::ring::Ring;

/// Ring capacity for threads registered from now on (records).
pub static RING_CAPACITY: AtomicUsize = AtomicUsize::new(crate::config::DEFAULT_RING);
/// Records lost because the calling thread was exiting (no ring left).
pub static LOST: AtomicU64 = AtomicU64::new(0);

static THREADS: AtomicU32 = AtomicU32::new(0);

struct Node {
    ring: Arc<Ring>,
    next: *mut Node,
}

static NEW_RINGS: AtomicPtr<Node> = AtomicPtr::new(ptr::null_mut());

struct Local {
    ring: Arc<Ring>,
}

impl Local {
    fn register() -> Self {
        let thread = THREADS.fetch_add(1, Ordering::Relaxed);
        let ring = Arc::new(Ring::new(RING_CAPACITY.load(Ordering::Relaxed), thread));
        let node = Box::into_raw(Box::new(Node {
            ring: Arc::clone(&ring),
            next: ptr::null_mut(),
        }));
        let mut head = NEW_RINGS.load(Ordering::Relaxed);
        loop {
            // SAFETY: `node` is ours until the exchange below publishes it.
            unsafe { (*node).next = head };
            match NEW_RINGS.compare_exchange_weak(head, node, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => head = now,
            }
        }
        crate::tsan::release(&NEW_RINGS);
        Self { ring }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        crate::tsan::release(Arc::as_ptr(&self.ring));
        self.ring.retire();
    }
}

thread_local! {
    static LOCAL: Local = Local::register();
}

/// Runs `f` on the calling thread's ring; `None` (and the record counted
/// lost) when the thread is past its thread-locals' destruction.
#[inline]
pub fn with_ring<R>(f: impl FnOnce(&Ring) -> R) -> Option<R> {
    let out = LOCAL.try_with(|l| f(&l.ring)).ok();
    if out.is_none() {
        LOST.fetch_add(1, Ordering::Relaxed);
    }
    out
}

/// Every ring registered since the last call (the writer's side).
pub fn take_new() -> Vec<Arc<Ring>> {
    let mut node = NEW_RINGS.swap(ptr::null_mut(), Ordering::Acquire);
    crate::tsan::acquire(&NEW_RINGS);
    let mut out = Vec::new();
    while !node.is_null() {
        // SAFETY: the swap took the whole list; each node was made by
        // `Box::into_raw` and is reachable from this list only.
        let boxed = unsafe { Box::from_raw(node) };
        node = boxed.next;
        out.push(boxed.ring);
    }
    out.reverse();
    out
}
