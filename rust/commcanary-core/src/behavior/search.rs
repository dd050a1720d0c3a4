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
        if min_limit < 2 {
            return Err(Error::option(
                "behavior_search_min_sample_limit",
                "must be at least 2",
            ));
        }
        tolerances.validate()?;
        Ok(Self {
            min_limit: min_limit as usize,
            max_limit: compile.timing_sample_limit,
            compile,
            tolerances,
        })
    }
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
}

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
        let compiled = match compile(self.trace, &options) {
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

/// Number of source events in each group of `compiled`.
fn group_sizes(compiled: &Compiled) -> Vec<u64> {
    let p = &compiled.program;
    p.leaves
        .iter()
        .map(|leaf| {
            p.leaf_records(leaf)
                .iter()
                .map(|r| p.record_weight(r))
                .sum()
        })
        .collect()
}

/// Runs the search.
///
/// # Errors
/// Invalid limits, a search larger than [`MAX_CANDIDATES`], replay errors,
/// and no verified candidate in the range (a budget error).
#[allow(clippy::too_many_lines)]
pub fn search(
    trace: &Trace,
    source_runs: &[Run],
    configurations: &[Configuration],
    options: &SearchOptions,
) -> Result<SearchOutcome> {
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
    let mut searcher = Searcher {
        trace,
        source_runs,
        configurations,
        options,
        cache: HashMap::new(),
        compiled: 0,
    };

    // Stage 1: uniform limits.
    let mut uniform: Vec<Row> = Vec::with_capacity(uniform_count);
    let mut best: Option<(usize, SizeKey, Compiled)> = None;
    for limit in min..=max {
        let (row, compiled) = searcher.candidate(limit, Vec::new(), None)?;
        if let (Some(key), Some(c)) = (row.verified_key(), compiled)
            && best.as_ref().is_none_or(|(_, k, _)| key < *k)
        {
            best = Some((uniform.len(), key, c));
        }
        uniform.push(row);
    }
    let Some((uniform_winner, mut current_key, mut selected)) = best else {
        return Err(Error::new(
            ErrorKind::Budget,
            format!(
                "no behaviorally verified canary found in the requested timing sample limit range ({})",
                rejection_summary(&uniform)
            ),
        ));
    };
    let selected_limit = uniform[uniform_winner].limit;

    // Stage 2: per-group refinement.
    let sizes = group_sizes(&selected);
    let mut current: Vec<usize> = vec![selected_limit; sizes.len()];
    let planned: usize = sizes
        .iter()
        .map(|&n| (n as usize).min(selected_limit).saturating_sub(min))
        .sum();
    let remaining = MAX_CANDIDATES - uniform_count;
    let mut refinement_rows: Vec<Row> = Vec::new();
    let mut accepted_groups = 0u64;
    let mut selected_refinement: Option<usize> = None;
    let skip_reason = if sizes.is_empty() || min >= selected_limit {
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
    if skip_reason.is_none() {
        for g in 0..sizes.len() {
            let top = (sizes[g] as usize).min(current[g]);
            let mut group_best: Option<(usize, SizeKey, Compiled)> = None;
            for l in min..top {
                let map: Vec<(usize, usize)> = current
                    .iter()
                    .enumerate()
                    .map(|(h, &cl)| (h, if h == g { l } else { cl }))
                    .filter(|&(_, cl)| cl != selected_limit)
                    .collect();
                let (row, compiled) = searcher.candidate(selected_limit, map, Some(g))?;
                if let (Some(key), Some(c)) = (row.verified_key(), compiled)
                    && key < current_key
                    && group_best.as_ref().is_none_or(|(_, k, _)| key < *k)
                {
                    group_best = Some((refinement_rows.len(), key, c));
                }
                refinement_rows.push(row);
            }
            if let Some((index, key, c)) = group_best {
                current[g] = refinement_rows[index].limit_of(g);
                current_key = key;
                selected = c;
                selected_refinement = Some(index);
                accepted_groups += 1;
            }
        }
    }

    let selected_map: Vec<(usize, usize)> = current
        .iter()
        .enumerate()
        .filter(|&(_, &l)| l != selected_limit)
        .map(|(g, &l)| (g, l))
        .collect();
    let mut selected_options = options.compile.clone();
    selected_options.timing_sample_limit = selected_limit;
    selected_options
        .timing_sample_limits_by_group
        .clone_from(&selected_map);
    selected_options.compiler_members.clear();

    let accepted = uniform
        .iter()
        .chain(&refinement_rows)
        .filter(|r| r.verified_key().is_some())
        .count() as u64;

    // The ledger.
    let mut ledger = Vec::new();
    {
        let mut o = ObjectWriter::new(&mut ledger);
        o.i64("accepted_candidates", accepted as i64);
        o.i64("candidate_count", searcher.compiled as i64);
        o.i64("evaluated_programs", searcher.cache.len() as i64);
        {
            let v = o.key("per_group_refinement");
            let mut r = ObjectWriter::new(v);
            r.i64("accepted_groups", accepted_groups as i64);
            r.i64("attempted_candidates", refinement_rows.len() as i64);
            let c = r.key("candidates");
            write_rows(c, &refinement_rows, selected_refinement);
            r.i64("group_count", sizes.len() as i64);
            r.str("mode", "greedy_per_group_timing_sample_limit_refinement");
            r.i64("planned_candidates", planned as i64);
            if let Some(reason) = &skip_reason {
                r.str("reason", reason);
            }
            write_map(r.key("selected_limits_by_group"), &selected_map);
            write_key(r.key("selected_size_key"), current_key);
            r.str(
                "status",
                match (&skip_reason, accepted_groups) {
                    (Some(_), _) => "skipped",
                    (None, 0) => "no_smaller_verified_candidate",
                    _ => "refined",
                },
            );
            r.end();
        }
        {
            let v = o.key("search_space");
            let mut s = ObjectWriter::new(v);
            s.i64("max_timing_sample_limit", max as i64);
            s.i64("min_timing_sample_limit", min as i64);
            s.i64("uniform_candidate_count", uniform_count as i64);
            s.end();
        }
        {
            let v = o.key("selected_candidate");
            let sm = &selected.summary;
            let mut s = ObjectWriter::new(v);
            s.i64("canary_bytes", sm.canary_bytes as i64);
            s.i64("canary_events", sm.canary_events as i64);
            s.str("execution_semantic_sha256", &sm.execution_semantic_sha256);
            write_key(s.key("size_key"), current_key);
            s.i64(
                "stored_recursive_timing_records",
                sm.stored_recursive_timing_records as i64,
            );
            s.i64("timing_sample_limit", selected_limit as i64);
            s.str(
                "timing_sample_limit_mode",
                if selected_map.is_empty() {
                    "uniform"
                } else {
                    "per_group"
                },
            );
            write_map(s.key("timing_sample_limits_by_group"), &selected_map);
            s.end();
        }
        let u = o.key("uniform_candidates");
        write_rows(
            u,
            &uniform,
            selected_refinement.is_none().then_some(uniform_winner),
        );
        o.end();
    }
    Ok(SearchOutcome {
        selected,
        selected_options,
        candidate_count: searcher.compiled,
        accepted_candidates: accepted,
        ledger,
    })
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
                {
                    let list = o.key("failed_configurations");
                    list.push(b'[');
                    for (k, name) in v.failed_configurations.iter().enumerate() {
                        if k > 0 {
                            list.push(b',');
                        }
                        canon::write_str(list, name);
                    }
                    list.push(b']');
                }
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
