//! Behaviour search: the smallest canary that still behaves like its source.
//!
//! Two stages over one trace, every candidate compiled from the trace and
//! checked against the source runs with [`super::evaluate`]:
//!
//! 1. **uniform** — every `timing_sample_limit` in `min..=max`;
//! 2. **per-group refinement** — starting from the uniform winner's limit `L`
//!    for every group, for group 0, 1, … in order try each lower limit for
//!    that group alone and keep the best verified candidate whose size key is
//!    strictly smaller than the current one. A group of `n` events compiles
//!    exactly for every limit `≥ n`, so only limits below `min(current, n)`
//!    can change it; the others are skipped as equivalent.
//!
//! Only verified candidates compete (full source coverage, every
//! configuration row passes, the ranking agrees, no capture uncertainty).
//! Candidates are ordered by the size key `(canary_bytes,
//! stored_recursive_timing_records, canary_events, Σ per-group limits)`;
//! strict `<`, so the first found wins ties. Replays are cached by
//! execution commitment: candidates with the same program share one
//! evaluation.
//!
//! The ledger (every candidate, its figures, its status and why it was not
//! chosen) is canonical JSON meant for a separate evidence file; the canary
//! keeps only a summary.

use std::collections::HashMap;

use super::{Configuration, Evaluation, Run, Tolerances, evaluate, runs};
use crate::compile::{CompileOptions, Compiled, compile};
use crate::error::{Error, ErrorKind, Result};
use crate::json::canon::{self, ObjectWriter};
use crate::trace::Trace;

/// The most candidates one search may compile.
pub const MAX_CANDIDATES: usize = 4096;

/// Search parameters.
#[derive(Debug, Clone)]
pub struct SearchOptions {
    /// Lowest limit searched (≥ 2).
    pub min_limit: usize,
    /// Highest limit searched (≥ `min_limit`).
    pub max_limit: usize,
    /// Options every candidate compiles with (limits are overwritten).
    pub compile: CompileOptions,
    /// Behaviour tolerances.
    pub tolerances: Tolerances,
}

impl SearchOptions {
    /// Checks caller-supplied search limits and builds the options.
    ///
    /// # Errors
    /// `min_limit` below 2 ([`Error::option`] naming
    /// `behavior_search_min_sample_limit`).
    pub fn checked(
        min_limit: i64,
        compile: CompileOptions,
        tolerances: Tolerances,
    ) -> Result<Self> {
        let min_limit = check_search_limits(min_limit, compile.timing_sample_limit as i64)?;
        tolerances.validate()?;
        Ok(Self {
            min_limit,
            max_limit: compile.timing_sample_limit,
            compile,
            tolerances,
        })
    }
}

/// The search's limits: the lowest at least 2 (as any timing sample
/// limit), the highest not below it.
///
/// # Errors
/// [`Error::option`] naming `behavior_search_min_sample_limit`, or an
/// invalid-input error when the highest is below the lowest.
pub fn check_search_limits(min_limit: i64, max_limit: i64) -> Result<usize> {
    let min = crate::compile::checked_sample_limit("behavior_search_min_sample_limit", min_limit)?;
    if max_limit < min_limit {
        return Err(Error::invalid(format!(
            "timing_sample_limit={max_limit} must be at least behavior_search_min_sample_limit={min_limit}"
        )));
    }
    Ok(min)
}

/// Size key; smaller wins.
type SizeKey = (u64, u64, u64, u64);

/// What one candidate's behaviour check found.
#[derive(Debug, Clone)]
struct Verdict {
    status: &'static str,
    behavioral_pass: bool,
    ranking_pass: bool,
    failed_configurations: Vec<String>,
    passed_pairs: u64,
    total_pairs: u64,
    reason: Option<String>,
}

/// One ledger row.
#[derive(Debug, Clone)]
struct Row {
    group: Option<usize>,
    limit: usize,
    limits_by_group: Vec<(usize, usize)>,
    result: std::result::Result<(Figures, Verdict), String>,
}

/// Sizes and counts of a compiled candidate.
#[derive(Debug, Clone, Copy)]
struct Figures {
    canary_bytes: u64,
    canary_events: u64,
    sequence_motif_count: u64,
    approximate_timing_records: u64,
    recursive_timing_records: u64,
    stored_recursive_timing_records: u64,
    key: SizeKey,
}

impl Row {
    fn limit_of(&self, group: usize) -> usize {
        self.limits_by_group
            .iter()
            .find(|&&(g, _)| g == group)
            .map_or(self.limit, |&(_, l)| l)
    }

    fn verified_key(&self) -> Option<SizeKey> {
        match &self.result {
            Ok((f, v)) if v.status == "behaviorally_verified" => Some(f.key),
            _ => None,
        }
    }
}

/// The search result.
#[derive(Debug, Clone)]
pub struct SearchOutcome {
    /// The selected candidate, compiled without any search metadata.
    pub selected: Compiled,
    /// The options that reproduce it.
    pub selected_options: CompileOptions,
    /// Candidates compiled.
    pub candidate_count: u64,
    /// Candidates that passed every check.
    pub accepted_candidates: u64,
    /// Canonical JSON: `{search_space, selected_candidate, uniform_candidates,
    /// per_group_refinement}`.
    pub ledger: Vec<u8>,
}

struct Searcher<'a> {
    trace: &'a Trace,
    source_runs: &'a [Run],
    configurations: &'a [Configuration],
    options: &'a SearchOptions,
    cache: HashMap<String, Verdict>,
    compiled: u64,
    /// Candidates planned so far (the uniform stage, then refinement).
    planned: u64,
    progress: Option<Progress<'a>>,
}

/// Told `(candidates done, candidates planned so far)` after each candidate;
/// the planned count grows once, when refinement is planned. Returning
/// `false` stops the search (it then fails with "behavior search stopped").
pub type Progress<'a> = &'a (dyn Fn(u64, u64) -> bool + Sync);

impl Searcher<'_> {
    fn verdict(&self, evaluation: &Evaluation, compiled: &Compiled) -> Verdict {
        let s = &compiled.summary;
        let failed_configurations: Vec<String> = evaluation
            .rows_pass
            .iter()
            .zip(self.configurations)
            .filter(|(pass, _)| !**pass)
            .map(|(_, c)| c.name.clone())
            .collect();
        let behavioral_pass = failed_configurations.is_empty();
        let full = s.source_events == self.trace.events.len() as u64;
        let checks_pass = full && behavioral_pass && evaluation.ranking_pass;
        let status = match (checks_pass, s.uncertain_events) {
            (true, 0) => "behaviorally_verified",
            (true, _) => "behaviorally_unverified",
            _ => "failed",
        };
        let mut reasons = Vec::new();
        if !full {
            reasons.push(format!(
                "covers {} of {} trace events",
                s.source_events,
                self.trace.events.len()
            ));
        }
        if !behavioral_pass {
            reasons.push(format!(
                "behavioural fidelity failed under {}",
                failed_configurations.join(", ")
            ));
        }
        if !evaluation.ranking_pass {
            reasons.push(format!(
                "ranking agreed on {} of {} decisions",
                evaluation.passed_pairs, evaluation.total_pairs
            ));
        }
        if s.uncertain_events > 0 {
            reasons.push(format!(
                "rank-local compute fields are uncertain on {} of {} events",
                s.uncertain_events, s.source_events
            ));
        }
        Verdict {
            status,
            behavioral_pass,
            ranking_pass: evaluation.ranking_pass,
            failed_configurations,
            passed_pairs: evaluation.passed_pairs,
            total_pairs: evaluation.total_pairs,
            reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
        }
    }

    /// Compiles and checks one candidate.
    fn candidate(
        &mut self,
        limit: usize,
        limits_by_group: Vec<(usize, usize)>,
        group: Option<usize>,
    ) -> Result<(Row, Option<Compiled>)> {
        let mut options = self.options.compile.clone();
        options.timing_sample_limit = limit;
        options
            .timing_sample_limits_by_group
            .clone_from(&limits_by_group);
        options.compiler_members.clear();
        self.compiled += 1;
        let outcome = self.compile_and_check(limit, limits_by_group, group, &options);
        if let Some(progress) = self.progress
            && !progress(self.compiled, self.planned)
        {
            return Err(Error::invalid("behavior search stopped"));
        }
        outcome
    }

    /// Compiles one candidate with `options` and checks its behaviour.
    fn compile_and_check(
        &mut self,
        limit: usize,
        limits_by_group: Vec<(usize, usize)>,
        group: Option<usize>,
        options: &CompileOptions,
    ) -> Result<(Row, Option<Compiled>)> {
        let compiled = match compile(self.trace, options) {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::Budget => {
                let row = Row {
                    group,
                    limit,
                    limits_by_group,
                    result: Err(e.message().to_owned()),
                };
                return Ok((row, None));
            }
            Err(e) => return Err(e),
        };
        let s = &compiled.summary;
        let verdict = match self.cache.get(&s.execution_semantic_sha256) {
            Some(v) => v.clone(),
            None => {
                let canary_runs = runs(&compiled.program, self.configurations)?;
                let evaluation = evaluate(
                    self.source_runs,
                    &canary_runs,
                    self.configurations,
                    &self.options.tolerances,
                );
                let v = self.verdict(&evaluation, &compiled);
                self.cache
                    .insert(s.execution_semantic_sha256.clone(), v.clone());
                v
            }
        };
        let limit_sum = {
            let overridden: usize = limits_by_group.iter().map(|&(_, l)| l).sum();
            (s.timing_group_count as usize - limits_by_group.len()) * limit + overridden
        };
        let figures = Figures {
            canary_bytes: s.canary_bytes,
            canary_events: s.canary_events,
            sequence_motif_count: s.sequence_motif_count,
            approximate_timing_records: s.approximate_timing_records,
            recursive_timing_records: s.recursive_timing_records,
            stored_recursive_timing_records: s.stored_recursive_timing_records,
            key: (
                s.canary_bytes,
                s.stored_recursive_timing_records,
                s.canary_events,
                limit_sum as u64,
            ),
        };
        let row = Row {
            group,
            limit,
            limits_by_group,
            result: Ok((figures, verdict)),
        };
        Ok((row, Some(compiled)))
    }
}

/// Number of source events in each group of `compiled` (of a step loop:
/// its logical events, the flat groups that per-group limits name).
fn group_sizes(compiled: &Compiled) -> Vec<u64> {
    let p = &compiled.program;
    if p.has_loop() {
        let mut sizes = Vec::new();
        crate::canary::expand::for_each_logical_event(p, |e| sizes.push(e.take));
        return sizes;
    }
    p.leaves.iter().map(|leaf| p.leaf_repeat(leaf)).collect()
}

/// Runs the search.
///
/// # Errors
/// Invalid limits, a search larger than [`MAX_CANDIDATES`], replay errors,
/// and no verified candidate in the range (a budget error).
pub fn search(
    trace: &Trace,
    source_runs: &[Run],
    configurations: &[Configuration],
    options: &SearchOptions,
) -> Result<SearchOutcome> {
    search_with_progress(trace, source_runs, configurations, options, None)
}

/// [`search`], telling `progress` after each candidate.
///
/// # Errors
/// As [`search`].
pub fn search_with_progress(
    trace: &Trace,
    source_runs: &[Run],
    configurations: &[Configuration],
    options: &SearchOptions,
    progress: Option<Progress<'_>>,
) -> Result<SearchOutcome> {
    let uniform_count = check_range(options)?;
    let mut searcher = Searcher {
        trace,
        source_runs,
        configurations,
        options,
        cache: HashMap::new(),
        compiled: 0,
        planned: uniform_count as u64,
        progress,
    };
    let (uniform, best) = searcher.uniform_stage()?;
    let Some((uniform_winner, key, compiled)) = best else {
        return Err(Error::new(
            ErrorKind::Budget,
            format!(
                "no behaviorally verified canary found in the requested timing sample limit range ({})",
                rejection_summary(&uniform)
            ),
        ));
    };
    let mut selection = Selection {
        limit: uniform[uniform_winner].limit,
        current: Vec::new(),
        key,
        compiled,
    };
    let refinement = searcher.refine(&mut selection, MAX_CANDIDATES - uniform_count)?;

    let selected_map: Vec<(usize, usize)> = selection
        .current
        .iter()
        .enumerate()
        .filter(|&(_, &l)| l != selection.limit)
        .map(|(g, &l)| (g, l))
        .collect();
    let mut selected_options = options.compile.clone();
    selected_options.timing_sample_limit = selection.limit;
    selected_options
        .timing_sample_limits_by_group
        .clone_from(&selected_map);
    selected_options.compiler_members.clear();
    let accepted = uniform
        .iter()
        .chain(&refinement.rows)
        .filter(|r| r.verified_key().is_some())
        .count() as u64;
    let ledger = Ledger {
        accepted,
        compiled: searcher.compiled,
        evaluated: searcher.cache.len(),
        options,
        uniform_count,
        uniform: &uniform,
        uniform_winner,
        refinement: &refinement,
        selection: &selection,
        selected_map: &selected_map,
    }
    .to_json();
    Ok(SearchOutcome {
        selected: selection.compiled,
        selected_options,
        candidate_count: searcher.compiled,
        accepted_candidates: accepted,
        ledger,
    })
}

/// Search stage 0: the limit range and tolerances are valid and the
/// uniform stage fits the candidate budget. Returns its candidate count.
fn check_range(options: &SearchOptions) -> Result<usize> {
    let (min, max) = (options.min_limit, options.max_limit);
    if min < 2 {
        return Err(Error::invalid(
            "behavior_search_min_sample_limit must be at least 2",
        ));
    }
    if max < min {
        return Err(Error::invalid(format!(
            "timing_sample_limit={max} must be at least behavior_search_min_sample_limit={min}"
        )));
    }
    let uniform_count = max - min + 1;
    if uniform_count > MAX_CANDIDATES {
        return Err(Error::invalid(format!(
            "behavior search would compile {uniform_count} uniform candidates; the limit is {MAX_CANDIDATES}"
        )));
    }
    options.tolerances.validate()?;
    Ok(uniform_count)
}

/// The best candidate of a stage so far: its row index, size key and
/// compilation.
type Best = (usize, SizeKey, Compiled);

/// The candidate currently selected.
struct Selection {
    /// The uniform winner's limit, the default for every group.
    limit: usize,
    /// The limit of each group (filled in by the refinement).
    current: Vec<usize>,
    /// Its size key.
    key: SizeKey,
    /// Its compilation.
    compiled: Compiled,
}

/// What the per-group refinement did.
struct Refinement {
    /// Every candidate tried, in order.
    rows: Vec<Row>,
    /// Candidates it planned to try.
    planned: usize,
    /// Groups of the uniform winner.
    group_count: usize,
    /// Groups whose limit was lowered.
    accepted_groups: u64,
    /// The row of the finally selected candidate, if one was accepted.
    selected: Option<usize>,
    /// Why it did not run, if it did not.
    skip_reason: Option<String>,
}

impl Searcher<'_> {
    /// Search stage 1: every uniform limit in `min..=max`, with the smallest
    /// verified candidate (first found on ties).
    fn uniform_stage(&mut self) -> Result<(Vec<Row>, Option<Best>)> {
        let (min, max) = (self.options.min_limit, self.options.max_limit);
        let mut uniform: Vec<Row> = Vec::with_capacity(max - min + 1);
        let mut best: Option<Best> = None;
        for limit in min..=max {
            let (row, compiled) = self.candidate(limit, Vec::new(), None)?;
            if let (Some(key), Some(c)) = (row.verified_key(), compiled)
                && best.as_ref().is_none_or(|(_, k, _)| key < *k)
            {
                best = Some((uniform.len(), key, c));
            }
            uniform.push(row);
        }
        Ok((uniform, best))
    }

    /// Search stage 2: per-group refinement of `selection`, group by group,
    /// within `remaining` candidates (else skipped).
    fn refine(&mut self, selection: &mut Selection, remaining: usize) -> Result<Refinement> {
        let min = self.options.min_limit;
        let sizes = group_sizes(&selection.compiled);
        selection.current = vec![selection.limit; sizes.len()];
        let planned: usize = sizes
            .iter()
            .map(|&n| (n as usize).min(selection.limit).saturating_sub(min))
            .sum();
        let skip_reason = if sizes.is_empty() || min >= selection.limit {
            Some("no lower per-group limits are available".to_owned())
        } else if planned == 0 {
            Some("no group has more events than the lowest limit".to_owned())
        } else if planned > remaining {
            Some(format!(
                "refinement would compile {planned} candidates; {remaining} remain of the {MAX_CANDIDATES}-candidate budget"
            ))
        } else {
            None
        };
        let mut refinement = Refinement {
            rows: Vec::new(),
            planned,
            group_count: sizes.len(),
            accepted_groups: 0,
            selected: None,
            skip_reason,
        };
        if refinement.skip_reason.is_some() {
            return Ok(refinement);
        }
        self.planned += planned as u64;
        for (g, &size) in sizes.iter().enumerate() {
            let top = (size as usize).min(selection.current[g]);
            if let Some((index, key, c)) =
                self.refine_group(g, top, selection, &mut refinement.rows)?
            {
                selection.current[g] = refinement.rows[index].limit_of(g);
                selection.key = key;
                selection.compiled = c;
                refinement.selected = Some(index);
                refinement.accepted_groups += 1;
            }
        }
        Ok(refinement)
    }

    /// Refinement of group `g`: each limit in `min..top` for it alone (rows
    /// appended to `rows`); the best verified candidate smaller than the
    /// selection, if any.
    fn refine_group(
        &mut self,
        g: usize,
        top: usize,
        selection: &Selection,
        rows: &mut Vec<Row>,
    ) -> Result<Option<Best>> {
        let mut group_best: Option<Best> = None;
        for l in self.options.min_limit..top {
            let map: Vec<(usize, usize)> = selection
                .current
                .iter()
                .enumerate()
                .map(|(h, &cl)| (h, if h == g { l } else { cl }))
                .filter(|&(_, cl)| cl != selection.limit)
                .collect();
            let (row, compiled) = self.candidate(selection.limit, map, Some(g))?;
            if let (Some(key), Some(c)) = (row.verified_key(), compiled)
                && key < selection.key
                && group_best.as_ref().is_none_or(|(_, k, _)| key < *k)
            {
                group_best = Some((rows.len(), key, c));
            }
            rows.push(row);
        }
        Ok(group_best)
    }
}

/// Everything the ledger shows, borrowed from a finished search.
struct Ledger<'a> {
    accepted: u64,
    compiled: u64,
    evaluated: usize,
    options: &'a SearchOptions,
    uniform_count: usize,
    uniform: &'a [Row],
    uniform_winner: usize,
    refinement: &'a Refinement,
    selection: &'a Selection,
    selected_map: &'a [(usize, usize)],
}

impl Ledger<'_> {
    /// The ledger's canonical JSON.
    fn to_json(&self) -> Vec<u8> {
        let mut ledger = Vec::new();
        let mut o = ObjectWriter::new(&mut ledger);
        o.i64("accepted_candidates", self.accepted as i64);
        o.i64("candidate_count", self.compiled as i64);
        o.i64("evaluated_programs", self.evaluated as i64);
        self.write_refinement(o.key("per_group_refinement"));
        {
            let v = o.key("search_space");
            let mut s = ObjectWriter::new(v);
            s.i64("max_timing_sample_limit", self.options.max_limit as i64);
            s.i64("min_timing_sample_limit", self.options.min_limit as i64);
            s.i64("uniform_candidate_count", self.uniform_count as i64);
            s.end();
        }
        self.write_selected(o.key("selected_candidate"));
        let u = o.key("uniform_candidates");
        write_rows(
            u,
            self.uniform,
            self.refinement
                .selected
                .is_none()
                .then_some(self.uniform_winner),
        );
        o.end();
        ledger
    }

    /// The `per_group_refinement` object.
    fn write_refinement(&self, out: &mut Vec<u8>) {
        let refinement = self.refinement;
        let mut r = ObjectWriter::new(out);
        r.i64("accepted_groups", refinement.accepted_groups as i64);
        r.i64("attempted_candidates", refinement.rows.len() as i64);
        let c = r.key("candidates");
        write_rows(c, &refinement.rows, refinement.selected);
        r.i64("group_count", refinement.group_count as i64);
        r.str("mode", "greedy_per_group_timing_sample_limit_refinement");
        r.i64("planned_candidates", refinement.planned as i64);
        if let Some(reason) = &refinement.skip_reason {
            r.str("reason", reason);
        }
        write_map(r.key("selected_limits_by_group"), self.selected_map);
        write_key(r.key("selected_size_key"), self.selection.key);
        r.str(
            "status",
            match (&refinement.skip_reason, refinement.accepted_groups) {
                (Some(_), _) => "skipped",
                (None, 0) => "no_smaller_verified_candidate",
                _ => "refined",
            },
        );
        r.end();
    }

    /// The `selected_candidate` object.
    fn write_selected(&self, out: &mut Vec<u8>) {
        let sm = &self.selection.compiled.summary;
        let mut s = ObjectWriter::new(out);
        s.i64("canary_bytes", sm.canary_bytes as i64);
        s.i64("canary_events", sm.canary_events as i64);
        s.str("execution_semantic_sha256", &sm.execution_semantic_sha256);
        write_key(s.key("size_key"), self.selection.key);
        s.i64(
            "stored_recursive_timing_records",
            sm.stored_recursive_timing_records as i64,
        );
        s.i64("timing_sample_limit", self.selection.limit as i64);
        s.str(
            "timing_sample_limit_mode",
            if self.selected_map.is_empty() {
                "uniform"
            } else {
                "per_group"
            },
        );
        write_map(s.key("timing_sample_limits_by_group"), self.selected_map);
        s.end();
    }
}

/// "N candidates: K failed (first: limit L, reason); ..." for an error message.
fn rejection_summary(rows: &[Row]) -> String {
    let mut kinds: Vec<(&str, usize, String)> = Vec::new();
    for row in rows {
        let (status, reason) = match &row.result {
            Err(reason) => ("compile_failed", reason.clone()),
            Ok((_, v)) => (v.status, v.reason.clone().unwrap_or_default()),
        };
        match kinds.iter_mut().find(|(s, _, _)| *s == status) {
            Some((_, n, _)) => *n += 1,
            None => kinds.push((status, 1, format!("limit {}: {reason}", row.limit))),
        }
    }
    let parts: Vec<String> = kinds
        .iter()
        .map(|(status, n, first)| format!("{n} {status}, first at {first}"))
        .collect();
    format!("{} candidates: {}", rows.len(), parts.join("; "))
}

fn write_key(out: &mut Vec<u8>, key: SizeKey) {
    out.push(b'[');
    for (i, v) in [key.0, key.1, key.2, key.3].into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        canon::write_i64(out, v as i64);
    }
    out.push(b']');
}

fn write_map(out: &mut Vec<u8>, map: &[(usize, usize)]) {
    let mut entries: Vec<(String, usize)> = map.iter().map(|&(g, l)| (g.to_string(), l)).collect();
    entries.sort();
    let mut o = ObjectWriter::new(out);
    for (g, l) in entries {
        o.i64(&g, l as i64);
    }
    o.end();
}

fn write_rows(out: &mut Vec<u8>, rows: &[Row], selected: Option<usize>) {
    out.push(b'[');
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let mut o = ObjectWriter::new(out);
        match &row.result {
            Err(reason) => {
                o.str("decision", "rejected");
                if let Some(g) = row.group {
                    o.i64("group_id", g as i64);
                    o.i64("group_timing_sample_limit", row.limit_of(g) as i64);
                }
                o.str("reason", reason);
                o.str("status", "compile_failed");
                o.i64("timing_sample_limit", row.limit as i64);
            }
            Ok((f, v)) => {
                o.i64(
                    "approximate_timing_records",
                    f.approximate_timing_records as i64,
                );
                o.str(
                    "behavioral_fidelity_status",
                    if v.behavioral_pass { "pass" } else { "fail" },
                );
                o.i64("canary_bytes", f.canary_bytes as i64);
                o.i64("canary_events", f.canary_events as i64);
                o.str(
                    "configuration_ranking_status",
                    if v.ranking_pass { "pass" } else { "fail" },
                );
                let decision = if Some(i) == selected {
                    "selected"
                } else if v.status == "behaviorally_verified" {
                    "verified_not_smallest"
                } else {
                    "rejected"
                };
                o.str("decision", decision);
                o.str_list("failed_configurations", &v.failed_configurations);
                if let Some(g) = row.group {
                    o.i64("group_id", g as i64);
                    o.i64("group_timing_sample_limit", row.limit_of(g) as i64);
                }
                o.i64("passed_ranking_pairs", v.passed_pairs as i64);
                if let Some(reason) = &v.reason {
                    o.str("reason", reason);
                } else if decision == "verified_not_smallest" {
                    o.str("reason", "verified, but its size key is not the smallest");
                }
                o.i64(
                    "recursive_timing_records",
                    f.recursive_timing_records as i64,
                );
                o.i64("sequence_motif_count", f.sequence_motif_count as i64);
                write_key(o.key("size_key"), f.key);
                o.str("source_verification", "compiled_from_source");
                o.str("status", v.status);
                o.i64(
                    "stored_recursive_timing_records",
                    f.stored_recursive_timing_records as i64,
                );
                o.i64("timing_sample_limit", row.limit as i64);
                if row.group.is_some() {
                    write_map(o.key("timing_sample_limits_by_group"), &row.limits_by_group);
                }
                o.i64("total_ranking_pairs", v.total_pairs as i64);
            }
        }
        o.end();
    }
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::behavior::{default_configurations, reference_program};
    use crate::trace::{LoadOptions, load_bytes};

    const LONG: &[u8] = include_bytes!("../../../../examples/traces/llama70b_tp8_trace_long.json");

    fn run(min: usize, max: usize) -> Result<SearchOutcome> {
        let trace = load_bytes(LONG, &LoadOptions::default()).unwrap();
        let configs = default_configurations();
        let source = runs(&reference_program(&trace).unwrap(), &configs).unwrap();
        let options = SearchOptions {
            min_limit: min,
            max_limit: max,
            compile: CompileOptions::default(),
            tolerances: Tolerances::default(),
        };
        search(&trace, &source, &configs, &options)
    }

    #[test]
    fn selects_the_smallest_verified_uniform_limit() {
        let outcome = run(2, 12).unwrap();
        assert_eq!(outcome.candidate_count, 11);
        assert_eq!(outcome.selected_options.timing_sample_limit, 2);
        assert!(
            outcome
                .selected_options
                .timing_sample_limits_by_group
                .is_empty()
        );
        let ledger = String::from_utf8(outcome.ledger).unwrap();
        assert_eq!(ledger.matches(r#""decision":"selected""#).count(), 1);
        assert!(ledger.contains(r#""status":"skipped""#));
    }

    #[test]
    fn progress_is_told_after_each_candidate() {
        let trace = load_bytes(LONG, &LoadOptions::default()).unwrap();
        let configs = default_configurations();
        let source = runs(&reference_program(&trace).unwrap(), &configs).unwrap();
        let options = SearchOptions {
            min_limit: 2,
            max_limit: 6,
            compile: CompileOptions::default(),
            tolerances: Tolerances::default(),
        };
        let seen = std::sync::Mutex::new(Vec::new());
        let tell = |done: u64, planned: u64| {
            seen.lock().unwrap().push((done, planned));
            true
        };
        let outcome =
            search_with_progress(&trace, &source, &configs, &options, Some(&tell)).unwrap();
        let seen = seen.into_inner().unwrap();
        assert_eq!(seen.len() as u64, outcome.candidate_count);
        assert_eq!(seen[0], (1, 5));
        assert!(seen.iter().all(|&(done, planned)| done <= planned));
        assert!(seen.windows(2).all(|w| w[1].0 == w[0].0 + 1));
        let quiet = search(&trace, &source, &configs, &options).unwrap();
        assert_eq!(quiet.ledger, outcome.ledger);
        let stop = |done: u64, _: u64| done < 2;
        let e = search_with_progress(&trace, &source, &configs, &options, Some(&stop)).unwrap_err();
        assert_eq!(e.message(), "behavior search stopped");
    }

    #[test]
    fn refinement_tries_only_limits_that_change_a_group() {
        // Zero tolerances: only an exact program verifies, so the uniform stage
        // picks the lossless limit and every per-group attempt is rejected.
        let trace = load_bytes(LONG, &LoadOptions::default()).unwrap();
        let configs = default_configurations();
        let source = runs(&reference_program(&trace).unwrap(), &configs).unwrap();
        let options = SearchOptions {
            min_limit: 2,
            max_limit: 8,
            compile: CompileOptions::default(),
            tolerances: Tolerances {
                relative_pct: 0.0,
                absolute_us: 0.0,
                hidden_points: 0.0,
                tail_recall: 1.0,
                tie_us: 0.0,
            },
        };
        let outcome = search(&trace, &source, &configs, &options).unwrap();
        assert_eq!(outcome.selected.summary.approximate_timing_records, 0);
        let ledger = String::from_utf8(outcome.ledger).unwrap();
        assert!(ledger.contains(r#""status":"no_smaller_verified_candidate""#));
        // Groups of n > 2 events try limits 2..min(n, 8): a group of 8 tries 6.
        let sizes = group_sizes(&outcome.selected);
        let planned: usize = sizes
            .iter()
            .map(|&n| (n as usize).min(8).saturating_sub(2))
            .sum();
        assert!(planned > 0);
        assert_eq!(outcome.candidate_count as usize, 7 + planned);
        assert!(ledger.contains(&format!(r#""attempted_candidates":{planned}"#)));
    }

    #[test]
    fn rejects_bad_ranges() {
        assert!(run(1, 4).is_err());
        assert!(run(5, 4).is_err());
        assert!(run(2, MAX_CANDIDATES + 2).is_err());
    }
}
