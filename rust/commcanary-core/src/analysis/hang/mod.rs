//! Who hung, and where: a job's surviving evidence — Flight Recorder dumps,
//! profiler traces, Python stack dumps, exception texts, any subset — turned
//! into a verdict (`hang`, `no_hang`, `inconclusive`), the partial
//! collectives and mismatches per process group, the wait-for graph across
//! groups, its root, and where every rank is; the `commcanary.hang.v1`
//! document plus a few lines for a person.
//!
//! Pipeline: [`super::evidence`] reads and classifies the files; [`fr`] and
//! [`trace`] reduce dumps and traces to one [`model::Model`] (dumps win for
//! a rank that has both; traces then give the dump's entries their
//! `ProfilerStep`); [`steps`] recovers steps from the call sequence when no
//! trace gives them; [`align`] aligns each group by sequence number;
//! [`graph`] finds positions, edges and roots; [`report`] writes the
//! document. Stacks and exceptions annotate ranks; alone, they support only
//! what they show (see [`diagnose`]).

pub mod align;
pub mod as_job;
pub mod cause;
pub mod departure;
pub mod fr;
pub mod graph;
pub mod model;
pub mod report;
pub mod steps;
#[cfg(test)]
mod tests;
pub mod trace;

use self::align::Alignment;
use self::graph::{Position, Root};
use self::model::Model;
use self::report::{Findings, op_text, ranks_text, ranks_word, verb_are};
use super::evidence::Evidence;
use crate::error::Result;
use crate::import::stacks::{StackDump, ThreadStack, in_flight_calls};
use crate::json::Json;

/// The diagnosis.
#[derive(Debug, Clone, PartialEq)]
pub struct HangReport {
    /// `hang`, `no_hang` or `inconclusive`.
    pub verdict: &'static str,
    /// The lines a person reads first.
    pub lines: Vec<String>,
    /// The `commcanary.hang.v1` document, canonical JSON.
    pub document: Vec<u8>,
}

/// Diagnoses gathered evidence.
///
/// # Errors
/// Evidence of different jobs (see [`fr`]).
pub fn diagnose(mut evidence: Evidence) -> Result<HangReport> {
    let ctx = Context::of(&evidence);
    let files = std::mem::take(&mut evidence.files);
    let model = build_model(evidence, &ctx)?;
    let mut alignment = align::align(&model);
    let positions = graph::positions(&model, &alignment);
    let edges = graph::wait_for(&alignment);
    let departed = |r: i64| {
        model
            .ranks
            .get(&r)
            .and_then(|e| steps::deviation(&e.ops))
            .is_some_and(|d| d > 0)
    };
    let departures = |r: i64| {
        model
            .ranks
            .get(&r)
            .and_then(|e| steps::detailed_deviation(&e.ops))
            .unwrap_or(0)
    };
    let mut roots = graph::roots(&alignment, &positions, &departed, &departures);
    if let Some((changed, found)) = departure::instead(&model, &roots) {
        roots = changed;
        alignment.departures = found;
    }
    let mut kinds = Vec::new();
    if ctx.have_dumps {
        kinds.push("flight_recorder");
    }
    if ctx.have_traces {
        kinds.push("kineto");
    }
    let judged = judge(&model, &alignment, &positions, &roots, &kinds);
    let facts = cause::Facts {
        model: &model,
        alignment: &alignment,
        positions: &positions,
        died: &ctx.died,
        dumps_lack_p2p: ctx.dumps_lack_p2p,
        kinds: &kinds,
        mismatch_reports: &ctx.mismatch_reports,
        estimated_only: ctx.gloo_traces && !ctx.have_dumps,
    };
    let (verdict, mut confidence, conclusions, found) =
        settle(judged, &facts, &ctx, &roots, &departed);
    // A root of an unmatched transfer that itself waits in a transfer on
    // another rank is where a chain was cut, not necessarily where it
    // ends (a deadlock further along can hold it): no high confidence.
    if confidence == "high"
        && found.category == Some("p2p_unmatched")
        && graph::waits_in_transfer(&roots, &edges)
    {
        confidence = "medium";
    }
    let findings = Findings {
        model: &model,
        alignment: &alignment,
        positions: &positions,
        edges: &edges,
        roots: &roots,
        verdict,
        confidence,
        kinds,
        conclusions,
        evidence: files,
        cause: found,
        damage: ctx.damage,
    };
    let lines = human_lines(&findings);
    let document = report::document(&findings, &lines[0]).to_canonical();
    Ok(HangReport {
        verdict,
        lines,
        document,
    })
}

/// What the evidence says beside the calls: which kinds there are, what
/// the dumps and traces can record, what the texts report.
struct Context {
    have_dumps: bool,
    have_traces: bool,
    /// The dumps cannot record point-to-point calls (gloo).
    dumps_lack_p2p: bool,
    /// gloo's dumps record no completion time: a call retired after a
    /// timeout looks like one that completed.
    untimed_dumps: bool,
    /// gloo's traces carry no collective sequence numbers: the pairing of a
    /// group's calls across ranks is matched, and a hang can break it.
    gloo_traces: bool,
    damage: Option<String>,
    mismatch_reports: Vec<i64>,
    /// Ranks whose launcher reported them killed by a signal.
    died: Vec<i64>,
}

impl Context {
    fn of(evidence: &Evidence) -> Context {
        let gloo_traces = evidence.traces.as_ref().is_some_and(|t| {
            t.profiles.iter().any(|p| {
                p.backend
                    .as_deref()
                    .is_some_and(|b| b.eq_ignore_ascii_case("gloo"))
            })
        });
        let mut died: Vec<i64> = evidence
            .exits
            .iter()
            .filter(|(_, e)| e.signal.is_some() || e.exitcode < 0)
            .map(|(_, e)| e.rank)
            .collect();
        died.sort_unstable();
        died.dedup();
        Context {
            have_dumps: !evidence.dumps.is_empty(),
            have_traces: evidence.traces.is_some(),
            dumps_lack_p2p: fr::lack_p2p(&evidence.dumps),
            untimed_dumps: !evidence.dumps.is_empty()
                && evidence.dumps.iter().all(|d| !d.dump.timing),
            gloo_traces,
            damage: evidence.damage_line(),
            mismatch_reports: evidence.mismatch_reports.clone(),
            died,
        }
    }
}

/// Every kind of evidence reduced to the one model: dumps, then traces
/// (which give the dumps' entries their steps, and their p2p calls where
/// the dumps cannot record them), steps recovered for dumps alone, stacks
/// and exceptions on their ranks.
fn build_model(evidence: Evidence, ctx: &Context) -> Result<Model> {
    let mut model = Model::default();
    let declared = evidence.declared_groups();
    fr::add_dumps(&mut model, evidence.dumps, &declared)?;
    if let Some(aligned) = &evidence.traces {
        trace::add_traces(&mut model, aligned, ctx.dumps_lack_p2p);
    }
    if ctx.have_dumps && model.step_source.is_empty() {
        let periods = steps::recover(&mut model);
        if let Some(&(_, p)) = periods.first() {
            model.step_source = format!(
                "recovered from the Flight Recorder call sequence (an iteration of {p} calls, counted from the job's first call)"
            );
        }
    }
    for (rank, stack) in evidence.stacks {
        let ev = model.ranks.entry(rank.rank).or_default();
        ev.stacks = in_flight_calls(&stack);
        ev.files.push(rank.label);
    }
    for (rank, exception) in evidence.exceptions {
        let ev = model.ranks.entry(rank.rank).or_default();
        if ev.stacks.is_empty() && !exception.frames.is_empty() {
            let thread = ThreadStack {
                id: "exception".into(),
                name: None,
                current: true,
                frames: exception.frames.clone(),
            };
            ev.stacks = in_flight_calls(&StackDump {
                threads: vec![thread],
            });
        }
        ev.exception = Some(exception);
        ev.files.push(rank.label);
    }
    if ctx.untimed_dumps {
        failed_calls_pending(&mut model);
    }
    model.world = model
        .world
        .max(model.ranks.keys().next_back().map_or(0, |r| r + 1));
    if let Some(line) = &ctx.damage {
        model.notes.push(line.clone());
    }
    Ok(model)
}

/// Whether every member of a mismatch recorded nothing after it in its
/// group: the last call of the group's record.
fn stopped_at_mismatch(facts: &cause::Facts<'_>) -> bool {
    facts.alignment.mismatches.iter().any(|m| {
        m.seen.iter().all(|s| {
            facts.model.ranks.get(&s.rank).is_some_and(|e| {
                e.ops
                    .iter()
                    .filter(|o| o.group == m.group && !o.p2p)
                    .all(|o| o.seq <= m.seq)
            })
        })
    })
}

/// A dumped rank whose own exception says its communication failed (a
/// timeout, a lost peer) failed in its last call, which an untimed dump
/// (gloo) shows retired like a completed one: that call is in flight.
fn failed_calls_pending(model: &mut Model) {
    for ev in model.ranks.values_mut() {
        let failed = ev
            .exception
            .as_ref()
            .is_some_and(|x| x.timeout.is_some() || x.peer_lost());
        if !failed
            || ev.source != Some(model::Source::FlightRecorder)
            || ev.ops.iter().any(|o| o.pending)
        {
            continue;
        }
        if let Some(last) = ev.ops.last_mut().filter(|o| !o.p2p) {
            last.pending = true;
        }
    }
}

/// The judged verdict made honest about what the evidence can show: its
/// category and what would settle it, and the confidence and verdict the
/// evidence's limits allow.
fn settle(
    (mut verdict, mut confidence, mut conclusions): (&'static str, &'static str, Conclusions),
    facts: &cause::Facts<'_>,
    ctx: &Context,
    roots: &[Root],
    departed: &dyn Fn(i64) -> bool,
) -> (&'static str, &'static str, Conclusions, cause::Cause) {
    let mismatched = !facts.alignment.mismatches.is_empty();
    // Untimed dumps alone that show no call stuck cannot tell a job that ran
    // to its end from one whose failed calls were all retired.
    if verdict == "no_hang" && ctx.untimed_dumps && !ctx.have_traces && !mismatched {
        verdict = "inconclusive";
        confidence = "medium";
        conclusions.push((
            "every dumped call is retired, but gloo retires a call that failed (timed out, lost its peer) like one that completed: these dumps cannot tell a finished job from a failed one".into(),
            vec!["flight_recorder"],
            "high",
        ));
    }
    // A mismatch that "completed" while a member was killed or aborted on
    // it (gloo's enforce) did not: the job stopped there.
    if verdict == "no_hang"
        && mismatched
        && (!ctx.died.is_empty() || !ctx.mismatch_reports.is_empty())
    {
        verdict = "hang";
    }
    // In untimed dumps (gloo) a mismatch on the last call its members
    // recorded did not complete: the record stops there because the job did.
    if verdict == "no_hang" && ctx.untimed_dumps && stopped_at_mismatch(facts) {
        verdict = "hang";
        if confidence == "high" {
            confidence = "medium";
        }
        conclusions.push((
            "the dumps stop at the mismatched call: gloo retires a call that failed like one that completed, so it did not complete".into(),
            vec!["flight_recorder"],
            "medium",
        ));
    }
    let mut found = cause::cause(facts, roots, departed);
    if verdict == "hang" && found.undecided {
        verdict = "inconclusive";
    }
    let traces_only_gloo = ctx.gloo_traces && !ctx.have_dumps;
    if (found.inferred || found.undecided || ctx.damage.is_some() || traces_only_gloo)
        && confidence == "high"
    {
        confidence = "medium";
    }
    if verdict == "inconclusive"
        && found.would_settle.is_empty()
        && ctx.untimed_dumps
        && !ctx.have_traces
    {
        found.would_settle.push(
            "a Flight Recorder dump written while the job ran or hung (a call still in flight), the ranks' exception texts or the launcher's log (a timeout, a lost peer, a killed process), or profiler traces".into(),
        );
    }
    if verdict == "inconclusive" && found.would_settle.is_empty() {
        found.would_settle.push(
            "evidence taken while the job is stuck (a later Flight Recorder dump of every rank, or each rank's stack) would settle whether the missing ranks are only late".into(),
        );
    }
    // A hang whose root the evidence cannot single out (two sides of a tie
    // that neither's history breaks; every member at every recorded call
    // yet timed out) is no high-confidence answer.
    if verdict == "hang" && roots.is_empty() && !facts.kinds.is_empty() {
        if confidence == "high" {
            confidence = "medium";
        }
        found.would_settle.push(
            "the evidence shows the job stuck but singles out no rank (members that disagree with no majority, or every member at every recorded call): Flight Recorder dumps taken while the job hung, and each rank's stack, would settle it".into(),
        );
    }
    for r in &ctx.died {
        conclusions.push((
            format!("rank {r}'s launcher reported its process killed by a signal"),
            vec!["launcher_log"],
            "high",
        ));
    }
    (verdict, confidence, conclusions, found)
}

type Conclusions = Vec<(String, Vec<&'static str>, &'static str)>;

/// The verdict, its confidence and the conclusions.
fn judge(
    model: &Model,
    alignment: &Alignment,
    positions: &[Position<'_>],
    roots: &[Root],
    kinds: &[&'static str],
) -> (&'static str, &'static str, Conclusions) {
    let mut out: Conclusions = Vec::new();
    let timeouts: Vec<i64> = model
        .ranks
        .iter()
        .filter(|(_, e)| e.exception.as_ref().is_some_and(|x| x.timeout.is_some()))
        .map(|(&r, _)| r)
        .collect();
    if !timeouts.is_empty() {
        out.push((
            format!(
                "{} raised a collective timeout: the job stopped making progress",
                ranks_word(&timeouts)
            ),
            vec!["exception"],
            "high",
        ));
    }
    stack_conclusions(model, &mut out);
    if kinds.is_empty() {
        let verdict = if timeouts.is_empty() {
            "inconclusive"
        } else {
            "hang"
        };
        out.push((
            "without Flight Recorder dumps or profiler traces the process group and sequence number of each rank's call are unknown, so who waits for whom, and the root, cannot be concluded".into(),
            vec![],
            "high",
        ));
        return (verdict, "low", out);
    }
    let complete =
        (0..model.world).all(|r| model.ranks.get(&r).is_some_and(|e| e.source.is_some()));
    let confidence = if kinds.contains(&"flight_recorder") && complete {
        "high"
    } else if model.seq_estimated || !complete {
        "medium"
    } else {
        "high"
    };
    let stuck = !alignment.partials.is_empty() || alignment.mismatches.iter().any(|m| m.pending);
    if !stuck {
        for m in &alignment.mismatches {
            out.push((
                format!(
                    "{} mismatch at #{} on {} completed anyway: the results are suspect",
                    m.kind,
                    m.seq,
                    report::group_label(model, m.group)
                ),
                kinds.to_vec(),
                confidence,
            ));
        }
        let verdict = if timeouts.is_empty() {
            "no_hang"
        } else {
            "hang"
        };
        out.push((
            if timeouts.is_empty() {
                "every member of every group reached every collective the evidence holds: no hang".into()
            } else {
                "every member reached every recorded collective, yet ranks timed out: the stall is below the collective layer (network, device) or after the recorded window".into()
            },
            kinds.to_vec(),
            confidence,
        ));
        return (verdict, confidence, out);
    }
    let progressing = roots
        .iter()
        .all(|r| r.kind == "not_blocked" && still_progressing(model, alignment, r))
        && timeouts.is_empty();
    if let Some(b) = roots
        .first()
        .filter(|r| r.kind == "broken")
        .and_then(|r| alignment.broken.get(r.cause))
    {
        out.push((
            format!(
                "{}: the members disagreed on that call, and which of them caused it is not in this evidence",
                report::broken_line(model, b)
            ),
            kinds.to_vec(),
            confidence,
        ));
    }
    for r in roots.iter().filter(|r| r.kind != "broken") {
        let blocked = positions.iter().filter(|p| p.state == "blocked").count();
        out.push((
            format!(
                "rank {} is the root ({}); {blocked} rank(s) are blocked",
                r.rank, r.kind
            ),
            kinds.to_vec(),
            confidence,
        ));
    }
    if progressing {
        out.push((
            "the ranks missing from the partial collectives were still issuing calls after it began: they may only be late (the dumps do not say when they were taken)".into(),
            kinds.to_vec(),
            "medium",
        ));
        return ("inconclusive", "medium", out);
    }
    ("hang", confidence, out)
}

/// A not-blocked root issued a call after the partial collective began.
fn still_progressing(model: &Model, alignment: &Alignment, root: &Root) -> bool {
    let Some(p) = alignment.partials.get(root.cause) else {
        return false;
    };
    let last = model
        .ranks
        .get(&root.rank)
        .and_then(|e| e.ops.iter().map(|o| o.time_ns).max());
    p.time_ns > 0 && last.is_some_and(|t| t > p.time_ns)
}

/// What the stacks say about each rank's call, and who is elsewhere.
fn stack_conclusions(model: &Model, out: &mut Conclusions) {
    let mut by_api: std::collections::BTreeMap<String, Vec<i64>> =
        std::collections::BTreeMap::new();
    for (&r, ev) in &model.ranks {
        if let Some(c) = ev.stacks.first() {
            by_api.entry(c.api.clone()).or_default().push(r);
        }
    }
    if by_api.is_empty() {
        return;
    }
    let parts: Vec<String> = by_api
        .iter()
        .map(|(api, ranks)| format!("{} in {api}", ranks_word(ranks)))
        .collect();
    out.push((
        format!("stacks: {}", parts.join("; ")),
        vec!["stacks"],
        "high",
    ));
    if by_api.len() > 1 {
        let (api, odd) = by_api
            .iter()
            .min_by_key(|(_, r)| r.len())
            .map(|(a, r)| (a.clone(), r.clone()))
            .unwrap_or_default();
        out.push((
            format!("{} in a different call ({api}) than the others: the likely divergence, though stacks name neither the group nor the sequence number", verb_are(&odd)),
            vec!["stacks"],
            "low",
        ));
    }
}

/// The first lines a person reads.
fn human_lines(f: &Findings<'_>) -> Vec<String> {
    let m = f.model;
    let mut lines = Vec::new();
    let head = match (f.verdict, f.roots.first()) {
        ("hang", Some(_)) => {
            let roots: Vec<String> = f
                .roots
                .iter()
                .take(4)
                .map(|r| format!("rank {} {}", r.rank, report::root_reason(f, r)))
                .collect();
            let step = f.roots.first().and_then(|r| r.step(f.alignment));
            let step = step.unwrap_or(-1);
            let step = if step >= 0 {
                format!(" (step {step})")
            } else {
                String::new()
            };
            format!(
                "hang: root {}{step} [{} confidence]",
                roots.join("; "),
                f.confidence
            )
        }
        // The undecided sides of one broken call or one stuck transfer are
        // what a person needs first.
        ("inconclusive", Some(r)) if r.kind == "stuck_pair" => format!(
            "inconclusive: {} [{} confidence]",
            report::root_reason(f, r),
            f.confidence
        ),
        ("inconclusive", Some(r)) if r.kind == "broken" => format!(
            "inconclusive: {}: one of them disagreed with the others on something the evidence does not record (a broadcast's root, a buffer) [{} confidence]",
            report::broken_line(m, &f.alignment.broken[r.cause]),
            f.confidence
        ),
        (verdict, _) => {
            let lead = f
                .conclusions
                .iter()
                .find(|c| c.2 == "high")
                .or(f.conclusions.first());
            format!(
                "{}: {} [{} confidence]",
                verdict.replace('_', " "),
                lead.map_or("", |c| c.0.as_str()),
                f.confidence
            )
        }
    };
    lines.push(head);
    if let Some(category) = f.cause.category {
        let kind = f
            .cause
            .desync_kind
            .map(|k| format!(" ({k})"))
            .unwrap_or_default();
        lines.push(format!("cause: {}{kind}", category.replace('_', " ")));
    }
    for w in &f.cause.would_settle {
        lines.push(format!("would settle it: {w}"));
    }
    lines.extend(f.damage.clone());
    if !f.edges.is_empty() {
        let mut groups: Vec<(i64, usize, i64, &str, Vec<i64>)> = Vec::new();
        for e in f.edges {
            match groups
                .iter_mut()
                .find(|g| g.0 == e.waits_for && g.1 == e.group && g.2 == e.seq)
            {
                Some(g) => g.4.push(e.rank),
                None => groups.push((e.waits_for, e.group, e.seq, e.op, vec![e.rank])),
            }
        }
        let parts: Vec<String> = groups
            .iter()
            .take(6)
            .map(|(to, g, s, op, from)| {
                format!(
                    "{} -> {to} ({op} #{s} on {})",
                    ranks_text(from),
                    report::group_label(m, *g)
                )
            })
            .collect();
        lines.push(format!("wait-for: {}", parts.join("; ")));
    }
    for p in f
        .positions
        .iter()
        .filter(|p| f.roots.iter().any(|r| r.rank == p.rank))
        .take(4)
    {
        let ev = m.ranks.get(&p.rank);
        let mut text = format!("rank {}: ", p.rank);
        match p.in_flight {
            Some(o) => text.push_str(&format!("in {}", op_text(m, o))),
            None => text.push_str(p.state),
        }
        if let Some(fr) = p.in_flight.and_then(|o| m.frame(o.frame)).or_else(|| {
            ev.and_then(|e| e.stacks.first())
                .and_then(|c| c.user_frame.as_ref())
        }) {
            text.push_str(&format!(
                ", called at {}:{} in {}",
                fr.file, fr.line, fr.func
            ));
        }
        lines.push(text);
    }
    for c in f
        .conclusions
        .iter()
        .filter(|c| c.1.contains(&"stacks") || c.1.contains(&"exception") || c.1.is_empty())
    {
        lines.push(c.0.clone());
    }
    lines.push(format!(
        "{} partial collective(s), {} mismatch(es); evidence: {}",
        f.alignment.partials.len(),
        f.alignment.mismatches.len(),
        evidence_text(&f.evidence)
    ));
    lines
}

fn evidence_text(files: &[Json]) -> String {
    let mut counts: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for f in files {
        if let Json::Object(o) = f
            && let (Some(Json::Str(kind)), Some(Json::Bool(true))) = (o.get("kind"), o.get("used"))
        {
            *counts.entry(kind.clone()).or_default() += 1;
        }
    }
    counts
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A document of a hang report as JSON (for callers that add to it).
#[must_use]
pub fn empty_document() -> Json {
    Json::object().with("format", report::FORMAT)
}
