//! A job's timeline as Chrome-trace JSON, which Perfetto and
//! `chrome://tracing` open: one process per rank, one track (thread) per
//! process group plus a `steps` track, a slice per call, flows joining the
//! members of each collective instance, and instant marks for stragglers
//! and for a hang.
//!
//! Layout: `pid` is the global rank; `tid` 0 is the steps track, `tid`
//! `1 + g` the track of job group `g`, and the last `tid` holds calls
//! matched to no instance. Times (`ts`, `dur`) are µs from the job's
//! earliest event (`otherData.origin_us` says where that is on the
//! importer's job clock), to the nanosecond. Steps are `ProfilerStep#N`
//! spans, or, in traces without markers, the spans of the steps recovered
//! from the collective sequence. A flow (`s`, `t`…, `f`) runs through an
//! instance's members in arrival order, `id` the instance index.
//!
//! Invariants: the same evidence and marks give the same bytes; every
//! event names its rank's `pid` and a declared `tid`; the format
//! identifier is in `otherData.format` (Chrome-trace readers ignore
//! `otherData`).

use crate::analysis::evidence::Evidence;
use crate::analysis::hang::as_job::job_from_dumps;
use crate::analysis::steps::{self, groups_of_calls};
use crate::analysis::stragglers::{Stragglers, analyze};
use crate::error::{Error, Result};
use crate::import::kineto::AlignedJob;
use crate::json::canon::{write_f64_rounded, write_i64, write_str};

/// The format identifier.
pub const FORMAT: &str = crate::document::TIMELINE;

/// What a `commcanary.hang.v1` document puts on a timeline: a mark on each
/// root, and on each present rank of each partial collective, and the job
/// it describes (checked against the traces' job before a mark is placed).
///
/// # Errors
/// Not JSON, not a hang document, or a field of the wrong kind, named by
/// its path in the document (`root[0].rank: expected int`).
pub fn read_hang_document(bytes: &[u8]) -> Result<(Vec<HangMark>, HangJob)> {
    use crate::json::{JsonLimits, Node, Value, parse};
    let doc = parse(bytes, JsonLimits::default())
        .map_err(|e| Error::invalid(format!("not JSON: {}", e.message())))?;
    let root = doc.root().filter(Value::is_object);
    if root.and_then(|r| r.get("format")).and_then(|f| f.as_str()) != Some(crate::document::HANG) {
        return Err(Error::invalid(format!(
            "format: expected {}",
            crate::document::HANG
        )));
    }
    let root = root.expect("checked above");
    fn bad(at: &str, kind: &str) -> Error {
        Error::invalid(format!("{at}: expected {kind}"))
    }
    fn list<'a>(v: Option<Value<'a>>, at: &str) -> Result<Vec<Value<'a>>> {
        match v {
            Some(v) if v.is_array() => Ok(v.elements().collect()),
            _ => Err(bad(at, "list")),
        }
    }
    let object = |v: Option<Value<'_>>, at: &str| -> Result<()> {
        if v.is_some_and(|v| v.is_object()) {
            Ok(())
        } else {
            Err(bad(at, "dict"))
        }
    };
    let int = |v: Option<Value<'_>>, at: &str| -> Result<i64> {
        match v.map(|v| v.node()) {
            Some(Node::Int(i)) => Ok(i),
            _ => Err(bad(at, "int")),
        }
    };
    let text = |v: Option<Value<'_>>, at: &str| -> Result<String> {
        v.and_then(|v| v.as_str())
            .map(str::to_owned)
            .ok_or_else(|| bad(at, "str"))
    };
    let group_name = |v: Option<Value<'_>>, at: &str| -> Result<Option<String>> {
        object(v, at)?;
        Ok(v.and_then(|g| g.get("name"))
            .and_then(|n| n.as_str())
            .map(str::to_owned))
    };
    let mut marks = Vec::new();
    for (i, r) in list(root.get("root"), "root")?.into_iter().enumerate() {
        let at = format!("root[{i}]");
        object(Some(r), &at)?;
        let rank = int(r.get("rank"), &format!("{at}.rank"))?;
        let group = group_name(r.get("group"), &format!("{at}.group"))?;
        let op = text(r.get("op"), &format!("{at}.op"))?;
        let reason = text(r.get("reason"), &format!("{at}.reason"))?;
        marks.push(HangMark {
            rank,
            group,
            label: format!("root: {op}: {reason}"),
        });
    }
    let partials = list(root.get("partial_collectives"), "partial_collectives")?;
    for (i, p) in partials.into_iter().enumerate() {
        let at = format!("partial_collectives[{i}]");
        object(Some(p), &at)?;
        let group = group_name(p.get("group"), &format!("{at}.group"))?;
        let op = text(p.get("op"), &format!("{at}.op"))?;
        let missing = list(p.get("missing_ranks"), &format!("{at}.missing_ranks"))?;
        let missing: Vec<String> = (missing.iter())
            .map(|m| String::from_utf8_lossy(&crate::json::canon::to_vec(*m)).into_owned())
            .collect();
        let present = list(p.get("present_ranks"), &format!("{at}.present_ranks"))?;
        for (j, rank) in present.into_iter().enumerate() {
            let rank = int(Some(rank), &format!("{at}.present_ranks[{j}]"))?;
            marks.push(HangMark {
                rank,
                group: group.clone(),
                label: format!("stuck in {op}, waiting for rank(s) {}", missing.join(", ")),
            });
        }
    }
    let world = int(root.get("world_size"), "world_size")?;
    let mut groups = Vec::new();
    for (i, g) in list(root.get("groups"), "groups")?.into_iter().enumerate() {
        let at = format!("groups[{i}]");
        object(Some(g), &at)?;
        let name = text(g.get("name"), &format!("{at}.name"))?;
        let ranks = list(g.get("ranks"), &format!("{at}.ranks"))?;
        let ranks = (ranks.into_iter().enumerate())
            .map(|(j, r)| int(Some(r), &format!("{at}.ranks[{j}]")))
            .collect::<Result<Vec<i64>>>()?;
        groups.push((name, ranks));
    }
    Ok((marks, HangJob { world, groups }))
}

/// A hang diagnosis's mark: placed at the end of the rank's last call (on
/// its group's track when the group is named and the rank has calls there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HangMark {
    /// Global rank.
    pub rank: i64,
    /// The group's `pg_name`, if named.
    pub group: Option<String>,
    /// What the mark says.
    pub label: String,
}

/// The job a hang document describes: its world size and each group's
/// ranks, to be checked against the traces' job before its marks are put
/// on their timeline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HangJob {
    /// `world_size`.
    pub world: i64,
    /// `groups[]`: `(name, ranks)`.
    pub groups: Vec<(String, Vec<i64>)>,
}

/// Refuses a hang document of another job: its world size differs from the
/// traces', a group both name has other ranks, or a mark's rank is outside
/// the traces' world.
fn check_same_job(
    job: &crate::import::kineto::AlignedJob,
    hang: &HangJob,
    marks: &[HangMark],
) -> Result<()> {
    let world = job
        .profiles
        .iter()
        .filter_map(|p| p.world_size)
        .max()
        .unwrap_or_else(|| job.profiles.iter().map(|p| p.rank + 1).max().unwrap_or(0));
    let other = |why: String| {
        Error::invalid(format!(
            "the hang document is of another job than the traces: {why}"
        ))
    };
    if hang.world > 0 && hang.world != world {
        return Err(other(format!(
            "world size {} there, {world} in the traces",
            hang.world
        )));
    }
    for (name, ranks) in &hang.groups {
        if let Some(g) = job.groups.iter().find(|g| &g.name == name)
            && !ranks.is_empty()
            && !g.ranks.is_empty()
            && !g.desc.contains("(assumed")
            && &g.ranks != ranks
        {
            return Err(other(format!(
                "group '{name}' has ranks {ranks:?} there, {:?} in the traces",
                g.ranks
            )));
        }
    }
    if let Some(m) = marks.iter().find(|m| m.rank < 0 || m.rank >= world) {
        return Err(other(format!(
            "it marks rank {}, the traces' world is {world}",
            m.rank
        )));
    }
    Ok(())
}

/// A written timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// The Chrome-trace JSON.
    pub bytes: Vec<u8>,
    /// Trace events written (metadata included).
    pub events: usize,
    /// Ranks (processes).
    pub ranks: usize,
    /// Straggler marks placed.
    pub straggler_marks: usize,
    /// Hang marks placed.
    pub hang_marks: usize,
}

/// Builds the timeline of the profiler traces in `evidence` (or, when it
/// has none, of its Flight Recorder dumps), with the straggler findings
/// (when the job has two ranks and steps) and `marks`.
///
/// # Errors
/// No profiler traces and no dumps; no collective call in them; dumps of
/// different jobs or runs.
pub fn build(evidence: Evidence, marks: &[HangMark], hang: Option<&HangJob>) -> Result<Timeline> {
    let mut job = match evidence.traces {
        Some(job) => job,
        None if !evidence.dumps.is_empty() => job_from_dumps(evidence.dumps)?,
        None => {
            return Err(Error::invalid(
                "no profiler traces or Flight Recorder dumps in the evidence: a timeline is drawn from each rank's Kineto trace or dump",
            ));
        }
    };
    if let Some(hang) = hang {
        check_same_job(&job, hang, marks)?;
    }
    if job.profiles.iter().all(|p| p.calls.is_empty()) {
        return Err(Error::invalid(format!(
            "no collective calls in the {}",
            if job.source == "flight_recorder" {
                "Flight Recorder dumps"
            } else {
                "traces"
            }
        )));
    }
    let recovered = !steps::has_markers(&job);
    if recovered && let Ok(r) = steps::recover(&job) {
        steps::assign(&mut job, &r);
    }
    let found = (job.profiles.len() >= 2)
        .then(|| analyze(&job).ok())
        .flatten();
    Ok(write(&job, found.as_ref(), marks, recovered))
}

struct Writer {
    out: Vec<u8>,
    events: usize,
    origin: f64,
}

impl Writer {
    fn begin(&mut self) {
        if self.events > 0 {
            self.out.push(b',');
        }
        self.events += 1;
    }

    fn time(&mut self, key: &str, us: f64) {
        self.out.extend_from_slice(key.as_bytes());
        write_f64_rounded(&mut self.out, ((us * 1000.0).round() / 1000.0) + 0.0, 3);
    }

    fn int(&mut self, key: &str, v: i64) {
        self.out.extend_from_slice(key.as_bytes());
        write_i64(&mut self.out, v);
    }

    fn text(&mut self, key: &str, s: &str) {
        self.out.extend_from_slice(key.as_bytes());
        write_str(&mut self.out, s);
    }

    /// `{"name":…,"ph":"M","pid":…,"tid":…,"args":{"name"|"sort_index":…}}`.
    fn meta(&mut self, what: &str, pid: i64, tid: Option<i64>, name: Option<&str>, sort: i64) {
        self.begin();
        self.text("{\"name\":", what);
        self.out.extend_from_slice(b",\"ph\":\"M\"");
        self.int(",\"pid\":", pid);
        if let Some(t) = tid {
            self.int(",\"tid\":", t);
        }
        match name {
            Some(n) => self.text(",\"args\":{\"name\":", n),
            None => self.int(",\"args\":{\"sort_index\":", sort),
        }
        self.out.extend_from_slice(b"}}");
    }

    /// A complete slice; `args` is written raw (an object's members).
    #[allow(clippy::too_many_arguments)]
    fn slice(&mut self, name: &str, cat: &str, pid: i64, tid: i64, at: f64, end: f64, args: &[u8]) {
        self.begin();
        self.text("{\"name\":", name);
        self.text(",\"cat\":", cat);
        self.out.extend_from_slice(b",\"ph\":\"X\"");
        self.int(",\"pid\":", pid);
        self.int(",\"tid\":", tid);
        self.time(",\"ts\":", at - self.origin);
        self.time(",\"dur\":", (end - at).max(0.0));
        self.out.extend_from_slice(b",\"args\":{");
        self.out.extend_from_slice(args);
        self.out.extend_from_slice(b"}}");
    }

    fn flow(&mut self, phase: &str, name: &str, id: usize, pid: i64, tid: i64, at: f64) {
        self.begin();
        self.text("{\"name\":", name);
        self.out.extend_from_slice(b",\"cat\":\"instance\"");
        self.text(",\"ph\":", phase);
        if phase == "f" {
            self.out.extend_from_slice(b",\"bp\":\"e\"");
        }
        self.int(",\"id\":", id as i64);
        self.int(",\"pid\":", pid);
        self.int(",\"tid\":", tid);
        self.time(",\"ts\":", at - self.origin);
        self.out.push(b'}');
    }

    fn instant(&mut self, name: &str, cat: &str, pid: i64, tid: i64, at: f64, args: &[u8]) {
        self.begin();
        self.text("{\"name\":", name);
        self.text(",\"cat\":", cat);
        self.out.extend_from_slice(b",\"ph\":\"i\",\"s\":\"t\"");
        self.int(",\"pid\":", pid);
        self.int(",\"tid\":", tid);
        self.time(",\"ts\":", at - self.origin);
        self.out.extend_from_slice(b",\"args\":{");
        self.out.extend_from_slice(args);
        self.out.extend_from_slice(b"}}");
    }
}

fn earliest(job: &AlignedJob) -> f64 {
    let mut t = f64::INFINITY;
    for (p, shift) in job.profiles.iter().zip(&job.shifts) {
        if let Some(c) = p.calls.first() {
            t = t.min(c.arrival + shift);
        }
        if let Some(s) = p.steps.first() {
            t = t.min(s.1 + shift);
        }
    }
    if t.is_finite() { t } else { 0.0 }
}

fn track_name(job: &AlignedJob, g: usize) -> String {
    match job.groups.get(g) {
        Some(d) if !d.desc.is_empty() => format!("{} (pg {})", d.desc, d.name),
        Some(d) => format!("pg {}", d.name),
        None => "unmatched calls".to_owned(),
    }
}

fn write(
    job: &AlignedJob,
    found: Option<&Stragglers>,
    marks: &[HangMark],
    recovered: bool,
) -> Timeline {
    let origin = earliest(job);
    let calls: usize = job.profiles.iter().map(|p| p.calls.len()).sum();
    let mut w = Writer {
        out: Vec::with_capacity(256 * calls + 4096),
        events: 0,
        origin,
    };
    w.out.extend_from_slice(b"{\"traceEvents\":[");
    let groups = groups_of_calls(job);
    write_tracks(&mut w, job, &groups);
    write_steps(&mut w, job, recovered);
    write_calls(&mut w, job, &groups);
    write_flows(&mut w, job);
    let straggler_marks = found.map_or(0, |s| write_stragglers(&mut w, s));
    let hang_marks = write_hang(&mut w, job, &groups, marks);
    w.out
        .extend_from_slice(b"],\"displayTimeUnit\":\"ms\",\"otherData\":{");
    w.text("\"format\":", FORMAT);
    w.time(",\"origin_us\":", origin);
    w.text(
        ",\"steps\":",
        if recovered {
            "recovered"
        } else {
            "ProfilerStep"
        },
    );
    w.int(",\"ranks\":", job.profiles.len() as i64);
    w.text(",\"source\":", job.source);
    w.int(",\"straggler_marks\":", straggler_marks as i64);
    w.int(",\"hang_marks\":", hang_marks as i64);
    w.out.extend_from_slice(b"}}");
    Timeline {
        events: w.events,
        bytes: w.out,
        ranks: job.profiles.len(),
        straggler_marks,
        hang_marks,
    }
}

/// Process and thread names and sort orders.
fn write_tracks(w: &mut Writer, job: &AlignedJob, groups: &[Vec<usize>]) {
    let unmatched = job.groups.len() as i64 + 1;
    for (slot, p) in job.profiles.iter().enumerate() {
        w.meta(
            "process_name",
            p.rank,
            None,
            Some(&format!("rank {}", p.rank)),
            0,
        );
        w.meta("process_sort_index", p.rank, None, None, p.rank);
        w.meta("thread_name", p.rank, Some(0), Some("steps"), 0);
        let mut used: Vec<usize> = groups[slot].clone();
        used.sort_unstable();
        used.dedup();
        for g in used {
            let tid = if g == usize::MAX {
                unmatched
            } else {
                g as i64 + 1
            };
            w.meta(
                "thread_name",
                p.rank,
                Some(tid),
                Some(&track_name(job, g)),
                0,
            );
            w.meta("thread_sort_index", p.rank, Some(tid), None, tid);
        }
    }
}

/// A slice per call, on its group's track.
fn write_calls(w: &mut Writer, job: &AlignedJob, groups: &[Vec<usize>]) {
    let unmatched = job.groups.len() as i64 + 1;
    let mut args = Vec::with_capacity(128);
    let open: std::collections::HashSet<(usize, usize)> =
        job.in_flight.iter().map(|m| (m.slot, m.call)).collect();
    for (slot, p) in job.profiles.iter().enumerate() {
        let shift = job.shifts[slot];
        for (i, c) in p.calls.iter().enumerate() {
            let g = groups[slot][i];
            let tid = if g == usize::MAX {
                unmatched
            } else {
                g as i64 + 1
            };
            let (op, p2p) = c.kind.trace_op();
            args.clear();
            args.extend_from_slice(b"\"bytes\":");
            write_i64(&mut args, c.bytes);
            args.extend_from_slice(b",\"dtype\":");
            write_str(&mut args, c.dtype);
            args.extend_from_slice(b",\"step\":");
            write_i64(&mut args, c.step);
            let in_flight = open.contains(&(slot, i));
            if in_flight {
                args.extend_from_slice(b",\"in_flight\":true");
            }
            let cat = if p2p || c.kind.is_p2p() {
                "p2p"
            } else {
                "collective"
            };
            let name = if in_flight {
                format!("{op} (in flight)")
            } else {
                op.to_owned()
            };
            w.slice(
                &name,
                cat,
                p.rank,
                tid,
                c.arrival + shift,
                c.end.max(c.arrival) + shift,
                &args,
            );
        }
    }
}

/// A flow through each complete instance's members, in arrival order.
fn write_flows(w: &mut Writer, job: &AlignedJob) {
    for (id, inst) in job.instances.iter().enumerate() {
        if !inst.complete || inst.members.len() < 2 {
            continue;
        }
        let mut at: Vec<(f64, i64, &'static str)> = (inst.members.iter())
            .map(|m| {
                let p = &job.profiles[m.slot];
                let c = &p.calls[m.call];
                (c.arrival + job.shifts[m.slot], p.rank, c.kind.trace_op().0)
            })
            .collect();
        at.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let tid = inst.group as i64 + 1;
        let last = at.len() - 1;
        for (k, &(t, rank, op)) in at.iter().enumerate() {
            let phase = match k {
                0 => "s",
                k if k == last => "f",
                _ => "t",
            };
            w.flow(phase, op, id, rank, tid, t);
        }
    }
}

/// Step slices on each rank's `steps` track.
fn write_steps(w: &mut Writer, job: &AlignedJob, recovered: bool) {
    for (p, shift) in job.profiles.iter().zip(&job.shifts) {
        if !recovered {
            for &(n, start, end) in &p.steps {
                w.slice(
                    &format!("ProfilerStep#{n}"),
                    "step",
                    p.rank,
                    0,
                    start + shift,
                    end + shift,
                    b"",
                );
            }
            continue;
        }
        // Recovered: each step's span over this rank's calls (a rank's
        // calls are in time order, so a step's calls are consecutive).
        let mut spans: Vec<(i64, f64, f64)> = Vec::new();
        for c in p.calls.iter().filter(|c| c.step >= 0) {
            match spans.last_mut() {
                Some(s) if s.0 == c.step => {
                    s.1 = s.1.min(c.arrival);
                    s.2 = s.2.max(c.end);
                }
                _ => spans.push((c.step, c.arrival, c.end)),
            }
        }
        for (k, a, b) in spans {
            w.slice(
                &format!("step {k}"),
                "step",
                p.rank,
                0,
                a + shift,
                b + shift,
                b"",
            );
        }
    }
}

fn write_stragglers(w: &mut Writer, s: &Stragglers) -> usize {
    let mut args = Vec::new();
    for f in &s.findings {
        args.clear();
        args.extend_from_slice(b"\"step\":");
        write_i64(&mut args, f.step);
        args.extend_from_slice(b",\"kind\":");
        write_str(&mut args, f.kind.as_str());
        args.extend_from_slice(b",\"lag_us\":");
        write_f64_rounded(&mut args, (f.lag_us * 1000.0).round() / 1000.0 + 0.0, 3);
        args.extend_from_slice(b",\"estimated_cost_us\":");
        write_f64_rounded(
            &mut args,
            (f.estimated_cost_us * 1000.0).round() / 1000.0 + 0.0,
            3,
        );
        let name = format!(
            "straggler: {}, lag {:.1} ms, cost {:.1} ms",
            f.kind.as_str().replace('_', " "),
            f.lag_us / 1000.0,
            f.estimated_cost_us / 1000.0
        );
        w.instant(
            &name,
            "straggler",
            f.rank,
            f.group as i64 + 1,
            f.at_us,
            &args,
        );
    }
    s.findings.len()
}

fn write_hang(
    w: &mut Writer,
    job: &AlignedJob,
    groups: &[Vec<usize>],
    marks: &[HangMark],
) -> usize {
    let mut placed = 0;
    for m in marks {
        let Some(&slot) = job.slot_of_rank.get(&m.rank) else {
            continue;
        };
        let p = &job.profiles[slot];
        let g = m
            .group
            .as_ref()
            .and_then(|name| job.groups.iter().position(|d| &d.name == name));
        // After the rank's last call (where it stopped), on the group's
        // track when the rank has calls there, else on its steps track.
        let at = (p.calls.iter())
            .map(|c| c.end.max(c.arrival))
            .fold(f64::NEG_INFINITY, f64::max);
        let at = if at.is_finite() { at } else { 0.0 } + job.shifts[slot];
        let g = g.filter(|&g| groups[slot].contains(&g));
        let tid = g.map_or(0, |g| g as i64 + 1);
        let mut args = Vec::new();
        args.extend_from_slice(b"\"label\":");
        write_str(&mut args, &m.label);
        w.instant(
            &format!("hang: {}", m.label),
            "hang",
            m.rank,
            tid,
            at,
            &args,
        );
        placed += 1;
    }
    placed
}

#[cfg(test)]
mod tests {
    use super::read_hang_document;

    #[test]
    fn a_hang_document_gives_its_marks_and_its_job() {
        let doc = br#"{"format":"commcanary.hang.v1","world_size":4,
            "groups":[{"name":"0","ranks":[0,1,2,3]}],
            "root":[{"rank":3,"group":{"name":"0"},"op":"all_reduce","reason":"skipped it"}],
            "partial_collectives":[{"group":{"name":"0"},"op":"all_reduce",
              "present_ranks":[0,1],"missing_ranks":[2,3]}]}"#;
        let (marks, job) = read_hang_document(doc).unwrap();
        assert_eq!(marks.len(), 3);
        assert_eq!(marks[0].label, "root: all_reduce: skipped it");
        assert_eq!((marks[1].rank, marks[1].group.as_deref()), (0, Some("0")));
        assert_eq!(
            marks[2].label,
            "stuck in all_reduce, waiting for rank(s) 2, 3"
        );
        assert_eq!((job.world, job.groups.len()), (4, 1));
    }

    #[test]
    fn a_bad_hang_document_names_the_field() {
        let message = |doc: &[u8]| read_hang_document(doc).unwrap_err().message().to_owned();
        assert_eq!(
            message(br#"{"format":"commcanary.stragglers.v1"}"#),
            "format: expected commcanary.hang.v1"
        );
        assert!(message(b"{").starts_with("not JSON: "));
        assert_eq!(
            message(br#"{"format":"commcanary.hang.v1","root":[{"rank":"3"}]}"#),
            "root[0].rank: expected int"
        );
        assert_eq!(
            message(br#"{"format":"commcanary.hang.v1","root":[],"partial_collectives":{}}"#),
            "partial_collectives: expected list"
        );
    }
}
