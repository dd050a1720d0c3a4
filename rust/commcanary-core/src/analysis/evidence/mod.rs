//! A job's evidence read from files and directories, for every analysis
//! (hangs, stragglers, steps, timelines) and under one directory rule.
//!
//! * Every file is classified by its content ([`classify`]): a Flight
//!   Recorder dump (pickle, or JSON whose top level has `entries`), a
//!   profiler trace (`traceEvents`), a merged `commcanary.trace.v1`, text
//!   (stack dumps, exception texts, combined launcher logs, told apart in
//!   [`texts`]) or something else.
//! * What is not evidence (READMEs, configs, unrelated JSON, logs without a
//!   rank) is skipped and listed with the reason; so is what an analysis
//!   does not use ([`Uses`]): stragglers, steps and timelines never decode
//!   a dump or a text.
//! * A damaged file (a truncated dump, a malformed trace, a text whose rank
//!   cannot be told) is a noted, skipped input, not the failure of the whole
//!   command — unless nothing usable remains, when the first damage is the
//!   error.
//! * Ranks come from the dump's name (`<prefix><rank>`), the trace's
//!   `distributedInfo`, a text file's name (`rank3_stacks.txt`) or the
//!   rank tags of a combined launcher log (`[rank3]:`).
//!
//! Every file is read bounded ([`crate::input::read_input`]); dumps and
//! traces are decoded in parallel. Errors and notes name the file.

mod classify;
mod texts;

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use self::classify::{Kind, classify};
use super::hang::fr::{Declared, LabeledDump};
use crate::error::{Error, ErrorKind, Result};
use crate::import::flight_recorder::FrDump;
use crate::import::flight_recorder::read_dump;
use crate::import::kineto::{AlignedJob, align_job, job_from_trace, read_each};
use crate::import::kineto::{CacheStats, FilePartial, RankProfile, profiles_each_from_partials};
use crate::import::stacks::{ExceptionText, ProcessExit, StackDump, rank_from_file_name};
use crate::input::{MAX_INPUT_BYTES, read_input};
use crate::json::Json;

/// Most files a directory walk considers.
pub const MAX_FILES: usize = 200_000;

/// A text's label and rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranked {
    /// The file, as given (with `[rank N]` for one rank's part of a
    /// combined log).
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
    /// How processes ended, as their launcher reported it.
    pub exits: Vec<(String, ProcessExit)>,
    /// Ranks whose own text reports a collective mismatch (gloo's abort:
    /// "Is there a distributed collective mismatch in your code?").
    pub mismatch_reports: Vec<i64>,
    /// One object per file: `file`, `kind`, `rank`, `used`, and what was
    /// read (or `reason`, for a file skipped).
    pub files: Vec<Json>,
    /// Each damaged file's error (the file skipped), in listing order.
    pub damaged: Vec<String>,
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

    /// The line that tells a person damaged files were skipped, if any were.
    #[must_use]
    pub fn damage_line(&self) -> Option<String> {
        let first = self.damaged.first()?;
        Some(match self.damaged.len() {
            1 => format!("skipped a damaged file: {first}"),
            n => format!("skipped {n} damaged files, the first: {first}"),
        })
    }

    /// Whether anything usable was gathered.
    fn is_empty(&self) -> bool {
        self.dumps.is_empty()
            && self.traces.is_none()
            && self.stacks.is_empty()
            && self.exceptions.is_empty()
            && self.exits.is_empty()
    }
}

/// What the analysis reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Uses {
    /// Every kind of evidence (a hang diagnosis).
    #[default]
    Everything,
    /// Profiler traces only (stragglers, steps): dumps and texts are
    /// listed, never decoded.
    Traces,
    /// Profiler traces, or, where there are none, Flight Recorder dumps (a
    /// timeline): texts are listed, never decoded, and so are the dumps
    /// when traces are there.
    Timeline,
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
    /// What the analysis reads.
    pub uses: Uses,
}

impl GatherOptions {
    /// The options of an analysis, by its name: `hang` (everything, never a
    /// merged trace), `stragglers` and `steps` (profiler traces, or one
    /// merged trace), `timeline` (traces, else dumps).
    ///
    /// # Errors
    /// Another name.
    pub fn for_analysis(name: &str, cache_dir: Option<PathBuf>) -> Result<GatherOptions> {
        let (merged_traces, uses) = match name {
            "hang" => (false, Uses::Everything),
            "stragglers" | "steps" => (true, Uses::Traces),
            "timeline" => (true, Uses::Timeline),
            _ => {
                return Err(Error::option(
                    "analysis",
                    "must be hang, stragglers, steps or timeline",
                ));
            }
        };
        Ok(GatherOptions {
            cache_dir,
            merged_traces,
            uses,
        })
    }
}

/// One dump read by a distributed task: the dump in
/// [`crate::import::flight_recorder::codec`] bytes, or its path-free error
/// as `(ErrorKind::code, message)`.
#[derive(Debug, Clone)]
pub struct DumpPartial {
    /// The encoded dump, or the error.
    pub dump: std::result::Result<Vec<u8>, (u8, String)>,
}

impl DumpPartial {
    /// The partial of one dump file, read here.
    #[must_use]
    pub fn read(path: &Path) -> DumpPartial {
        DumpPartial {
            dump: read_dump_file(path)
                .map(|d| crate::import::flight_recorder::codec::encode(&d))
                .map_err(|e| (e.kind().code(), e.message().to_owned())),
        }
    }

    fn decode(self) -> Result<FrDump> {
        match self.dump {
            Ok(bytes) => crate::import::flight_recorder::codec::decode(&bytes)
                .map_err(|e| Error::invalid(format!("a damaged partial ({})", e.message()))),
            Err((code, message)) => Err(Error::new(
                ErrorKind::from_code(code).unwrap_or(ErrorKind::Invalid),
                message,
            )),
        }
    }
}

/// The reads of a plan's files made elsewhere (distributed tasks), each
/// list in the order of the plan they were made for, with its labels.
#[derive(Debug, Clone, Default)]
pub struct RemoteReads {
    /// The labels of [`Plan::dump_files`].
    pub dump_labels: Vec<String>,
    /// One partial per dump.
    pub dumps: Vec<DumpPartial>,
    /// The labels of [`Plan::trace_files`].
    pub trace_labels: Vec<String>,
    /// One partial per trace.
    pub traces: Vec<FilePartial>,
}

impl RemoteReads {
    fn into_reads(self, plan: &Plan) -> Result<Reads> {
        let labels =
            |files: &[(PathBuf, String)]| files.iter().map(|(_, l)| l.clone()).collect::<Vec<_>>();
        if labels(plan.dump_files()) != self.dump_labels
            || labels(plan.trace_files()) != self.trace_labels
            || self.dumps.len() != self.dump_labels.len()
        {
            return Err(Error::invalid(
                "the evidence changed between its listing and its reading (files added, removed or renamed); run the command again",
            ));
        }
        let dumps = self.dumps.into_iter().map(DumpPartial::decode).collect();
        let traces = if self.trace_labels.is_empty() {
            Ok((Vec::new(), CacheStats::default()))
        } else {
            profiles_each_from_partials(self.traces, &self.trace_labels)
        };
        Ok(Reads { dumps, traces })
    }
}

/// [`gather`], with the dumps and traces read elsewhere when `remote` is
/// given (the same plan, listed again here, must name the same files).
///
/// # Errors
/// As [`gather`]; evidence that changed since the reads were planned.
pub fn gather_with(
    paths: &[PathBuf],
    options: &GatherOptions,
    remote: Option<RemoteReads>,
) -> Result<Evidence> {
    let plan = plan(paths, options)?;
    let reads = match remote {
        None => read_here(&plan),
        Some(remote) => remote.into_reads(&plan)?,
    };
    finish(plan, reads)
}

/// The files found, by kind: `(path, label)` each.
struct Listing {
    dumps: Vec<(PathBuf, String)>,
    nccl_logs: Vec<(PathBuf, String)>,
    traces: Vec<(PathBuf, String)>,
    merged: Vec<(PathBuf, String)>,
    texts: Vec<(PathBuf, String)>,
}

/// Reads the evidence in `paths` (files or directories).
///
/// # Errors
/// A missing path; no usable evidence (the first damaged file's error when
/// there was one); a merged trace mixed with other traces; evidence of
/// different jobs.
pub fn gather(paths: &[PathBuf], options: &GatherOptions) -> Result<Evidence> {
    let plan = plan(paths, options)?;
    let reads = read_here(&plan);
    finish(plan, reads)
}

/// A gather in three steps, so the reads of the dumps and the profiler
/// traces (the large per-rank files) can run elsewhere, one distributed task
/// per file: [`plan`] lists and classifies the files; the caller reads
/// [`Plan::dump_files`] and [`Plan::trace_files`] ([`read_here`] in this
/// process); [`finish`] assembles the evidence from those reads exactly as
/// [`gather`] does, errors and notes included.
pub struct Plan {
    paths: Vec<PathBuf>,
    options: GatherOptions,
    evidence: Evidence,
    damage: Vec<Error>,
    listing: Listing,
    dumps_used: bool,
}

impl Plan {
    /// The Flight Recorder dumps the analysis decodes: `(path, label)`.
    #[must_use]
    pub fn dump_files(&self) -> &[(PathBuf, String)] {
        if self.dumps_used {
            &self.listing.dumps
        } else {
            &[]
        }
    }

    /// The profiler traces the analysis reads: `(path, label)`.
    #[must_use]
    pub fn trace_files(&self) -> &[(PathBuf, String)] {
        &self.listing.traces
    }

    /// The profile cache directory the traces are read with.
    #[must_use]
    pub fn cache_dir(&self) -> Option<&Path> {
        self.options.cache_dir.as_deref()
    }
}

/// What reading a plan's files gave, in the plan's order.
pub struct Reads {
    /// One result per [`Plan::dump_files`] entry: the decoded dump, or its
    /// path-free error.
    pub dumps: Vec<Result<FrDump>>,
    /// The [`Plan::trace_files`] read as [`read_each`] reads them.
    pub traces: Result<(Vec<Result<RankProfile>>, CacheStats)>,
}

/// Lists and classifies the evidence in `paths` (files or directories).
///
/// # Errors
/// A missing path; a directory that cannot be read or holds too many files.
pub fn plan(paths: &[PathBuf], options: &GatherOptions) -> Result<Plan> {
    let mut listed: Vec<PathBuf> = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p)
            .map_err(|_| Error::new(ErrorKind::Io, format!("{}: does not exist", p.display())))?;
        if meta.is_dir() {
            walk(p, 0, &mut listed)?;
        } else {
            listed.push(p.clone());
        }
    }
    let mut evidence = Evidence::default();
    let mut damage: Vec<Error> = Vec::new();
    let listing = sort(&mut evidence, &mut damage, listed, options);
    let traces_only = options.uses != Uses::Everything;
    let no_traces = listing.traces.is_empty() && listing.merged.is_empty();
    let dumps_used = match options.uses {
        Uses::Everything => true,
        Uses::Traces => false,
        Uses::Timeline => no_traces,
    };
    let unused_dumps = if dumps_used {
        &[][..]
    } else {
        &listing.dumps[..]
    };
    let unused_texts = if traces_only {
        &listing.texts[..]
    } else {
        &[][..]
    };
    for (_, label) in unused_dumps.iter().chain(unused_texts) {
        evidence
            .files
            .push(skipped(label, "not used by this analysis"));
    }
    Ok(Plan {
        paths: paths.to_vec(),
        options: options.clone(),
        evidence,
        damage,
        listing,
        dumps_used,
    })
}

/// Reads a plan's dumps and traces in this process, in parallel.
#[must_use]
pub fn read_here(plan: &Plan) -> Reads {
    let dumps = plan
        .dump_files()
        .par_iter()
        .map(|(path, _)| read_dump_file(path))
        .collect();
    let traces = plan.trace_files();
    let traces = if traces.is_empty() {
        Ok((Vec::new(), CacheStats::default()))
    } else {
        let (paths, labels): (Vec<PathBuf>, Vec<String>) = traces.iter().cloned().unzip();
        read_each(&paths, &labels, None, plan.cache_dir())
    };
    Reads { dumps, traces }
}

/// One Flight Recorder dump decoded (errors path-free).
///
/// # Errors
/// An unreadable file or one that is not a dump.
pub fn read_dump_file(path: &Path) -> Result<FrDump> {
    read_input(path, MAX_INPUT_BYTES).and_then(|b| read_dump(&b))
}

/// Assembles the evidence from a plan and its reads.
///
/// # Errors
/// As [`gather`].
pub fn finish(plan: Plan, reads: Reads) -> Result<Evidence> {
    let Plan {
        paths,
        options,
        mut evidence,
        mut damage,
        listing,
        dumps_used,
    } = plan;
    let traces_only = options.uses != Uses::Everything;
    if dumps_used {
        add_dumps(&mut evidence, &mut damage, listing.dumps, reads.dumps);
        add_nccl_logs(&mut evidence, &mut damage, &listing.nccl_logs);
    }
    if let Some((path, label)) = listing.merged.first() {
        if let Some(other) = listing
            .merged
            .get(1)
            .map(|m| &m.1)
            .or(listing.traces.first().map(|t| &t.1))
        {
            return Err(Error::invalid(format!(
                "{label}: a merged commcanary trace cannot be read with {other}: give one merged trace, or the per-rank profiler traces"
            )));
        }
        read_merged(&mut evidence, path, label)?;
    }
    add_traces(&mut evidence, &mut damage, listing.traces, reads.traces)?;
    if !traces_only {
        texts::read_texts(&mut evidence, &mut damage, listing.texts);
    }
    let usable = match options.uses {
        Uses::Everything => !evidence.is_empty(),
        Uses::Traces => evidence.traces.is_some(),
        Uses::Timeline => evidence.traces.is_some() || !evidence.dumps.is_empty(),
    };
    if usable {
        evidence.damaged = damage.iter().map(ToString::to_string).collect();
        return Ok(evidence);
    }
    if let Some(first) = damage.into_iter().next() {
        return Err(first);
    }
    Err(nothing_usable(&paths, &evidence, options.uses))
}

/// The error for evidence with nothing usable in it, naming what was seen.
fn nothing_usable(paths: &[PathBuf], evidence: &Evidence, uses: Uses) -> Error {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let wanted = match uses {
        Uses::Everything => {
            "no hang evidence found (no Flight Recorder dump, profiler trace, stack dump or exception text)"
        }
        Uses::Traces => "no profiler trace found (this analysis reads PyTorch profiler traces)",
        Uses::Timeline => {
            "no profiler trace or Flight Recorder dump found (a timeline is drawn from either)"
        }
    };
    let seen = evidence.files.len();
    let tail = if seen == 0 {
        String::new()
    } else {
        format!(
            "; {seen} file(s) skipped, e.g. {}",
            skipped_example(evidence)
        )
    };
    Error::invalid(format!("{}: {wanted}{tail}", shown.join(", ")))
}

fn skipped_example(evidence: &Evidence) -> String {
    evidence
        .files
        .iter()
        .find_map(|f| match f {
            Json::Object(o) => match (o.get("file"), o.get("reason")) {
                (Some(Json::Str(file)), Some(Json::Str(reason))) => {
                    Some(format!("{file} ({reason})"))
                }
                _ => None,
            },
            _ => None,
        })
        .unwrap_or_default()
}

/// Each listed file to its reader by kind; what is not evidence, or is
/// unreadable, noted.
fn sort(
    evidence: &mut Evidence,
    damage: &mut Vec<Error>,
    listed: Vec<PathBuf>,
    options: &GatherOptions,
) -> Listing {
    let mut out = Listing {
        dumps: Vec::new(),
        nccl_logs: Vec::new(),
        traces: Vec::new(),
        merged: Vec::new(),
        texts: Vec::new(),
    };
    let kinds: Vec<Result<Kind>> = listed.par_iter().map(|p| classify(p)).collect();
    for (path, kind) in listed.into_iter().zip(kinds) {
        let label = path.display().to_string();
        match kind {
            Err(e) => {
                let e = Error::new(e.kind(), e.with_path(&label));
                evidence.files.push(skipped(&label, &format!("damaged: {e}")));
                damage.push(e);
            }
            Ok(Kind::Dump) => out.dumps.push((path, label)),
            Ok(Kind::NcclLog) if options.uses == Uses::Everything => out.nccl_logs.push((path, label)),
            Ok(Kind::NcclLog) => evidence.files.push(skipped(
                &label,
                "an NCCL profiler log: import the directory with commcanary import-nccl-profiler, then give the trace",
            )),
            Ok(Kind::Trace) => out.traces.push((path, label)),
            Ok(Kind::Merged) if options.merged_traces => out.merged.push((path, label)),
            Ok(Kind::Merged) => evidence.files.push(skipped(
                &label,
                "a commcanary trace: a merged trace leaves out the collectives that never finished; give the Flight Recorder dumps or the per-rank profiler traces",
            )),
            Ok(Kind::Text) => out.texts.push((path, label)),
            Ok(Kind::Other(why)) => evidence.files.push(skipped(&label, why)),
        }
    }
    out
}

fn walk(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) -> Result<()> {
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
            out.push(p);
        }
    }
    Ok(())
}

pub(super) fn file_json(label: &str, kind: &str, rank: Option<i64>, used: bool) -> Json {
    Json::object()
        .with("file", label)
        .with("kind", kind)
        .with("rank", rank)
        .with("used", used)
}

/// A file listed as skipped, with the reason.
pub(super) fn skipped(label: &str, reason: &str) -> Json {
    file_json(label, "skipped", None, false).with("reason", reason)
}

/// A file skipped as damaged: noted, and kept as the error to give when
/// nothing usable remains.
pub(super) fn damaged(evidence: &mut Evidence, damage: &mut Vec<Error>, label: &str, e: Error) {
    let e = Error::new(e.kind(), e.with_path(label));
    evidence
        .files
        .push(skipped(label, &format!("damaged: {e}")));
    damage.push(e);
}

fn add_dumps(
    evidence: &mut Evidence,
    damage: &mut Vec<Error>,
    dumps: Vec<(PathBuf, String)>,
    reads: Vec<Result<FrDump>>,
) {
    for ((path, label), dump) in dumps.into_iter().zip(reads) {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let result = dump.and_then(|dump| {
            let rank = rank_from_file_name(&name).ok_or_else(|| {
                Error::invalid(
                    "cannot tell which rank wrote this Flight Recorder dump (torch names them <prefix><rank>, e.g. fr_trace_rank_3)",
                )
            })?;
            Ok(LabeledDump {
                label: label.clone(),
                rank,
                dump,
            })
        });
        match result {
            Ok(d) => {
                evidence.files.push(
                    file_json(&d.label, "flight_recorder", Some(d.rank), true)
                        .with("encoding", d.dump.encoding)
                        .with("version", d.dump.version.as_str())
                        .with("entries", d.dump.entries.len()),
                );
                evidence.dumps.push(d);
            }
            Err(e) => damaged(evidence, damage, &label, e),
        }
    }
}

/// The NCCL profiler plugin's log segments, as one dump per process
/// (`import::nccl_profiler::evidence`); a damaged segment is skipped and
/// said, a set whose communicators cannot be resolved is damage for all.
fn add_nccl_logs(evidence: &mut Evidence, damage: &mut Vec<Error>, files: &[(PathBuf, String)]) {
    use crate::import::nccl_profiler::{evidence::as_dumps, logs::read_files};
    if files.is_empty() {
        return;
    }
    let paths: Vec<PathBuf> = files.iter().map(|f| f.0.clone()).collect();
    let (logs, broken) = read_files(&paths);
    for (path, e) in broken {
        let label = path.display().to_string();
        evidence
            .files
            .push(skipped(&label, &format!("damaged: {e}")));
        damage.push(e);
    }
    match as_dumps(&logs) {
        Ok(dumps) => {
            for ((label, rank, dump), log) in dumps.into_iter().zip(&logs) {
                for f in &log.files {
                    evidence.files.push(
                        file_json(&f.display().to_string(), "nccl_profiler", Some(rank), true)
                            .with("process", label.as_str())
                            .with("entries", dump.entries.len()),
                    );
                }
                evidence.dumps.push(LabeledDump { label, rank, dump });
            }
        }
        Err(e) => {
            for log in &logs {
                for f in &log.files {
                    evidence
                        .files
                        .push(skipped(&f.display().to_string(), &format!("damaged: {e}")));
                }
            }
            damage.push(e);
        }
    }
}

fn add_traces(
    evidence: &mut Evidence,
    damage: &mut Vec<Error>,
    traces: Vec<(PathBuf, String)>,
    reads: Result<(Vec<Result<RankProfile>>, CacheStats)>,
) -> Result<()> {
    if traces.is_empty() {
        return Ok(());
    }
    let labels: Vec<String> = traces.into_iter().map(|(_, label)| label).collect();
    let (results, _) = reads?;
    let mut profiles = Vec::new();
    let mut kept = Vec::new();
    for (result, label) in results.into_iter().zip(labels) {
        match result {
            Ok(p) => {
                evidence.files.push(
                    file_json(&label, "kineto", Some(p.rank), true).with("calls", p.calls.len()),
                );
                profiles.push(p);
                kept.push(label);
            }
            Err(e) => {
                // The reader's errors already name the file.
                evidence
                    .files
                    .push(skipped(&label, &format!("damaged: {e}")));
                damage.push(e);
            }
        }
    }
    if !profiles.is_empty() {
        evidence.traces = Some(align_job(profiles, &kept, &Default::default())?);
    }
    Ok(())
}

fn read_merged(evidence: &mut Evidence, path: &Path, label: &str) -> Result<()> {
    let named = |e: Error| Error::new(e.kind(), e.with_path(label));
    let trace = crate::trace::load(path, &crate::trace::LoadOptions::default()).map_err(named)?;
    let (job, skipped_events) = job_from_trace(&trace, label)?;
    for p in &job.profiles {
        evidence.files.push(
            file_json(label, crate::document::TRACE, Some(p.rank), true)
                .with("calls", p.calls.len()),
        );
    }
    if skipped_events.no_arrivals > 0 {
        evidence.files.push(skipped(
            label,
            &format!(
                "{} event(s) without every member's arrival",
                skipped_events.no_arrivals
            ),
        ));
    }
    evidence.traces = Some(job);
    Ok(())
}
