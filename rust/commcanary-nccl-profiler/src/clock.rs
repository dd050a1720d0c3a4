//! Time stamps: cheap on the calling thread, wall clock in the file.
//!
//! On x86-64 with an invariant TSC (`constant_tsc` and `nonstop_tsc` in
//! `/proc/cpuinfo`) a stamp is one `rdtsc` (a few nanoseconds, where
//! `clock_gettime` through the vDSO costs about 20); the writer thread turns
//! ticks into `CLOCK_REALTIME` nanoseconds with a line it fits from paired
//! readings, refitted every second over the whole run (so the error shrinks as
//! the run goes on). Elsewhere a stamp is the wall clock itself.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

static TSC: OnceLock<bool> = OnceLock::new();
static USE_TSC: AtomicBool = AtomicBool::new(false);

/// Host wall clock, ns.
#[inline]
pub fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn ticks() -> u64 {
    // SAFETY: `rdtsc` exists on every x86-64 processor.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn ticks() -> u64 {
    wall_ns()
}

/// Decides once whether stamps are ticks (before any event is stamped).
pub fn choose() {
    let tsc = *TSC.get_or_init(|| {
        cfg!(target_arch = "x86_64")
            && std::env::var("COMMCANARY_NCCL_CLOCK").map_or(true, |v| v != "wall")
            && std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|info| {
                let flags = info.lines().find(|l| l.starts_with("flags")).unwrap_or("");
                let has = |f: &str| flags.split_whitespace().any(|w| w == f);
                has("constant_tsc") && has("nonstop_tsc")
            })
    });
    USE_TSC.store(tsc, Ordering::Release);
}

/// A stamp for a record (ticks or ns; [`Fit::ns`] reads either).
#[inline]
pub fn stamp() -> u64 {
    if USE_TSC.load(Ordering::Relaxed) {
        ticks()
    } else {
        wall_ns()
    }
}

/// Ticks to wall-clock ns: a line through the first and latest paired readings.
pub struct Fit {
    tsc: bool,
    first: (u64, u64),
    slope: f64,
}

impl Fit {
    /// Starts a fit with one paired reading.
    pub fn new() -> Self {
        let tsc = USE_TSC.load(Ordering::Acquire);
        let mut f = Fit {
            tsc,
            first: (0, 0),
            slope: 1.0,
        };
        if tsc {
            // Two paired readings 20 ms apart give the first slope; the
            // writer thread makes the fit before it converts any stamp.
            f.first = f.pair();
            std::thread::sleep(std::time::Duration::from_millis(20));
            f.refit();
        }
        f
    }

    /// A (ticks, ns) pair read as close together as the clocks allow.
    fn pair(&self) -> (u64, u64) {
        let a = ticks();
        let ns = wall_ns();
        let b = ticks();
        (a / 2 + b / 2, ns)
    }

    /// Refits with a fresh pair: the longer the baseline, the better.
    pub fn refit(&mut self) {
        if !self.tsc {
            return;
        }
        let (t, n) = self.pair();
        let (t0, n0) = self.first;
        if t > t0 && n > n0 + 10_000_000 {
            self.slope = (n - n0) as f64 / (t - t0) as f64;
        }
    }

    /// The wall-clock ns of a stamp.
    #[inline]
    pub fn ns(&self, stamp: u64) -> u64 {
        if !self.tsc {
            return stamp;
        }
        let (t0, n0) = self.first;
        let delta = (stamp as i128 - t0 as i128) as f64 * self.slope;
        (n0 as i128 + delta as i128).max(0) as u64
    }
}

impl Default for Fit {
    fn default() -> Self {
        Self::new()
    }
}
