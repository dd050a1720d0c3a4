//! The writer thread: drains every ring into segmented log files.
//!
//! It wakes every millisecond while events flow (up to 20 ms when idle),
//! resolves each new string pointer once, writes whole frames with one
//! `write` per wake (so a killed process leaves at most a cut last frame),
//! and seals a segment (a seal frame, then `fdatasync`) past the size limit,
//! when the last communicator is finalized, and at exit. Errors writing are
//! reported once on stderr; events are then drained and counted, not kept.

use std::collections::HashSet;
use std::ffi::{CStr, c_char};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use commcanary_nccl_log::frame::{Comm, Frame, Header, put_frame, put_records_payload};
use commcanary_nccl_log::record::{call, string_slots};
use commcanary_nccl_log::{Record, frame};

use crate::config::{self, Config};
use crate::ring::Ring;
use crate::threads;

/// Records per records frame.
const FRAME_RECORDS: usize = 4096;

/// What the exported functions and the writer share.
pub struct Shared {
    /// Settings.
    pub config: Config,
    /// Communicators, in `init` order (their index is their context).
    comms: Mutex<Vec<Comm>>,
    /// `finalize` calls not yet written: (context, ns).
    finalized: Mutex<Vec<(u32, u64)>>,
    /// Communicators initialised and not finalized.
    pub live: AtomicU32,
    /// The ABI of the first `init`.
    pub abi: AtomicU32,
    flush_requested: AtomicU64,
    flush_done: AtomicU64,
    stop: AtomicBool,
    stopped: AtomicBool,
    started_ns: u64,
}

static SHARED: OnceLock<Shared> = OnceLock::new();

use crate::clock::{Fit, wall_ns as now_ns};

/// The shared state, started (with its writer thread) on first use.
pub fn shared(abi: u32) -> &'static Shared {
    let mut fresh = false;
    let s = SHARED.get_or_init(|| {
        fresh = true;
        let config = Config::read(&config::env);
        for w in &config.warnings {
            eprintln!("commcanary NCCL profiler: {w}");
        }
        threads::RING_CAPACITY.store(config.ring, Ordering::Relaxed);
        crate::clock::choose();
        crate::tsan::detect();
        Shared {
            config,
            comms: Mutex::new(Vec::new()),
            finalized: Mutex::new(Vec::new()),
            live: AtomicU32::new(0),
            abi: AtomicU32::new(abi),
            flush_requested: AtomicU64::new(0),
            flush_done: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            started_ns: now_ns(),
        }
    });
    if fresh {
        WRITER_PID.store(std::process::id(), Ordering::Release);
        pin_library();
        let spawned = std::thread::Builder::new()
            .name("commcanary-nccl".into())
            .spawn(move || Writer::new(s).run());
        if spawned.is_err() {
            eprintln!(
                "commcanary NCCL profiler: could not start the writer thread; nothing is logged"
            );
            s.stopped.store(true, Ordering::Release);
        }
        // SAFETY: `at_exit` is an `extern "C" fn()` in this library, which
        // `pin_library` keeps mapped until the process exits.
        unsafe { libc::atexit(at_exit) };
    }
    s
}

/// Keeps this library loaded for the life of the process: NCCL `dlclose`s
/// its profiler plugin when the last communicator goes, but the writer
/// thread and the exit hook run code here after that. Opening our own file
/// again with `RTLD_NODELETE` makes the later `dlclose` leave it mapped.
fn pin_library() {
    // SAFETY: `Dl_info` is plain pointers, for which all-zero is valid.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let here = pin_library as *const () as *const libc::c_void;
    // SAFETY: `dladdr` fills `info` for an address in a loaded object; the
    // name it gives lives as long as the object.
    let found = unsafe { libc::dladdr(here, &mut info) } != 0 && !info.dli_fname.is_null();
    if found {
        // SAFETY: a NUL-terminated path from `dladdr`; NOLOAD only takes a
        // reference to the already loaded object.
        let handle = unsafe {
            libc::dlopen(
                info.dli_fname,
                libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE,
            )
        };
        if handle.is_null() {
            eprintln!(
                "commcanary NCCL profiler: could not pin the library; unloading it early may crash at exit"
            );
        }
    }
}

/// The process that started the writer (a forked child has no writer).
static WRITER_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn in_writer_process() -> bool {
    WRITER_PID.load(Ordering::Acquire) == std::process::id()
}

extern "C" fn at_exit() {
    if let Some(s) = SHARED.get() {
        if !in_writer_process() {
            return;
        }
        s.stop.store(true, Ordering::Release);
        wait(|| s.stopped.load(Ordering::Acquire));
    }
}

/// Waits up to two seconds for `done`.
fn wait(done: impl Fn() -> bool) {
    for _ in 0..2000 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

impl Shared {
    /// The communicators (the writer's side of the hand-over).
    fn comms(&self) -> std::sync::MutexGuard<'_, Vec<Comm>> {
        let guard = self
            .comms
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        crate::tsan::acquire(&self.comms);
        guard
    }

    /// The `finalize` calls not yet written.
    fn take_finalized(&self) -> Vec<(u32, u64)> {
        let mut guard = self
            .finalized
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        crate::tsan::acquire(&self.finalized);
        std::mem::take(&mut *guard)
    }

    /// Records a communicator; returns its context index.
    pub fn add_comm(&self, mut comm: Comm) -> u32 {
        let mut comms = self
            .comms
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        comm.context = comms.len() as u32;
        let context = comm.context;
        comms.push(comm);
        crate::tsan::release(&self.comms);
        self.live.fetch_add(1, Ordering::AcqRel);
        context
    }

    /// Notes a `finalize`, and waits (at most two seconds) until the writer
    /// has written everything drained so far.
    pub fn finalize(&self, context: u32) {
        self.finalized
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((context, now_ns()));
        crate::tsan::release(&self.finalized);
        self.live.fetch_sub(1, Ordering::AcqRel);
        if !in_writer_process() {
            return;
        }
        let ticket = self.flush_requested.fetch_add(1, Ordering::AcqRel) + 1;
        wait(|| {
            self.flush_done.load(Ordering::Acquire) >= ticket
                || self.stopped.load(Ordering::Acquire)
        });
    }
}

/// The open segment.
struct SegmentFile {
    file: File,
    bytes: u64,
    records: u64,
}

struct Writer {
    s: &'static Shared,
    rings: Vec<Arc<Ring>>,
    drops_written: Vec<(u32, u64)>,
    strings: Vec<(u64, String)>,
    seen: HashSet<u64>,
    comms_written: usize,
    /// Communicators and strings in the file so far (a new segment repeats them).
    comms_flushed: usize,
    strings_flushed: usize,
    segment: Option<SegmentFile>,
    next_segment: u32,
    header: Header,
    buf: Vec<u8>,
    batch: Vec<Record>,
    pending_records: u64,
    failed: bool,
    fit: Fit,
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into())
}

/// Reads the C string at `pointer` (at most [`frame::MAX_STRING`] bytes).
fn c_text(pointer: u64) -> String {
    if pointer == 0 {
        return String::new();
    }
    // SAFETY: NCCL's descriptor strings (`func`, `datatype`, `algo`, `proto`,
    // `syncStrategy`) point at its static name tables, valid for the life of
    // the library; the read stops at the first NUL.
    let text = unsafe { CStr::from_ptr(pointer as *const c_char) }.to_bytes();
    String::from_utf8_lossy(&text[..text.len().min(frame::MAX_STRING)]).into_owned()
}

impl Writer {
    fn new(s: &'static Shared) -> Self {
        let header = Header {
            format_version: frame::FORMAT_VERSION,
            abi: s.abi.load(Ordering::Relaxed),
            pid: std::process::id(),
            world_rank: config::env_int("RANK"),
            local_rank: config::env_int("LOCAL_RANK"),
            world_size: config::env_int("WORLD_SIZE"),
            started_ns: s.started_ns,
            segment: 0,
            host: host_name(),
            job: s.config.job.clone(),
        };
        Self {
            s,
            rings: Vec::new(),
            drops_written: Vec::new(),
            strings: Vec::new(),
            seen: HashSet::new(),
            comms_written: 0,
            comms_flushed: 0,
            strings_flushed: 0,
            segment: None,
            next_segment: 1,
            header,
            buf: Vec::with_capacity(1 << 20),
            batch: Vec::with_capacity(FRAME_RECORDS),
            pending_records: 0,
            failed: false,
            fit: Fit::new(),
        }
    }

    fn path(&self, index: u32) -> PathBuf {
        let h = &self.header;
        self.s
            .config
            .dir
            .join(format!("{}-{}.{index:06}.ccnl", h.host, h.pid))
    }

    fn fail(&mut self, what: &str, e: &std::io::Error) {
        if !self.failed {
            eprintln!(
                "commcanary NCCL profiler: {what}: {e}; events are counted, no longer logged"
            );
        }
        self.failed = true;
        self.segment = None;
    }

    /// Opens the next segment: its header, then every communicator and string so far.
    fn open(&mut self) {
        if self.failed || self.segment.is_some() {
            return;
        }
        if let Err(e) = std::fs::create_dir_all(&self.s.config.dir) {
            return self.fail(&format!("{}", self.s.config.dir.display()), &e);
        }
        let path = self.path(self.next_segment);
        let file = match OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) => return self.fail(&format!("{}", path.display()), &e),
        };
        self.header.segment = self.next_segment;
        self.header.abi = self.s.abi.load(Ordering::Relaxed);
        self.next_segment += 1;
        let mut head = Vec::new();
        Frame::Header(self.header.clone()).encode(&mut head);
        let comms = self.s.comms().clone();
        for c in &comms[..self.comms_flushed.min(comms.len())] {
            Frame::Comm(c.clone()).encode(&mut head);
        }
        for (pointer, text) in &self.strings[..self.strings_flushed] {
            Frame::String {
                pointer: *pointer,
                text: text.clone(),
            }
            .encode(&mut head);
        }
        self.segment = Some(SegmentFile {
            file,
            bytes: 0,
            records: 0,
        });
        self.buf.splice(0..0, head);
    }

    fn seal(&mut self) {
        self.write_out();
        if let Some(mut seg) = self.segment.take() {
            let mut tail = Vec::new();
            Frame::Seal {
                records: seg.records,
                ts_ns: now_ns(),
            }
            .encode(&mut tail);
            let _ = seg
                .file
                .write_all(&tail)
                .and_then(|()| seg.file.sync_data());
        }
    }

    fn write_out(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if self.segment.is_none() {
            self.open();
        }
        let result = match &mut self.segment {
            Some(seg) => seg.file.write_all(&self.buf).map(|()| {
                seg.bytes += self.buf.len() as u64;
                seg.records += self.pending_records;
                self.comms_flushed = self.comms_written;
                self.strings_flushed = self.strings.len();
            }),
            None => Ok(()),
        };
        self.buf.clear();
        self.pending_records = 0;
        if let Err(e) = result {
            let p = self.path(self.next_segment - 1);
            self.fail(&format!("{}", p.display()), &e);
        }
    }

    /// One pass over everything pending; true when there was something.
    fn pass(&mut self) -> bool {
        let mut busy = false;
        self.rings.extend(threads::take_new());
        {
            let comms = self.s.comms();
            for c in &comms[self.comms_written..] {
                Frame::Comm(c.clone()).encode(&mut self.buf);
                busy = true;
            }
            self.comms_written = comms.len();
        }
        for i in 0..self.rings.len() {
            let ring = Arc::clone(&self.rings[i]);
            self.batch.clear();
            if ring.drain(&mut self.batch) > 0 {
                busy = true;
                for r in &mut self.batch {
                    r.ts_ns = self.fit.ns(r.ts_ns);
                }
                self.strings_of_batch();
                for chunk in self.batch.chunks(FRAME_RECORDS) {
                    put_frame(&mut self.buf, |p| {
                        put_records_payload(p, ring.thread, chunk)
                    });
                }
                self.pending_records += self.batch.len() as u64;
            }
            let dropped = ring.dropped();
            let written = self
                .drops_written
                .iter_mut()
                .find(|(t, _)| *t == ring.thread);
            match written {
                Some((_, d)) if *d == dropped => {}
                Some((_, d)) => {
                    *d = dropped;
                    Frame::Drops {
                        thread: ring.thread,
                        dropped,
                    }
                    .encode(&mut self.buf);
                }
                None if dropped > 0 => {
                    self.drops_written.push((ring.thread, dropped));
                    Frame::Drops {
                        thread: ring.thread,
                        dropped,
                    }
                    .encode(&mut self.buf);
                }
                None => {}
            }
        }
        self.rings.retain(|r| {
            let done = r.finished();
            if done {
                crate::tsan::acquire(Arc::as_ptr(r));
            }
            !done
        });
        let finalized = self.s.take_finalized();
        for (context, ts_ns) in finalized {
            Frame::Finalize { context, ts_ns }.encode(&mut self.buf);
            busy = true;
        }
        self.write_out();
        if self
            .segment
            .as_ref()
            .is_some_and(|s| s.bytes >= self.s.config.segment_bytes)
        {
            self.seal();
        }
        busy
    }

    fn strings_of_batch(&mut self) {
        for r in &self.batch {
            if r.call != call::START {
                continue;
            }
            for &slot in string_slots(r.kind) {
                let pointer = r.payload[slot];
                if pointer != 0 && self.seen.insert(pointer) {
                    let text = c_text(pointer);
                    Frame::String {
                        pointer,
                        text: text.clone(),
                    }
                    .encode(&mut self.buf);
                    self.strings.push((pointer, text));
                }
            }
        }
    }

    fn run(mut self) {
        let mut idle_ms = 1u64;
        let mut refit_at = now_ns() + 100_000_000;
        loop {
            if now_ns() >= refit_at {
                self.fit.refit();
                refit_at = now_ns() + 1_000_000_000;
            }
            let stopping = self.s.stop.load(Ordering::Acquire);
            let requested = self.s.flush_requested.load(Ordering::Acquire);
            let busy = self.pass();
            if requested > self.s.flush_done.load(Ordering::Relaxed) {
                if self.s.live.load(Ordering::Acquire) == 0 {
                    self.seal();
                }
                self.s.flush_done.store(requested, Ordering::Release);
            }
            if stopping {
                self.fit.refit();
                self.pass();
                self.seal();
                self.s.stopped.store(true, Ordering::Release);
                return;
            }
            idle_ms = if busy { 1 } else { (idle_ms * 2).min(20) };
            std::thread::sleep(Duration::from_millis(idle_ms));
        }
    }
}
