//! A whole job's Kineto files → one `commcanary.trace.v1` trace.
//!
//! [`import_job`] takes one [`RankProfile`] per file, joins the windows of
//! each rank, checks that the files are one job (world sizes and process
//! groups agree; no rank twice), puts every rank on the job clock
//! (`baseTimeNanoseconds` + `ts`, which one host shares, plus the offsets
//! given for multi-host captures), matches instances ([`super::align`]) and
//! writes one event per complete instance ([`super::events`]). What is
//! measured and what is not goes into `workload.notes`.

use rustc_hash::FxHashMap;

use super::align::{Instance, Job, Member, align};
use super::events::{PartialCollective, write_events};
use super::profile::{GroupDecl, RankProfile};
use crate::error::{Error, Result};
use crate::json::canon::{self, ObjectWriter};
use crate::trace::{Trace, TraceBuilder};

/// Options of a multi-rank import.
#[derive(Debug, Clone, Default)]
pub struct JobOptions {
    /// `workload.name`.
    pub workload_name: String,
    /// Phase of events outside any user annotation (else `unknown`).
    pub phase: Option<String>,
    /// Per global rank, µs added to that rank's clock.
    pub clock_offsets_us: FxHashMap<i64, f64>,
    /// Refuse a job with partial collectives.
    pub strict: bool,
}

impl JobOptions {
    /// Options from a caller's values, checked: a non-empty workload name
    /// and phase, finite clock offsets. `rank` (a single file's rank) and
    /// `files` are checked alongside, as every import entry point takes them.
    ///
    /// # Errors
    /// The first value out of range, named as the API spells it.
    pub fn requested(
        workload_name: String,
        phase: Option<String>,
        rank: Option<i64>,
        files: usize,
        clock_offsets_us: impl IntoIterator<Item = (i64, f64)>,
        strict: bool,
    ) -> Result<Self> {
        check_import_names(&workload_name, phase.as_deref(), rank)?;
        if rank.is_some() && files > 1 {
            return Err(Error::option("rank", "applies to a single file only"));
        }
        let clock_offsets_us: FxHashMap<i64, f64> = clock_offsets_us.into_iter().collect();
        if clock_offsets_us
            .iter()
            .any(|(rank, us)| *rank < 0 || !us.is_finite())
        {
            return Err(Error::option("clock_offsets", CLOCK_OFFSETS_RULE));
        }
        Ok(Self {
            workload_name,
            phase,
            clock_offsets_us,
            strict,
        })
    }
}

/// The rule clock offsets follow, as an error states it.
pub const CLOCK_OFFSETS_RULE: &str = "must map non-negative integer ranks to finite microseconds";

/// Reads a clock-offset file: a JSON object mapping each rank (a decimal
/// string) to the microseconds added to its clock.
///
/// # Errors
/// Not JSON, not an object, or a member that is not a rank mapped to a
/// finite number, named as `field '3'`.
pub fn read_clock_offsets(bytes: &[u8]) -> Result<Vec<(i64, f64)>> {
    use crate::json::{JsonLimits, Node, parse};
    let doc = parse(bytes, JsonLimits::default())?;
    let root = doc
        .root()
        .filter(crate::json::Value::is_object)
        .ok_or_else(|| Error::invalid("must hold a JSON object mapping ranks to microseconds"))?;
    root.members()
        .map(|(key, value)| {
            let key = String::from_utf8_lossy(key);
            let rank = (!key.is_empty() && key.bytes().all(|b| b.is_ascii_digit()))
                .then(|| key.parse::<i64>().ok())
                .flatten();
            let us = match value.node() {
                Node::Int(i) => Some(i as f64),
                Node::Float { value, .. } if value.is_finite() => Some(value),
                _ => None,
            };
            match (rank, us) {
                (Some(rank), Some(us)) => Ok((rank, us)),
                _ => Err(Error::invalid(format!(
                    "field '{key}' must map a rank to a finite number of microseconds"
                ))),
            }
        })
        .collect()
}

/// The names every import takes: a non-empty workload name and phase, a
/// non-negative rank.
///
/// # Errors
/// The first one out of range, named.
pub fn check_import_names(
    workload_name: &str,
    phase: Option<&str>,
    rank: Option<i64>,
) -> Result<()> {
    if workload_name.is_empty() {
        return Err(Error::option("workload_name", "must be non-empty"));
    }
    if phase == Some("") {
        return Err(Error::option("phase", "must be non-empty"));
    }
    if rank.is_some_and(|r| r < 0) {
        return Err(Error::option("rank", "must be non-negative"));
    }
    Ok(())
}

/// What a multi-rank import kept and skipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobCounts {
    /// Ranks with a trace.
    pub ranks: u64,
    /// Files read.
    pub files: u64,
    /// Collective instances imported (events).
    pub imported: u64,
    /// Instances seen on some members only (kept out).
    pub partial: u64,
    /// Events whose group fitted more than one candidate equally.
    pub ambiguous: u64,
    /// Control ops skipped, over all ranks.
    pub control: u64,
    /// Zero-sized messages skipped.
    pub empty: u64,
    /// Nested duplicate records skipped.
    pub nested: u64,
    /// Calls with no element type anywhere (no size).
    pub undtyped: u64,
    /// Collective calls with no execution range.
    pub unlinked: u64,
}

/// A job's imported trace, its counts and its partial collectives.
#[derive(Debug, Clone)]
pub struct JobImport {
    /// The merged trace.
    pub trace: Trace,
    /// Counts.
    pub counts: JobCounts,
    /// Collectives seen on some members only, in time order.
    pub partial: Vec<PartialCollective>,
}

/// Imports a job from its per-file profiles (any order; windows of a rank
/// are joined). `labels[i]` names the file of `profiles[i]` in messages.
///
/// # Errors
/// Files of different jobs, a rank given twice, group lists that disagree,
/// nothing importable, or (with `strict`) a partial collective.
pub fn import_job(
    profiles: Vec<RankProfile>,
    labels: &[String],
    options: &JobOptions,
) -> Result<JobImport> {
    let files = profiles.len() as u64;
    let aligned = align_job(profiles, labels, &options.clock_offsets_us)?;
    import_aligned(&aligned, files, options, None)
}

/// Imports an aligned job (what [`import_job`] does after aligning).
/// `recovered_steps`: the calls' steps were recovered from the collective
/// sequence (`analysis::steps::import_job_with_steps`), this many; the
/// workload says so.
///
/// # Errors
/// Nothing importable, or (with `strict`) a partial collective.
pub fn import_aligned(
    aligned: &AlignedJob,
    files: u64,
    options: &JobOptions,
    recovered_steps: Option<usize>,
) -> Result<JobImport> {
    let (profiles, groups) = (&aligned.profiles, &aligned.groups);
    let epoch = aligned.epoch;
    let job = aligned.job();
    let instances = &aligned.instances;
    let mut b = TraceBuilder::new();
    let (mut partial, origin) = write_events(&job, instances, options.phase.as_deref(), &mut b);
    if recovered_steps.is_some() {
        // A recovered step is no `ProfilerStep#N` to point a person at.
        partial.iter_mut().for_each(|p| p.step = -1);
    }
    let ambiguous = instances
        .iter()
        .filter(|i| i.complete && i.ambiguous)
        .count() as u64;
    let facts = CallFacts::of(profiles);
    let tail = JobTail {
        profiles,
        groups,
        epoch,
        files,
        facts,
        ambiguous,
        origin,
        recovered_steps,
    };
    finish_import(b, partial, &tail, options)
}

/// What the end of an import needs of the job's calls, without them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CallFacts {
    /// Every call has a measured end.
    pub ends_measured: bool,
    /// Some call has linked device kernels.
    pub device: bool,
}

impl CallFacts {
    /// The facts of `profiles`' calls.
    #[must_use]
    pub fn of(profiles: &[RankProfile]) -> Self {
        Self {
            ends_measured: profiles
                .iter()
                .all(|p| p.calls.iter().all(|c| c.end_measured)),
            device: profiles
                .iter()
                .any(|p| p.calls.iter().any(|c| c.kernels > 0)),
        }
    }

    /// Both ranks' facts together.
    #[must_use]
    pub fn and(self, other: Self) -> Self {
        Self {
            ends_measured: self.ends_measured && other.ends_measured,
            device: self.device || other.device,
        }
    }
}

/// The job-wide facts the end of an import writes: the ranks (their calls
/// need not be there), groups, clock, and what the events' writing found.
pub struct JobTail<'a> {
    /// One profile per rank (its calls are not read).
    pub profiles: &'a [RankProfile],
    /// The job's groups.
    pub groups: &'a [GroupDecl],
    /// The job clock's origin, ns.
    pub epoch: i64,
    /// Files read.
    pub files: u64,
    /// Facts of every rank's calls.
    pub facts: CallFacts,
    /// Complete instances that fit several groups.
    pub ambiguous: u64,
    /// The first event's start on the job clock, µs.
    pub origin: f64,
    /// Steps recovered from the collective sequence, if they were.
    pub recovered_steps: Option<usize>,
}

/// The end of every job import: counts, the checks on what was imported,
/// `system` and `workload`, and the trace from the events in `b`.
///
/// # Errors
/// Nothing importable, or (with `strict`) a partial collective.
pub fn finish_import(
    mut b: TraceBuilder,
    partial: Vec<PartialCollective>,
    tail: &JobTail<'_>,
    options: &JobOptions,
) -> Result<JobImport> {
    let (profiles, groups, epoch) = (tail.profiles, tail.groups, tail.epoch);
    let mut counts = sum_counts(profiles);
    counts.files = tail.files;
    counts.imported = b.len() as u64;
    counts.partial = partial.len() as u64;
    counts.ambiguous = tail.ambiguous;
    if counts.imported == 0 {
        return Err(Error::invalid(
            "no collective was seen on all of its member ranks; nothing to import",
        ));
    }
    if options.strict && !partial.is_empty() {
        let p = &partial[0];
        return Err(Error::invalid(format!(
            "{} collective(s) are seen on some member ranks only (--strict); first: {}",
            partial.len(),
            describe(p)
        )));
    }
    b.set_member(b"system", system_json(profiles, groups, epoch));
    b.set_member(b"workload", workload_json(&counts, &partial, tail, options));
    Ok(JobImport {
        trace: b.finish(Vec::new()),
        counts,
        partial,
    })
}

/// A job's profiles joined per rank, checked to be one job, and matched
/// into collective instances: what the importer and the hang diagnosis
/// share.
pub struct AlignedJob {
    /// One profile per rank (windows joined), by rank.
    pub profiles: Vec<RankProfile>,
    /// The file label of each profile.
    pub labels: Vec<String>,
    /// The job's groups.
    pub groups: Vec<GroupDecl>,
    /// Offset of each profile's clock onto the job clock, µs.
    pub shifts: Vec<f64>,
    /// The earliest rank epoch, ns: the job clock's origin.
    pub epoch: i64,
    /// Profile index of each rank.
    pub slot_of_rank: FxHashMap<i64, usize>,
    /// Per profile, per profile-group index, the job group index.
    pub group_maps: Vec<Vec<usize>>,
    /// Complete and partial instances.
    pub instances: Vec<Instance>,
    /// What the job was read from: `kineto` (per-rank profiler traces) or
    /// `commcanary.trace.v1` (a merged trace, [`super::from_trace`]) or
    /// `flight_recorder` (dumps, `analysis::hang::as_job`).
    pub source: &'static str,
    /// Calls still in flight when their rank's evidence was taken (known
    /// from Flight Recorder dumps only; a trace records finished calls).
    pub in_flight: Vec<Member>,
}

impl AlignedJob {
    /// The matcher's view of the job.
    #[must_use]
    pub fn job(&self) -> Job<'_> {
        Job {
            profiles: &self.profiles,
            shifts: &self.shifts,
            groups: &self.groups,
            slot_of_rank: &self.slot_of_rank,
            group_maps: &self.group_maps,
        }
    }
}

/// Joins windows, checks the files are one job and matches instances.
///
/// # Errors
/// Files of different jobs, a rank given twice, group lists that disagree.
pub fn align_job(
    profiles: Vec<RankProfile>,
    labels: &[String],
    clock_offsets_us: &FxHashMap<i64, f64>,
) -> Result<AlignedJob> {
    let (profiles, labels) = join_windows(profiles, labels)?;
    let mut aligned = frame_job(profiles, labels, clock_offsets_us)?;
    aligned.instances = align(&aligned.job());
    Ok(aligned)
}

/// A job of ranks whose windows are joined (one profile per rank, by rank),
/// checked to be one job and put on the job clock, not yet matched: what
/// [`align_job`] does before matching. The profiles' calls are not read, so
/// ranks without their calls (a cluster's client) frame the same job.
///
/// # Errors
/// World sizes or group lists that disagree.
pub fn frame_job(
    profiles: Vec<RankProfile>,
    labels: Vec<String>,
    clock_offsets_us: &FxHashMap<i64, f64>,
) -> Result<AlignedJob> {
    check_world(&profiles, &labels)?;
    let groups = job_groups(&profiles, &labels)?;
    let group_maps: Vec<Vec<usize>> = profiles
        .iter()
        .map(|p| {
            p.groups
                .iter()
                .map(|g| groups.iter().position(|j| j.name == g.name).unwrap_or(0))
                .collect()
        })
        .collect();
    let epoch = profiles.iter().map(|p| p.epoch_ns).min().unwrap_or(0);
    let shifts: Vec<f64> = profiles
        .iter()
        .map(|p| {
            (p.epoch_ns - epoch) as f64 / 1000.0
                + clock_offsets_us.get(&p.rank).copied().unwrap_or(0.0)
        })
        .collect();
    let slot_of_rank: FxHashMap<i64, usize> = profiles
        .iter()
        .enumerate()
        .map(|(i, p)| (p.rank, i))
        .collect();
    Ok(AlignedJob {
        profiles,
        labels,
        groups,
        shifts,
        epoch,
        slot_of_rank,
        group_maps,
        instances: Vec::new(),
        source: "kineto",
        in_flight: Vec::new(),
    })
}

/// One line about a partial collective.
#[must_use]
pub fn describe(p: &PartialCollective) -> String {
    let step = if p.step >= 0 {
        format!(" in ProfilerStep#{}", p.step)
    } else {
        String::new()
    };
    format!(
        "{} on group {} at {:.3} us{step}, seen on ranks {:?}, missing ranks {:?}",
        p.op, p.group, p.start_us, p.seen, p.missing
    )
}

/// When a file's calls ran, µs on its host's clock: first arrival, last
/// end (what orders a rank's windows and finds two that overlap).
#[must_use]
pub fn window_span(p: &RankProfile) -> (f64, f64) {
    let base = p.epoch_ns as f64 / 1000.0;
    let first = p.calls.first().map_or(f64::INFINITY, |c| c.arrival);
    let last = p
        .calls
        .iter()
        .map(|c| c.end)
        .fold(f64::NEG_INFINITY, f64::max);
    (first + base, last + base)
}

/// Joins the files of each rank (in time order); refuses a rank whose files
/// overlap in time (the same rank given twice).
fn join_windows(
    profiles: Vec<RankProfile>,
    labels: &[String],
) -> Result<(Vec<RankProfile>, Vec<String>)> {
    let spans: Vec<(f64, f64)> = profiles.iter().map(window_span).collect();
    join_spanned(profiles, &spans, labels).map(|(p, l, _)| (p, l))
}

/// Ranks joined from files: one profile and label per rank, and each rank's
/// files (indices into what was given), in the order joined.
pub type Joined = (Vec<RankProfile>, Vec<String>, Vec<Vec<usize>>);

/// [`join_windows`] with each file's [`window_span`] given (the profiles'
/// calls are not read, so heads without calls join as their ranks' files
/// do); also each joined rank's files, in the order joined.
///
/// # Errors
/// A rank whose files overlap in time, or disagree on the rank.
pub fn join_spanned(
    profiles: Vec<RankProfile>,
    spans: &[(f64, f64)],
    labels: &[String],
) -> Result<Joined> {
    let mut order: Vec<usize> = (0..profiles.len()).collect();
    order.sort_by(|&a, &b| {
        profiles[a]
            .rank
            .cmp(&profiles[b].rank)
            .then(spans[a].0.total_cmp(&spans[b].0))
    });
    let mut taken: Vec<Option<RankProfile>> = profiles.into_iter().map(Some).collect();
    let mut out: Vec<RankProfile> = Vec::new();
    let mut out_labels: Vec<String> = Vec::new();
    let mut files: Vec<Vec<usize>> = Vec::new();
    let mut previous: Option<(i64, f64, usize)> = None;
    for i in order {
        let p = taken[i].take().unwrap_or_default();
        match (previous, out.last_mut()) {
            (Some((rank, end, k)), Some(joined)) if rank == p.rank => {
                if spans[i].0 < end {
                    return Err(Error::invalid(format!(
                        "{}: holds rank {rank} like {}, and their events overlap in time (the same rank given twice?)",
                        labels[i], labels[k]
                    )));
                }
                joined
                    .concat(p)
                    .map_err(|e| Error::invalid(format!("{}: {}", labels[i], e.message())))?;
                if let Some(f) = files.last_mut() {
                    f.push(i);
                }
                previous = Some((rank, end.max(spans[i].1), i));
            }
            _ => {
                previous = Some((p.rank, spans[i].1, i));
                out.push(p);
                out_labels.push(labels[i].clone());
                files.push(vec![i]);
            }
        }
    }
    Ok((out, out_labels, files))
}

/// A rank's files' profiles joined in the order given (what
/// [`join_spanned`] says), as the one-process import joins them.
///
/// # Errors
/// No profile, or files that disagree on the rank.
pub fn join_profiles(profiles: Vec<RankProfile>, labels: &[String]) -> Result<RankProfile> {
    let mut it = profiles.into_iter().zip(labels);
    let Some((mut joined, _)) = it.next() else {
        return Err(Error::invalid("no file to join"));
    };
    for (p, label) in it {
        joined
            .concat(p)
            .map_err(|e| Error::invalid(format!("{label}: {}", e.message())))?;
    }
    Ok(joined)
}

/// World sizes agree and every rank is below it.
fn check_world(profiles: &[RankProfile], labels: &[String]) -> Result<()> {
    let Some((k, world)) = profiles
        .iter()
        .enumerate()
        .find_map(|(i, p)| p.world_size.map(|w| (i, w)))
    else {
        return Ok(());
    };
    for (i, p) in profiles.iter().enumerate() {
        if let Some(w) = p.world_size
            && w != world
        {
            return Err(Error::invalid(format!(
                "{}: world_size {w} disagrees with {}'s {world}: traces of different jobs",
                labels[i], labels[k]
            )));
        }
        if p.rank >= world {
            return Err(Error::invalid(format!(
                "{}: rank {} is not below the world size {world}",
                labels[i], p.rank
            )));
        }
    }
    Ok(())
}

/// The job's groups: every rank's, by name, the same everywhere; each rank
/// in the groups it lists; each member listing the groups it is in.
fn job_groups(profiles: &[RankProfile], labels: &[String]) -> Result<Vec<GroupDecl>> {
    let mut groups: Vec<(GroupDecl, usize)> = Vec::new();
    for (i, p) in profiles.iter().enumerate() {
        for g in &p.groups {
            if !g.ranks.contains(&p.rank) {
                return Err(Error::invalid(format!(
                    "{}: lists process group '{}' with ranks {:?}, which do not include its own rank {}",
                    labels[i], g.name, g.ranks, p.rank
                )));
            }
            match groups.iter().find(|(j, _)| j.name == g.name) {
                Some((j, k)) if j.ranks != g.ranks => {
                    return Err(Error::invalid(format!(
                        "{}: process group '{}' has ranks {:?}, but {} says {:?}: traces of different jobs",
                        labels[i], g.name, g.ranks, labels[*k], j.ranks
                    )));
                }
                Some(_) => {}
                None => groups.push((g.clone(), i)),
            }
        }
    }
    for (g, k) in &groups {
        for (i, p) in profiles.iter().enumerate() {
            if g.ranks.contains(&p.rank)
                && !p.groups.is_empty()
                && !p.groups.iter().any(|m| m.name == g.name)
            {
                return Err(Error::invalid(format!(
                    "{}: does not list process group '{}' that {} says rank {} belongs to: traces of different jobs",
                    labels[i], g.name, labels[*k], p.rank
                )));
            }
        }
    }
    let mut groups: Vec<GroupDecl> = groups.into_iter().map(|(g, _)| g).collect();
    if groups.is_empty()
        && let Some(world) = profiles.iter().find_map(|p| p.world_size)
    {
        groups.push(GroupDecl {
            name: "0".to_owned(),
            desc: "default_pg (assumed: no pg_config)".to_owned(),
            ranks: (0..world).collect(),
        });
    }
    Ok(groups)
}

fn sum_counts(profiles: &[RankProfile]) -> JobCounts {
    let mut c = JobCounts {
        ranks: profiles.len() as u64,
        ..JobCounts::default()
    };
    for p in profiles {
        c.control += p.counts.control;
        c.empty += p.counts.empty;
        c.nested += p.counts.nested;
        c.undtyped += p.counts.undtyped;
        c.unlinked += p.counts.unlinked;
    }
    c
}

/// `system`: the source, the backend and the job's groups.
fn system_json(profiles: &[RankProfile], groups: &[GroupDecl], epoch: i64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut o = ObjectWriter::new(&mut out);
    if let Some(b) = profiles.iter().find_map(|p| p.backend.as_deref()) {
        o.str("kineto_backend", b);
    }
    o.i64("kineto_base_time_ns", epoch);
    let ranks: Vec<i64> = profiles.iter().map(|p| p.rank).collect();
    canon::write_i64_array(o.key("kineto_imported_ranks"), &ranks);
    let list = o.key("kineto_process_groups");
    list.push(b'[');
    for (i, g) in groups.iter().enumerate() {
        if i > 0 {
            list.push(b',');
        }
        let mut e = ObjectWriter::new(list);
        e.str("desc", &g.desc);
        e.str("name", &g.name);
        canon::write_i64_array(e.key("ranks"), &g.ranks);
        e.end();
    }
    list.push(b']');
    if let Some(w) = profiles.iter().find_map(|p| p.world_size) {
        o.i64("kineto_world_size", w);
    }
    o.str("source_format", "pytorch-kineto");
    o.end();
    out
}

/// `workload`: name, counts, partial collectives and what is measured.
fn workload_json(
    c: &JobCounts,
    partial: &[PartialCollective],
    tail: &JobTail<'_>,
    options: &JobOptions,
) -> Vec<u8> {
    let (origin, epoch, recovered_steps) = (tail.origin, tail.epoch, tail.recovered_steps);
    let mut out = Vec::new();
    let mut o = ObjectWriter::new(&mut out);
    o.str("import_source", "pytorch-kineto");
    o.i64("imported_events", c.imported as i64);
    o.i64("imported_ranks", c.ranks as i64);
    o.i64(
        "kineto_job_start_ns",
        epoch + (origin * 1000.0).round() as i64,
    );
    if let Some(count) = recovered_steps {
        o.str("kineto_steps", "recovered");
        o.i64("kineto_steps_recovered", count as i64);
    }
    o.str("name", &options.workload_name);
    o.str("notes", &notes(c, partial, tail.facts, options));
    o.i64("partial_collectives", c.partial as i64);
    if let Some(p) = partial.first() {
        o.str("partial_collectives_first", &describe(p));
    }
    o.i64("skipped_control_events", c.control as i64);
    o.i64("skipped_empty_events", c.empty as i64);
    o.i64("skipped_nested_events", c.nested as i64);
    o.i64("skipped_undtyped_events", c.undtyped as i64);
    o.end();
    out
}

fn notes(
    c: &JobCounts,
    partial: &[PartialCollective],
    facts: CallFacts,
    options: &JobOptions,
) -> String {
    let (measured_ends, device) = (facts.ends_measured, facts.device);
    let mut s = format!(
        "Imported from the PyTorch Kineto profiler traces of {} rank(s) ({} file(s)), one event per collective instance matched across its member ranks. Measured: per-rank arrival (rank_arrival_us, on the shared clock baseTimeNanoseconds + ts{}), compute before and during each collective from the profiled compute activity, concurrent communicators, steps (ProfilerStep#N) and phases (user annotations) where present.",
        c.ranks,
        c.files,
        if options.clock_offsets_us.is_empty() {
            ""
        } else {
            " corrected by the given clock offsets"
        },
    );
    s.push_str(if device {
        " Device time per collective is measured from its linked GPU kernels (device_us) where every member has one."
    } else {
        " No GPU kernels: no device time is claimed."
    });
    if !measured_ends {
        s.push_str(
            " Some collectives have no execution range, so their per-rank end is not measured.",
        );
    }
    s.push_str(" Not claimed: observed exposed latency.");
    s.push_str(&format!(
        " Skipped {} control op(s), {} zero-sized message(s), {} nested duplicate record(s) and {} call(s) without an element type.",
        c.control, c.empty, c.nested, c.undtyped
    ));
    if c.ambiguous > 0 {
        s.push_str(&format!(" {} event(s) fit more than one process group equally (metadata kineto_group_ambiguous).", c.ambiguous));
    }
    match partial.first() {
        Some(p) => s.push_str(&format!(
            " {} collective(s) were seen on some member ranks only (a hang or a truncated profiling window) and are not events; first: {}.",
            partial.len(),
            describe(p)
        )),
        None => s.push_str(" Every collective was seen on all of its member ranks."),
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_offsets_map_ranks_to_finite_microseconds() {
        let mut read = read_clock_offsets(br#"{"0": 0, "3": -12.5}"#).unwrap();
        read.sort_by_key(|p| p.0);
        assert_eq!(read, [(0, 0.0), (3, -12.5)]);
        let e = read_clock_offsets(br#"{"x": 1}"#).unwrap_err();
        assert_eq!(
            e.message(),
            "field 'x' must map a rank to a finite number of microseconds"
        );
        assert!(read_clock_offsets(b"[1]").is_err());
        let names = || "w".to_owned();
        let e = JobOptions::requested(names(), None, None, 2, [(-1, 0.0)], false).unwrap_err();
        assert_eq!(e.option_name(), Some("clock_offsets"));
        let e = JobOptions::requested(names(), None, None, 2, [(1, f64::NAN)], false).unwrap_err();
        assert_eq!(e.option_rule(), CLOCK_OFFSETS_RULE);
    }
}
