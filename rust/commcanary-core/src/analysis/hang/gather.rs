//! The evidence of a hung job read from files and directories: each file
//! classified by its content (a pickle or a JSON object with `entries` /
//! `pg_config` is a Flight Recorder dump; JSON with `traceEvents` is a
//! profiler trace; text with thread stacks is a stack dump; text ending in
//! an exception line is an exception text) and its rank taken from the dump
//! name (`<prefix><rank>`), the trace's `distributedInfo`, or the text
//! file's name (`rank3_stacks.txt`).
//!
//! Named files must be evidence; in a directory (walked recursively, hidden
//! entries skipped, sorted) anything else is listed as skipped. Every file
//! is read bounded ([`crate::input::read_input`]); dumps are decoded in
//! parallel. Errors name the file.

use std::io::Read;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::fr::{Declared, LabeledDump};
use crate::error::{Error, ErrorKind, Result};
use crate::import::flight_recorder::{self, read_dump};
use crate::import::kineto::{AlignedJob, align_job, job_from_trace, read_files};
use crate::import::stacks::{
    ExceptionText, StackDump, parse_exception, parse_stacks, rank_from_file_name,
};
use crate::input::{MAX_INPUT_BYTES, read_input};
use crate::json::{Json, OPEN_BRACE};

/// Most files a directory walk considers.
pub const MAX_FILES: usize = 200_000;

/// A text file's label and rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranked {
    /// The file, as given.
    pub label: String,
    /// Its rank.
    pub rank: i64,
}

/// Everything gathered.
#[derive(Default)]
pub struct Evidence {
    /// Flight Recorder dumps.
    pub dumps: Vec<LabeledDump>,
    /// Profiler traces, aligned.
    pub traces: Option<AlignedJob>,
    /// Stack dumps.
    pub stacks: Vec<(Ranked, StackDump)>,
    /// Exception texts.
    pub exceptions: Vec<(Ranked, ExceptionText)>,
    /// One object per file: `file`, `kind`, `rank`, `used`, and what was read.
    pub files: Vec<Json>,
}

impl Evidence {
    /// The groups the traces declare (`distributedInfo.pg_config`).
    #[must_use]
    pub fn declared_groups(&self) -> Declared {
        self.traces.as_ref().map_or(Vec::new(), |t| {
            t.groups
                .iter()
                .filter(|g| !g.desc.contains("(assumed"))
                .map(|g| (g.name.clone(), g.desc.clone(), g.ranks.clone()))
                .collect()
        })
    }
}

/// What a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dump,
    Trace,
    /// A `commcanary.trace.v1` (merged by `import-kineto` or `capture`).
    Merged,
    Text,
    Other(&'static str),
}

/// Options of [`gather`].
#[derive(Debug, Clone, Default)]
pub struct GatherOptions {
    /// The profile cache directory for traces.
    pub cache_dir: Option<PathBuf>,
    /// Whether a merged `commcanary.trace.v1` stands for the per-rank
    /// traces (stragglers, steps, timelines; not a hang, whose unfinished
    /// collectives a merged trace leaves out).
    pub merged_traces: bool,
}

/// Reads the evidence in `paths` (files or directories).
///
/// # Errors
/// A missing path, a named file that is not evidence, a dump or text whose
/// rank cannot be told, a malformed dump or trace, no evidence at all.
pub fn gather(paths: &[PathBuf], options: &GatherOptions) -> Result<Evidence> {
    let mut listed: Vec<(PathBuf, bool)> = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p)
            .map_err(|_| Error::new(ErrorKind::Io, format!("{}: does not exist", p.display())))?;
        if meta.is_dir() {
            walk(p, 0, &mut listed)?;
        } else {
            listed.push((p.clone(), true));
        }
    }
    let mut evidence = Evidence::default();
    let (mut dumps, mut traces, mut texts) = (Vec::new(), Vec::new(), Vec::new());
    let mut merged = Vec::new();
    for (path, named) in listed {
        let label = path.display().to_string();
        match classify(&path).map_err(|e| Error::new(e.kind(), e.with_path(&label)))? {
            Kind::Dump => dumps.push((path, label)),
            Kind::Trace => traces.push((path, label)),
            Kind::Merged if options.merged_traces => merged.push((path, label)),
            Kind::Merged if named => {
                return Err(Error::invalid(format!(
                    "{label}: a commcanary trace is not hang evidence (a merged trace leaves out the collectives that never finished; give the Flight Recorder dumps or the per-rank profiler traces)"
                )));
            }
            Kind::Merged => evidence.files.push(
                file_json(&label, "skipped", None, false)
                    .with("reason", "a commcanary trace (not hang evidence)"),
            ),
            Kind::Text => texts.push((path, label, named)),
            Kind::Other(why) if named => {
                return Err(Error::invalid(format!(
                    "{label}: not hang evidence ({why}; expected a Flight Recorder dump, a profiler trace, a stack dump or an exception text)"
                )));
            }
            Kind::Other(why) => evidence
                .files
                .push(file_json(&label, "skipped", None, false).with("reason", why)),
        }
    }
    read_dumps(&mut evidence, dumps)?;
    if let Some((path, label)) = merged.first() {
        if let Some(other) = merged.get(1).map(|m| &m.1).or(traces.first().map(|t| &t.1)) {
            return Err(Error::invalid(format!(
                "{label}: a merged commcanary trace cannot be read with {other}: give one merged trace, or the per-rank profiler traces"
            )));
        }
        read_merged(&mut evidence, path, label)?;
    }
    read_traces(&mut evidence, traces, options)?;
    read_texts(&mut evidence, texts)?;
    if evidence.dumps.is_empty()
        && evidence.traces.is_none()
        && evidence.stacks.is_empty()
        && evidence.exceptions.is_empty()
    {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(Error::invalid(format!(
            "{}: no hang evidence found (no Flight Recorder dump, profiler trace, stack dump or exception text)",
            shown.join(", ")
        )));
    }
    Ok(evidence)
}

fn walk(dir: &Path, depth: u32, out: &mut Vec<(PathBuf, bool)>) -> Result<()> {
    if depth > 8 {
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!("{}: cannot be read: {e}", dir.display()),
        )
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            walk(&p, depth + 1, out)?;
        } else if p.is_file() {
            if out.len() >= MAX_FILES {
                return Err(Error::limit(format!(
                    "{}: more than {MAX_FILES} files to look at; name the evidence files or a smaller directory",
                    dir.display()
                )));
            }
            out.push((p, false));
        }
    }
    Ok(())
}

/// The first 64 KiB of a file (decompressed when gzip).
fn head(path: &Path) -> Result<Vec<u8>> {
    let io = |e: std::io::Error| Error::new(ErrorKind::Io, format!("cannot be read: {e}"));
    let mut raw = Vec::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(65536)
        .read_to_end(&mut raw)
        .map_err(io)?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        let file = std::fs::File::open(path).map_err(io)?;
        let _ = flate2::read::MultiGzDecoder::new(file)
            .take(65536)
            .read_to_end(&mut out);
        return Ok(out);
    }
    Ok(raw)
}

fn classify(path: &Path) -> Result<Kind> {
    let head = head(path)?;
    if flight_recorder::looks_like_pickle(&head)
        && (head.first() == Some(&0x80) || ends_a_pickle(path)?)
    {
        return Ok(Kind::Dump);
    }
    let has = |k: &[u8]| head.windows(k.len()).any(|w| w == k);
    let first = head
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map(|i| head[i]);
    Ok(match first {
        None => Kind::Other("empty"),
        // Canonical traces sort `format` after `events`: past the head of
        // a large one, whose events show instead (the loader then checks).
        Some(OPEN_BRACE)
            if !has(b"\"traceEvents\"")
                && (has(b"\"commcanary.trace.v1\"")
                    || (has(b"\"events\"") && has(b"\"ranks\"") && has(b"\"op\""))) =>
        {
            Kind::Merged
        }
        Some(OPEN_BRACE) if has(b"\"traceEvents\"") || has(b"\"schemaVersion\"") => Kind::Trace,
        Some(OPEN_BRACE) if flight_recorder::sniff(&head) => Kind::Dump,
        Some(OPEN_BRACE | b'[') => {
            Kind::Other("JSON that is neither a profiler trace nor a Flight Recorder dump")
        }
        Some(_) if head.contains(&0) => Kind::Other("binary data"),
        Some(_) => Kind::Text,
    })
}

/// Whether a file ends with a pickle's `STOP` (`.`), trailing whitespace aside.
fn ends_a_pickle(path: &Path) -> Result<bool> {
    use std::io::{Seek, SeekFrom};
    let io = |e: std::io::Error| Error::new(ErrorKind::Io, format!("cannot be read: {e}"));
    let mut file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(64)))
        .map_err(io)?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).map_err(io)?;
    Ok(tail.trim_ascii_end().ends_with(b"."))
}

fn file_json(label: &str, kind: &str, rank: Option<i64>, used: bool) -> Json {
    Json::object()
        .with("file", label)
        .with("kind", kind)
        .with("rank", rank)
        .with("used", used)
}

fn read_dumps(evidence: &mut Evidence, dumps: Vec<(PathBuf, String)>) -> Result<()> {
    let read: Vec<LabeledDump> = dumps
        .into_par_iter()
        .map(|(path, label)| {
            let named = |e: Error| Error::new(e.kind(), e.with_path(&label));
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let rank = rank_from_file_name(&name).ok_or_else(|| {
                Error::invalid(format!(
                    "{label}: cannot tell which rank wrote this Flight Recorder dump (torch names them <prefix><rank>, e.g. fr_trace_rank_3)"
                ))
            })?;
            let bytes = read_input(&path, MAX_INPUT_BYTES).map_err(named)?;
            let dump = read_dump(&bytes).map_err(named)?;
            Ok(LabeledDump { label, rank, dump })
        })
        .collect::<Result<_>>()?;
    for d in &read {
        evidence.files.push(
            file_json(&d.label, "flight_recorder", Some(d.rank), true)
                .with("encoding", d.dump.encoding)
                .with("version", d.dump.version.as_str())
                .with("entries", d.dump.entries.len()),
        );
    }
    evidence.dumps = read;
    Ok(())
}

fn read_traces(
    evidence: &mut Evidence,
    traces: Vec<(PathBuf, String)>,
    options: &GatherOptions,
) -> Result<()> {
    if traces.is_empty() {
        return Ok(());
    }
    let (paths, labels): (Vec<PathBuf>, Vec<String>) = traces.into_iter().unzip();
    let (profiles, _) = read_files(&paths, &labels, None, options.cache_dir.as_deref())?;
    for (p, label) in profiles.iter().zip(&labels) {
        evidence
            .files
            .push(file_json(label, "kineto", Some(p.rank), true).with("calls", p.calls.len()));
    }
    evidence.traces = Some(align_job(profiles, &labels, &Default::default())?);
    Ok(())
}

fn read_merged(evidence: &mut Evidence, path: &Path, label: &str) -> Result<()> {
    let named = |e: Error| Error::new(e.kind(), e.with_path(label));
    let trace = crate::trace::load(path, &crate::trace::LoadOptions::default()).map_err(named)?;
    let (job, skipped) = job_from_trace(&trace, label)?;
    for p in &job.profiles {
        evidence.files.push(
            file_json(label, "commcanary.trace.v1", Some(p.rank), true)
                .with("calls", p.calls.len()),
        );
    }
    if skipped.no_arrivals > 0 {
        evidence
            .files
            .push(file_json(label, "skipped", None, false).with(
                "reason",
                format!(
                    "{} event(s) without every member's arrival",
                    skipped.no_arrivals
                ),
            ));
    }
    evidence.traces = Some(job);
    Ok(())
}

/// A text evidence file, under the policy's `max_text_bytes`.
fn read_text(path: &std::path::Path) -> Result<crate::input::InputBytes> {
    let max = crate::limits::current().max_text_bytes;
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() && meta.len() > max => Err(crate::limits::exceeded(
            format_args!("({} bytes)", meta.len()),
            "max_text_bytes",
            max,
        )),
        _ => read_input(path, max),
    }
}

fn read_texts(evidence: &mut Evidence, texts: Vec<(PathBuf, String, bool)>) -> Result<()> {
    for (path, label, named) in texts {
        let bytes = read_text(&path).map_err(|e| Error::new(e.kind(), e.with_path(&label)))?;
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(65536)]).into_owned();
        let thread_dump = text.contains("(most recent call first)")
            || text
                .lines()
                .any(|l| l.starts_with("Thread ") && l.contains("): \""));
        let exception = if thread_dump {
            None
        } else {
            parse_exception(&bytes)
        };
        let stacks = if exception.is_none() {
            parse_stacks(&bytes)
        } else {
            None
        };
        let kind = match (&exception, &stacks) {
            (Some(_), _) => "exception",
            (None, Some(_)) => "stacks",
            (None, None) if named => {
                return Err(Error::invalid(format!(
                    "{label}: not hang evidence (text with neither a stack dump nor an exception)"
                )));
            }
            (None, None) => {
                evidence.files.push(
                    file_json(&label, "skipped", None, false)
                        .with("reason", "text with neither a stack dump nor an exception"),
                );
                continue;
            }
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(rank) = rank_from_file_name(&name) else {
            if named {
                return Err(Error::invalid(format!(
                    "{label}: cannot tell which rank this {kind} file is from (name it like rank3_{kind}.txt)"
                )));
            }
            evidence.files.push(
                file_json(&label, kind, None, false).with("reason", "no rank in the file name"),
            );
            continue;
        };
        evidence
            .files
            .push(file_json(&label, kind, Some(rank), true));
        let ranked = Ranked { label, rank };
        match (exception, stacks) {
            (Some(x), _) => evidence.exceptions.push((ranked, x)),
            (None, Some(s)) => evidence.stacks.push((ranked, s)),
            (None, None) => {}
        }
    }
    Ok(())
}
