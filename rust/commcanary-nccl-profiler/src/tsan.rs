//! Happens-before notes for ThreadSanitizer, where the plugin hands heap
//! memory from one thread to another.
//!
//! The plugin synchronises with atomics and Rust's futex-based locks, which a
//! sanitized host program (the C harness built with `-fsanitize=thread`)
//! cannot see: the plugin is not instrumented, but `malloc`, `memcpy` and
//! `free` inside it are intercepted. Where memory changes hands (a thread's
//! ring announced to the writer and freed by it, a communicator's record read
//! by the writer), the plugin calls `__tsan_release`/`__tsan_acquire` when the
//! process has them (looked up once with `dlsym`); otherwise these are no-ops.
//! On the per-event path it costs one relaxed load ([`active`]); only in a
//! sanitized process does a ring slot's hand-over call the runtime too.

use std::ffi::c_void;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the process has ThreadSanitizer's runtime (set by [`detect`]).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Looks the runtime up once (at the first `init`).
pub fn detect() {
    ACTIVE.store(hooks().0.is_some(), Ordering::Release);
}

/// Whether to note ring slots' hand-overs too: one relaxed load on the
/// per-event path, false outside a sanitized process.
#[inline]
pub fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

type Hook = unsafe extern "C" fn(*mut c_void);

static HOOKS: OnceLock<(Option<Hook>, Option<Hook>)> = OnceLock::new();

fn hooks() -> &'static (Option<Hook>, Option<Hook>) {
    HOOKS.get_or_init(|| {
        let find = |name: &std::ffi::CStr| -> Option<Hook> {
            // SAFETY: `dlsym` with a NUL-terminated name; a non-null result is
            // the sanitizer runtime's `void f(void*)`.
            let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            // SAFETY: as above: the symbol's documented signature.
            (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, Hook>(p) })
        };
        (find(c"__tsan_acquire"), find(c"__tsan_release"))
    })
}

/// Everything this thread did before is visible to an [`acquire`] of `addr`.
pub fn release<T>(addr: *const T) {
    if let Some(f) = hooks().1 {
        // SAFETY: the runtime only records the address.
        unsafe { f(addr as *mut c_void) };
    }
}

/// Sees everything done before a [`release`] of `addr`.
pub fn acquire<T>(addr: *const T) {
    if let Some(f) = hooks().0 {
        // SAFETY: the runtime only records the address.
        unsafe { f(addr as *mut c_void) };
    }
}
