//! The plugin driven as NCCL drives it, by a C harness built here with `cc`
//! (`tests/harness/harness.c`): layouts, every ABI version, 10^6 events from
//! 8 threads decoded back exactly, counted drops, AddressSanitizer and
//! ThreadSanitizer builds, no futex on the calling threads, and a SIGKILL
//! mid-stream.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use commcanary_nccl_log::event::kind;
use commcanary_nccl_log::record::{call, slot};
use commcanary_nccl_log::{Frame, Record, read_segment};

/// Builds the shared library (`cargo test` builds only the rlib the tests
/// link), once, in the profile the tests run under.
fn build_once(target: &Path) {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let profile = target.file_name().unwrap().to_str().unwrap();
        let profile = if profile == "debug" { "dev" } else { profile };
        let status = Command::new(env!("CARGO"))
            .args([
                "build",
                "--quiet",
                "-p",
                "commcanary-nccl-profiler",
                "--lib",
                "--profile",
                profile,
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the plugin failed");
    });
}

/// The plugin under its NCCL name, in a fresh directory.
fn plugin(dir: &Path) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe.parent().unwrap().parent().unwrap();
    build_once(target);
    let built = target.join("libnccl_profiler_commcanary.so");
    assert!(built.exists(), "{} is not built", built.display());
    let named = dir.join("libnccl-profiler-commcanary.so");
    std::fs::copy(&built, &named).unwrap();
    named
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "commcanary-nccl-harness-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Builds the harness with `cc` and `flags`.
fn harness(dir: &Path, flags: &[&str]) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/harness/harness.c");
    let out = dir.join("harness");
    let status = Command::new("cc")
        .args(["-O2", "-g", "-Wall", "-Wextra", "-Werror", "-pthread"])
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&source)
        .arg("-ldl")
        .status()
        .expect("cc runs");
    assert!(status.success(), "cc {flags:?} failed");
    out
}

struct Run {
    output: Output,
    logs: PathBuf,
    digests: PathBuf,
}

fn drive(
    dir: &Path,
    exe: &Path,
    lib: &Path,
    abi: u32,
    threads: u32,
    events: u64,
    env: &[(&str, &str)],
) -> Run {
    let logs = dir.join(format!("logs-v{abi}-{threads}-{events}"));
    let digests = dir.join(format!("digests-v{abi}-{threads}-{events}.bin"));
    let output = Command::new(exe)
        .arg(lib)
        .arg(abi.to_string())
        .arg(threads.to_string())
        .arg(events.to_string())
        .arg(&digests)
        .env("COMMCANARY_NCCL_DIR", &logs)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "harness v{abi} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Run {
        output,
        logs,
        digests,
    }
}

/// The FNV-1a digest the harness computes for each call (`digest()` there).
struct Fnv(u64);
impl Fnv {
    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= u64::from(x);
            self.0 = self.0.wrapping_mul(0x100000001b3);
        }
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    fn text(&mut self, s: Option<&str>) {
        if let Some(s) = s {
            self.bytes(s.as_bytes());
        }
        self.bytes(b"|");
    }
}

fn digest(r: &Record, strings: &HashMap<u64, String>) -> u64 {
    let text = |slot: usize| -> Option<&str> { strings.get(&r.payload[slot]).map(String::as_str) };
    let p = &r.payload;
    let (mut k, mut s): ([u64; 3], [Option<&str>; 4]) = ([0; 3], [None; 4]);
    let (mut kind_bits, mut context, mut rank, mut arg) = (0, 0, 0, 0);
    if r.call == call::START {
        kind_bits = u64::from(r.kind);
        context = u64::from(r.context);
        rank = u64::from(r.rank as u32);
        match r.kind {
            kind::GROUP_API => k = [p[slot::GROUP_API_DEPTH], p[slot::GROUP_API_GRAPH], 0],
            kind::COLL_API => {
                k = [p[slot::API_COUNT], p[slot::API_ROOT_OR_STREAM], 0];
                s = [text(slot::API_FUNC), text(slot::API_DATATYPE), None, None];
            }
            kind::KERNEL_LAUNCH => k = [p[slot::KERNEL_LAUNCH_STREAM], 0, 0],
            kind::COLL => {
                k = [p[slot::COLL_SEQ], p[slot::COLL_COUNT], p[slot::COLL_ROOT]];
                s = [
                    text(slot::COLL_FUNC),
                    text(slot::COLL_DATATYPE),
                    text(slot::COLL_ALGO),
                    text(slot::COLL_PROTO),
                ];
            }
            kind::PROXY_OP => {
                k = [
                    p[slot::PROXY_OP_CHANNEL],
                    p[slot::PROXY_OP_PEER],
                    p[slot::PROXY_OP_STEPS],
                ]
            }
            kind::PROXY_STEP => k = [p[slot::PROXY_STEP_STEP], 0, 0],
            kind::KERNEL_CH => k = [p[slot::KERNEL_CH_CHANNEL], p[slot::KERNEL_CH_TIMER], 0],
            kind::P2P => {
                k = [p[slot::P2P_PEER], p[slot::P2P_COUNT], p[slot::P2P_CHANNELS]];
                s = [text(slot::P2P_FUNC), text(slot::P2P_DATATYPE), None, None];
            }
            kind::CE_COLL => {
                k = [
                    p[slot::CE_COLL_SEQ],
                    p[slot::CE_COLL_COUNT],
                    p[slot::CE_COLL_CE_SEQ],
                ];
                s = [
                    text(slot::CE_COLL_FUNC),
                    text(slot::CE_COLL_DATATYPE),
                    text(slot::CE_COLL_SYNC),
                    None,
                ];
            }
            kind::CE_SYNC => k = [p[slot::CE_SYNC_RANKS], p[slot::CE_SYNC_COMPLETE], 0],
            kind::CE_BATCH => k = [p[slot::CE_BATCH_OPS], p[slot::CE_BATCH_BYTES], 0],
            _ => {}
        }
    }
    if r.call == call::STATE {
        arg = p[slot::STATE_ARG];
    }
    let mut f = Fnv(0xcbf29ce484222325);
    for v in [
        u64::from(r.call),
        r.id,
        kind_bits,
        context,
        r.parent,
        rank,
        u64::from(r.state),
        arg,
    ] {
        f.u64(v);
    }
    for v in k {
        f.u64(v);
    }
    for t in s {
        f.text(t);
    }
    f.0
}

/// Everything a process's logs hold.
#[derive(Default)]
struct Decoded {
    records: Vec<Record>,
    strings: HashMap<u64, String>,
    dropped: u64,
    torn: u64,
    segments: usize,
    sealed: usize,
    comms: usize,
}

fn decode(dir: &Path) -> Decoded {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let mut d = Decoded::default();
    let mut drops: HashMap<u32, u64> = HashMap::new();
    for path in &paths {
        let seg = read_segment(&std::fs::read(path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        d.segments += 1;
        d.sealed += usize::from(seg.sealed);
        d.torn += seg.torn_records;
        for frame in seg.frames {
            match frame {
                Frame::Records { records, .. } => d.records.extend(records),
                Frame::String { pointer, text } => {
                    d.strings.insert(pointer, text);
                }
                Frame::Drops { thread, dropped } => {
                    let e = drops.entry(thread).or_default();
                    *e = (*e).max(dropped);
                }
                Frame::Comm(_) if seg.header.segment == 1 => d.comms += 1,
                _ => {}
            }
        }
    }
    d.dropped = drops.values().sum();
    d
}

fn driven(run: &Run) -> Vec<u64> {
    let bytes = std::fs::read(&run.digests).unwrap();
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Decoded digests must be a sub-multiset of the driven ones, and account
/// for all of them with the drops.
fn check(run: &Run, expect_drops: bool) -> (usize, u64) {
    let d = decode(&run.logs);
    let mut want = driven(run);
    let mut got: Vec<u64> = d.records.iter().map(|r| digest(r, &d.strings)).collect();
    want.sort_unstable();
    got.sort_unstable();
    assert_eq!(d.comms, 4, "four communicators announced");
    assert_eq!(d.torn, 0);
    assert!(
        d.sealed == d.segments,
        "every segment sealed after finalize and exit"
    );
    if !expect_drops {
        assert_eq!(d.dropped, 0);
        assert_eq!(got.len(), want.len(), "every call logged");
        assert!(got == want, "the logged calls differ from the driven ones");
    } else {
        let mut w = want.iter().peekable();
        for g in &got {
            while w.peek().is_some_and(|&&x| x < *g) {
                w.next();
            }
            assert_eq!(w.next(), Some(g), "a logged call that was never driven");
        }
        assert_eq!(
            got.len() as u64 + d.dropped,
            want.len() as u64,
            "logged + dropped = driven"
        );
    }
    (got.len(), d.dropped)
}

fn stdout_json(run: &Run) -> String {
    String::from_utf8_lossy(&run.output.stdout)
        .trim()
        .to_string()
}

#[test]
fn a_million_events_from_eight_threads_decode_to_exactly_what_was_driven() {
    let dir = scratch("million");
    let lib = plugin(&dir);
    let exe = harness(&dir, &[]);
    // A ring of 2^19 records per thread: the debug build's writer may still
    // fall behind eight producers; what it cannot take is counted.
    let run = drive(
        &dir,
        &exe,
        &lib,
        6,
        8,
        1_000_000,
        &[("COMMCANARY_NCCL_RING", "524288")],
    );
    let (logged, dropped) = check(&run, true);
    assert!(
        logged as u64 + dropped > 2_000_000,
        "{logged} calls logged, {dropped} dropped"
    );
    eprintln!("logged {logged}, dropped {dropped}: {}", stdout_json(&run));
    for abi in [5, 4] {
        let run = drive(
            &dir,
            &exe,
            &lib,
            abi,
            4,
            100_000,
            &[("COMMCANARY_NCCL_RING", "262144")],
        );
        check(&run, false);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_full_ring_drops_and_counts_and_never_waits() {
    let dir = scratch("drops");
    let lib = plugin(&dir);
    let exe = harness(&dir, &[]);
    let run = drive(
        &dir,
        &exe,
        &lib,
        6,
        8,
        200_000,
        &[("COMMCANARY_NCCL_RING", "64")],
    );
    let (logged, dropped) = check(&run, true);
    assert!(
        dropped > 0 && logged > 0,
        "logged {logged}, dropped {dropped}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn sanitized(name: &str, flag: &str, report: &str) {
    let dir = scratch(name);
    let lib = plugin(&dir);
    let exe = harness(&dir, &[flag, "-O1", "-fno-omit-frame-pointer"]);
    let run = drive(
        &dir,
        &exe,
        &lib,
        6,
        8,
        100_000,
        &[("COMMCANARY_NCCL_RING", "4096")],
    );
    let stderr = String::from_utf8_lossy(&run.output.stderr);
    assert!(!stderr.contains(report), "{stderr}");
    check(&run, true);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_harness_runs_clean_under_address_sanitizer() {
    sanitized("asan", "-fsanitize=address", "Sanitizer");
}

#[test]
fn the_harness_runs_clean_under_thread_sanitizer() {
    sanitized("tsan", "-fsanitize=thread", "ThreadSanitizer");
}

#[test]
fn the_calling_threads_make_no_futex_call() {
    if Command::new("strace")
        .arg("-V")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs strace for this test"
        );
        eprintln!("skipped: strace is not installed");
        return;
    }
    let dir = scratch("futex");
    let lib = plugin(&dir);
    let exe = harness(&dir, &[]);
    let trace = dir.join("strace.txt");
    let logs = dir.join("logs");
    let output = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=futex,getppid", "-o"])
        .arg(&trace)
        .arg(&exe)
        .arg(&lib)
        .args(["6", "8", "200000"])
        .arg(dir.join("digests.bin"))
        .env("COMMCANARY_NCCL_DIR", &logs)
        .env("COMMCANARY_NCCL_RING", "1024")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json = String::from_utf8_lossy(&output.stdout);
    let tids: Vec<String> = json
        .split("\"tids\": [")
        .nth(1)
        .unwrap()
        .trim_end()
        .trim_end_matches("]}")
        .split(", ")
        .map(str::to_string)
        .collect();
    assert_eq!(tids.len(), 8);
    let text = std::fs::read_to_string(&trace).unwrap();
    let mut inside: HashMap<&str, bool> = HashMap::new();
    let mut futexes = 0;
    let mut markers = 0;
    for line in text.lines() {
        let Some((pid, rest)) = line.split_once(' ') else {
            continue;
        };
        if !tids.iter().any(|t| t == pid) {
            continue;
        }
        let rest = rest.trim_start();
        if rest.starts_with("getppid") {
            let e = inside.entry(pid).or_default();
            *e = !*e;
            markers += 1;
        } else if rest.starts_with("futex") && inside.get(pid).copied().unwrap_or(false) {
            futexes += 1;
            eprintln!("{line}");
        }
    }
    assert_eq!(
        markers, 16,
        "each calling thread marks its measured stretch"
    );
    assert_eq!(
        futexes, 0,
        "futex calls on the calling threads while they drove events"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_process_killed_mid_stream_leaves_every_sealed_segment_readable() {
    let dir = scratch("kill");
    let lib = plugin(&dir);
    let exe = harness(&dir, &[]);
    let logs = dir.join("logs");
    let mut child = Command::new(&exe)
        .arg(&lib)
        .args(["6", "4", "0"])
        .arg(dir.join("digests.bin"))
        .arg("--hold")
        .env("COMMCANARY_NCCL_DIR", &logs)
        .env("COMMCANARY_NCCL_SEGMENT_MB", "1")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let count = || std::fs::read_dir(&logs).map(|d| d.count()).unwrap_or(0);
    while count() < 4 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(count() >= 4, "segments written before the kill");
    let d = decode(&logs);
    assert!(
        d.sealed >= d.segments - 1,
        "all but the open segment are sealed"
    );
    assert!(d.records.len() > 1000);
    let mut stopped: HashMap<u64, bool> = HashMap::new();
    for r in &d.records {
        if r.call == call::START {
            stopped.entry(r.id).or_default();
        } else if r.call == call::STOP {
            stopped.insert(r.id, true);
        }
    }
    eprintln!(
        "killed: {} segments ({} sealed), {} records, {} torn, {} events never stopped",
        d.segments,
        d.sealed,
        d.records.len(),
        d.torn,
        stopped.values().filter(|s| !**s).count()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
