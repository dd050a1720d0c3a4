//! Reading and validating a `commcanary.canary.v3` or `.v4` (step loop) file.
//!
//! [`read_canary`] parses the bytes, checks every shape rule of
//! `docs/formats/canary.md`, bounds the expansion before anything is expanded,
//! rebuilds the [`Program`], and recomputes what the canary claims about
//! itself: counts, fidelity maxima, `canary_bytes`, the artifact provenance
//! and the execution and calibration commitments. A canary that passes is
//! *internally consistent*; errors name the field (`canary events[3].timing[0]
//! weight must be a positive integer`).

use sha2::{Digest, Sha256};

use super::commit::program_digests;
use super::expand::expanded_counts;
use super::{
    Block, Bounded, CANARY_FORMAT, CANARY_LOOP_FORMAT, FIDELITY_FIELDS, IntervalErrors, Leaf,
    Point, Program, Record, StepLoop,
};
use crate::error::{Error, Result};
use crate::json::{Doc, JsonLimits, Node, NodeId, Parser, Value, canon};
use crate::trace::{KNOWN_OPS, Signature, hex};

/// Largest number of logical occurrences a canary may expand to, by
/// default (the policy's `max_expanded_occurrences`).
pub const MAX_EXPANDED_OCCURRENCES: u64 = crate::limits::Limits::DEFAULT.max_expanded_occurrences;

/// A validated canary.
#[derive(Debug, Clone)]
pub struct Canary {
    /// The executable program.
    pub program: Program,
    /// The parsed top-level members except `events` (for sections copied
    /// into reports).
    pub doc: Doc,
    /// Top-level member name → node in `doc`.
    pub members: Vec<(Vec<u8>, NodeId)>,
    /// SHA-256 of the canary's canonical JSON.
    pub sha256: String,
    /// `compiler.source_events`.
    pub source_events: u64,
    /// `compiler.execution_semantic_sha256` (verified by [`read_canary`]).
    pub execution_semantic_sha256: String,
    /// `compiler.calibration_evaluation_sha256` (verified by [`read_canary`]).
    pub calibration_evaluation_sha256: String,
}

impl Canary {
    /// Top-level member `key`, when present.
    #[must_use]
    pub fn member(&self, key: &str) -> Option<crate::json::Value<'_>> {
        self.members
            .iter()
            .find(|(k, _)| k.as_slice() == key.as_bytes())
            .map(|(_, id)| self.doc.value(*id))
    }

    /// Canonical JSON of top-level member `key` (`{}` when absent).
    #[must_use]
    pub fn member_json(&self, key: &str) -> Vec<u8> {
        self.member(key)
            .map_or_else(|| b"{}".to_vec(), canon::to_vec)
    }
}

/// Event arrays with at least this many bytes are parsed by two threads.
const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// The parsed top level of a canary: members in `docs[0]`, event elements
/// spread over one or two documents (the second read in parallel).
struct TopLevel {
    docs: Vec<Doc>,
    members: Vec<(Vec<u8>, NodeId)>,
    events: Option<Vec<(usize, NodeId)>>,
    events_not_array: bool,
    canonical: bool,
}

impl TopLevel {
    fn get(&self, key: &str) -> Option<Value<'_>> {
        self.members
            .iter()
            .find(|(k, _)| k.as_slice() == key.as_bytes())
            .map(|(_, id)| self.docs[0].value(*id))
    }

    fn event(&self, (doc, id): (usize, NodeId)) -> Value<'_> {
        self.docs[doc].value(id)
    }

    /// Canonical JSON of the whole document.
    fn canonical_json(&self) -> Vec<u8> {
        let mut keys: Vec<&[u8]> = self.members.iter().map(|(k, _)| k.as_slice()).collect();
        if self.events.is_some() {
            keys.push(b"events");
        }
        keys.sort_unstable();
        let mut out = vec![b'{'];
        for (i, key) in keys.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            canon::write_wtf8(&mut out, key);
            out.push(b':');
            if *key == b"events" {
                out.push(b'[');
                for (j, e) in self.events.iter().flatten().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    canon::write_value(&mut out, self.event(*e));
                }
                out.push(b']');
            } else if let Some(v) = self.get(&String::from_utf8_lossy(key)) {
                canon::write_value(&mut out, v);
            }
        }
        out.push(b'}');
        out
    }
}

/// A likely element boundary of an array near `from` (`}` ws* `,` ws* `{`),
/// verified by the reader before the parallel pass is trusted.
fn guess_boundary(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < bytes.len() {
        let close = i + bytes[i..].iter().position(|&b| b == b'}')?;
        if bytes.get(close + 1) == Some(&b',') && bytes.get(close + 2) == Some(&b'{') {
            return Some(close + 2);
        }
        i = close + 1;
    }
    None
}

/// Parses array elements into `doc` from the current position (the first
/// element or `]`), stopping after `]`, or before an element that would
/// start exactly at `stop_at`. Returns the element ids and whether the stop
/// offset was reached.
fn parse_elements(
    p: &mut Parser<'_>,
    doc: &mut Doc,
    stop_at: Option<usize>,
) -> Result<(Vec<NodeId>, bool)> {
    let mut ids = Vec::new();
    let mut stop_at = stop_at;
    p.skip_ws();
    if p.peek() == Some(b']') {
        p.expect(b']', "")?;
        return Ok((ids, false));
    }
    loop {
        p.skip_ws();
        if let Some(stop) = stop_at {
            if p.pos() == stop {
                return Ok((ids, true));
            }
            if p.pos() > stop {
                stop_at = None;
            }
        }
        p.count_item()?;
        ids.push(p.parse_value(doc, 3)?);
        p.skip_ws();
        match p.peek() {
            Some(b',') => p.expect(b',', "")?,
            Some(b']') => {
                p.expect(b']', "")?;
                return Ok((ids, false));
            }
            _ => return Err(p.error("Expecting ',' delimiter")),
        }
    }
}

fn parse_top(bytes: &[u8], limits: JsonLimits) -> Result<TopLevel> {
    let mut p = Parser::new(bytes, limits)?;
    let leading_ws = bytes.first().is_some_and(|b| b.is_ascii_whitespace());
    p.skip_ws();
    if p.peek() != Some(b'{') {
        let mut scratch = Doc::new();
        p.parse_value(&mut scratch, 1)?;
        p.finish()?;
        return Err(Error::new(
            crate::error::ErrorKind::Json,
            "must contain a JSON object",
        ));
    }
    p.reset_canonical();
    p.expect(b'{', "")?;
    let mut top = TopLevel {
        docs: vec![Doc::new()],
        members: Vec::new(),
        events: None,
        events_not_array: false,
        canonical: true,
    };
    let mut keys: Vec<Vec<u8>> = Vec::new();
    p.skip_ws();
    if p.peek() == Some(b'}') {
        p.expect(b'}', "")?;
    } else {
        loop {
            p.skip_ws();
            p.count_item()?;
            let mut key = Vec::new();
            p.read_string_into(&mut key)?;
            if keys.contains(&key) {
                return Err(p.error(&format!(
                    "duplicate object key {:?} at",
                    String::from_utf8_lossy(&key)
                )));
            }
            if keys.last().is_some_and(|last| *last >= key) {
                top.canonical = false;
            }
            keys.push(key.clone());
            p.expect(b':', "Expecting ':' delimiter")?;
            p.skip_ws();
            if key == b"events" && p.peek() == Some(b'[') {
                p.check_depth(2)?;
                p.expect(b'[', "")?;
                let remaining = bytes.len() - p.pos();
                let split = (remaining >= PARALLEL_MIN_BYTES)
                    .then(|| guess_boundary(bytes, p.pos() + remaining / 2))
                    .flatten();
                let mut events: Vec<(usize, NodeId)> = Vec::new();
                match split {
                    None => {
                        let (ids, _) = parse_elements(&mut p, &mut top.docs[0], None)?;
                        events.extend(ids.into_iter().map(|id| (0, id)));
                    }
                    Some(split) => {
                        let second_pass =
                            move || -> Result<(Doc, Vec<NodeId>, usize, u64, bool)> {
                                let mut q = Parser::new(bytes, limits)?;
                                q.seek(split);
                                q.reset_canonical();
                                let mut doc = Doc::new();
                                let (ids, _) = parse_elements(&mut q, &mut doc, None)?;
                                Ok((doc, ids, q.pos(), q.items(), q.was_canonical()))
                            };
                        let (first, second) = rayon::join(
                            || parse_elements(&mut p, &mut top.docs[0], Some(split)),
                            second_pass,
                        );
                        let (ids, reached) = first?;
                        events.extend(ids.into_iter().map(|id| (0, id)));
                        match (reached, second) {
                            (true, Ok((doc, ids, end, items, canonical))) => {
                                top.docs.push(doc);
                                events.extend(ids.into_iter().map(|id| (1, id)));
                                p.seek(end);
                                p.add_items(items)?;
                                top.canonical &= canonical;
                            }
                            (true, _) => {
                                // The second pass failed: read the rest here so
                                // errors are reported in order.
                                let (ids, _) = parse_elements(&mut p, &mut top.docs[0], None)?;
                                events.extend(ids.into_iter().map(|id| (0, id)));
                            }
                            (false, _) => {}
                        }
                    }
                }
                top.events = Some(events);
            } else {
                let id = p.parse_value(&mut top.docs[0], 2)?;
                if key == b"events" {
                    top.events_not_array = true;
                } else {
                    top.members.push((key, id));
                }
            }
            p.skip_ws();
            match p.peek() {
                Some(b',') => p.expect(b',', "")?,
                Some(b'}') => {
                    p.expect(b'}', "")?;
                    break;
                }
                _ => return Err(p.error("Expecting ',' delimiter")),
            }
        }
    }
    top.canonical &= p.was_canonical() && !leading_ws && p.pos() == bytes.len();
    p.finish()?;
    Ok(top)
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("canary {what}"))
}

fn number(v: Option<Value<'_>>, path: &dyn Fn() -> String) -> Result<f64> {
    match v.map(|v| v.node()) {
        Some(Node::Int(i)) => Ok(i as f64),
        Some(Node::Float { value, .. }) => Ok(value),
        _ => Err(bad(format_args!("{} must be a number", path()))),
    }
}

fn non_negative(v: Option<Value<'_>>, path: &dyn Fn() -> String) -> Result<f64> {
    let x = number(v, path)?;
    if !(0.0..=1e12).contains(&x) {
        return Err(bad(format_args!("{} must be between 0 and 1e12", path())));
    }
    Ok(x)
}

fn integer(v: Option<Value<'_>>, min: i64, path: &dyn Fn() -> String) -> Result<i64> {
    match v.and_then(|v| v.as_i64()) {
        Some(i) if i >= min => Ok(i),
        _ => Err(bad(format_args!("{} must be an integer >= {min}", path()))),
    }
}

fn string<'a>(v: Option<Value<'a>>, path: &dyn Fn() -> String) -> Result<&'a [u8]> {
    v.and_then(|v| v.as_wtf8())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| bad(format_args!("{} must be a non-empty string", path())))
}

fn only_keys(v: Value<'_>, allowed: &[&str], path: &dyn Fn() -> String) -> Result<()> {
    for (k, _) in v.members() {
        if !allowed.iter().any(|a| a.as_bytes() == k) {
            return Err(bad(format_args!(
                "{} has unknown field '{}'",
                path(),
                String::from_utf8_lossy(k)
            )));
        }
    }
    Ok(())
}

fn string_list(v: Option<Value<'_>>, path: &str) -> Result<Vec<String>> {
    let v = v
        .filter(Value::is_array)
        .ok_or_else(|| bad(format_args!("{path} must be a list of names")))?;
    v.elements()
        .map(|e| {
            e.as_str()
                .map(str::to_owned)
                .ok_or_else(|| bad(format_args!("{path} must be a list of names")))
        })
        .collect()
}

/// Parses and validates canary `bytes`.
///
/// # Errors
/// JSON errors, shape violations and any self-description that does not
/// recompute, each naming the field.
pub fn read_canary(bytes: &[u8]) -> Result<Canary> {
    let canary = read_canary_deferred(bytes)?;
    verify_program_digests(&canary)?;
    Ok(canary)
}

/// Recomputes the execution and calibration commitments from the program
/// and checks them against the ones the canary claims.
///
/// # Errors
/// A commitment that does not match, named.
pub fn verify_program_digests(canary: &Canary) -> Result<()> {
    let (execution, calibration) = program_digests(&canary.program);
    for (key, want, claimed) in [
        (
            "execution_semantic_sha256",
            &execution,
            &canary.execution_semantic_sha256,
        ),
        (
            "calibration_evaluation_sha256",
            &calibration,
            &canary.calibration_evaluation_sha256,
        ),
    ] {
        if want != claimed && crate::fault::CHECK_DIGESTS {
            return Err(bad(format_args!(
                "compiler.{key} does not match the program"
            )));
        }
    }
    Ok(())
}

/// Like [`read_canary`] but without recomputing the execution and
/// calibration commitments (the costliest check, linear in occurrences);
/// the caller must run [`verify_program_digests`] before trusting the
/// result, typically on another thread while it already uses the program.
///
/// # Errors
/// As [`read_canary`], minus the program commitments.
pub fn read_canary_deferred(bytes: &[u8]) -> Result<Canary> {
    let limits = JsonLimits {
        max_items: 400_000_000,
        ..JsonLimits::default()
    };
    let top = parse_top(bytes, limits)?;
    let format = top.get("format").and_then(|f| f.as_str());
    let loops_allowed = format == Some(CANARY_LOOP_FORMAT);
    crate::document::expect_format(
        format,
        if loops_allowed {
            CANARY_LOOP_FORMAT
        } else {
            CANARY_FORMAT
        },
    )?;
    check_top_members(&top)?;
    let compiler = top.get("compiler").expect("checked above");
    let (has_observed, has_uncertain) = timing_layout(&top)?;
    let program = read_program(&top, has_observed, has_uncertain, loops_allowed)?;
    let source_events = check_counts(compiler, &program)?;
    check_fidelity(compiler, &program)?;
    let digests = check_commitments(bytes, &top, compiler)?;
    let TopLevel { docs, members, .. } = top;
    let doc = docs.into_iter().next().unwrap_or_default();
    Ok(Canary {
        program,
        sha256: digests.sha256,
        source_events,
        execution_semantic_sha256: digests.execution_semantic_sha256,
        calibration_evaluation_sha256: digests.calibration_evaluation_sha256,
        doc,
        members,
    })
}

/// Stage 1: only known top-level members, the format, and the members that
/// must be objects.
fn check_top_members(top: &TopLevel) -> Result<()> {
    let allowed = [
        "compiler",
        "events",
        "format",
        "signatures",
        "source_format",
        "system",
        "timing_columns",
        "workload",
    ];
    for (key, _) in &top.members {
        if !allowed.iter().any(|a| a.as_bytes() == key.as_slice()) {
            return Err(bad(format_args!(
                "document has unknown field '{}'",
                String::from_utf8_lossy(key)
            )));
        }
    }
    let root = &top;
    match root.get("format").and_then(|f| f.as_str()) {
        Some(CANARY_FORMAT | CANARY_LOOP_FORMAT) => {}
        Some(other) => {
            return Err(bad(format_args!(
                "field 'format' must be '{CANARY_FORMAT}', got '{other}'"
            )));
        }
        None => {
            return Err(bad(format_args!(
                "field 'format' must be '{CANARY_FORMAT}'"
            )));
        }
    }
    string(root.get("source_format"), &|| {
        "field 'source_format'".to_owned()
    })?;
    for key in ["workload", "system", "compiler"] {
        if !root.get(key).is_some_and(|v| v.is_object()) {
            return Err(bad(format_args!("field '{key}' must be an object")));
        }
    }
    Ok(())
}

/// Stage 2: the `timing_columns` layout, `(has_observed, has_uncertain)`.
fn timing_layout(root: &TopLevel) -> Result<(bool, bool)> {
    let columns = string_list(root.get("timing_columns"), "field 'timing_columns'")?;
    let base = [
        "weight",
        "gap_us",
        "arrival_offsets_us",
        "compute_before_us",
        "compute_overlap_us",
        "compute_pressure",
    ];
    if columns.len() < 6 || columns[..6] != base {
        return Err(bad(
            "field 'timing_columns' must start with the six plain-record columns",
        ));
    }
    let has_observed = columns.get(6).map(String::as_str) == Some("observed_exposed_us");
    let uncertain_at = 6 + usize::from(has_observed);
    let has_uncertain =
        columns.get(uncertain_at).map(String::as_str) == Some("compute_fields_uncertain");
    if columns.len() != uncertain_at + usize::from(has_uncertain) {
        return Err(bad("field 'timing_columns' has unknown columns"));
    }
    Ok((has_observed, has_uncertain))
}

/// Stage 3: signatures and events into the program.
fn read_program(
    top: &TopLevel,
    has_observed: bool,
    has_uncertain: bool,
    loops_allowed: bool,
) -> Result<Program> {
    let root = top;
    let mut program = Program {
        has_observed,
        ..Program::default()
    };
    // Signatures.
    let sigs = root
        .get("signatures")
        .filter(Value::is_array)
        .ok_or_else(|| bad("field 'signatures' must be a list"))?;
    for (i, s) in sigs.elements().enumerate() {
        program.signatures.push(read_signature(s, i)?);
    }

    // Events.
    let events = match (&top.events, top.events_not_array) {
        (Some(events), false) => events,
        _ => return Err(bad("field 'events' must be a list")),
    };
    let mut reader = RecordReader {
        program: &mut program,
        has_observed,
        has_uncertain,
        interval_len: super::write::interval_layout(has_observed, has_uncertain).len(),
        errors_len: super::write::error_layout(has_observed).len(),
    };
    for (e, &element) in events.iter().enumerate() {
        let block = top.event(element);
        let path = || format!("events[{e}]");
        if !block.is_object() {
            return Err(bad(format_args!("{} must be an object", path())));
        }
        if let Some(slots) = block.get("loop") {
            if !loops_allowed {
                return Err(bad(format_args!(
                    "{} is a step loop, which only a {CANARY_LOOP_FORMAT} canary may hold",
                    path()
                )));
            }
            let step_loop = read_loop(&mut reader, block, slots, e)?;
            reader.program.loops.push(step_loop);
            let i = reader.program.loops.len() as u32 - 1;
            reader.program.blocks.push(Block::Loop(i));
        } else if let Some(children) = block.get("motif") {
            only_keys(block, &["motif", "repeats"], &path)?;
            let repeats = integer(block.get("repeats"), 2, &|| format!("{} repeats", path()))?;
            if !children.is_array() || children.len().unwrap_or(0) < 2 {
                return Err(bad(format_args!(
                    "{} motif must list at least two leaves",
                    path()
                )));
            }
            let first_leaf = reader.program.leaves.len() as u32;
            for (c, child) in children.elements().enumerate() {
                reader.leaf(child, &|| format!("events[{e}].motif[{c}]"))?;
            }
            reader.program.blocks.push(Block::Motif {
                first_leaf,
                leaf_count: reader.program.leaves.len() as u32 - first_leaf,
                repeats: repeats as u64,
            });
        } else {
            reader.leaf(block, &path)?;
            let l = reader.program.leaves.len() as u32 - 1;
            reader.program.blocks.push(Block::Leaf(l));
        }
    }

    Ok(program)
}

/// A step loop block: its slot leaves, variants and schedule, with every
/// slot's stream holding exactly what the schedule takes from it.
fn read_loop(
    reader: &mut RecordReader<'_>,
    block: Value<'_>,
    slots: Value<'_>,
    e: usize,
) -> Result<StepLoop> {
    let path = || format!("events[{e}]");
    only_keys(block, &["loop", "schedule", "variants"], &path)?;
    if !slots.is_array() || slots.is_empty() {
        return Err(bad(format_args!(
            "{} loop must list at least one slot leaf",
            path()
        )));
    }
    let first_leaf = reader.program.leaves.len() as u32;
    for (k, leaf) in slots.elements().enumerate() {
        reader.leaf(leaf, &|| format!("events[{e}].loop[{k}]"))?;
    }
    let slot_count = reader.program.leaves.len() as u32 - first_leaf;
    let pairs = |v: Option<Value<'_>>, what: &str, first_max: u64| -> Result<Vec<(u32, u64)>> {
        let v = v
            .filter(|v| v.is_array() && !v.is_empty())
            .ok_or_else(|| bad(format_args!("{what} must be a non-empty list of pairs")))?;
        v.elements()
            .enumerate()
            .map(|(k, pair)| {
                let at = || format!("{what}[{k}]");
                let items: Vec<Value<'_>> = if pair.is_array() {
                    pair.elements().collect()
                } else {
                    Vec::new()
                };
                if items.len() != 2 {
                    return Err(bad(format_args!("{} must be a pair of integers", at())));
                }
                let a = integer(Some(items[0]), 0, &at)? as u64;
                if a >= first_max {
                    return Err(bad(format_args!(
                        "{} names {a}, which does not exist ({first_max} defined)",
                        at()
                    )));
                }
                let b = integer(Some(items[1]), 1, &at)? as u64;
                Ok((a as u32, b))
            })
            .collect()
    };
    let variants_v = block
        .get("variants")
        .filter(|v| v.is_array() && !v.is_empty())
        .ok_or_else(|| bad(format_args!("{} variants must be a non-empty list", path())))?;
    let mut variants = Vec::new();
    for (v, variant) in variants_v.elements().enumerate() {
        let what = format!("{}.variants[{v}]", path());
        variants.push(pairs(Some(variant), &what, u64::from(slot_count))?);
    }
    let schedule = pairs(
        block.get("schedule"),
        &format!("{}.schedule", path()),
        variants.len() as u64,
    )?;
    let step_loop = StepLoop {
        first_leaf,
        slot_count,
        variants,
        schedule,
    };
    let mut runs = vec![false; step_loop.variants.len()];
    for &(v, _) in &step_loop.schedule {
        runs[v as usize] = true;
    }
    for v in 0..step_loop.variants.len() as u32 {
        if !runs[v as usize] {
            return Err(bad(format_args!(
                "{}.variants[{v}] never runs (the schedule does not name it)",
                path()
            )));
        }
    }
    for (k, demand) in step_loop.slot_demand().into_iter().enumerate() {
        let leaf = &reader.program.leaves[first_leaf as usize + k];
        let held = reader.program.leaf_repeat(leaf);
        if held != demand {
            return Err(bad(format_args!(
                "{}.loop[{k}] timing covers {held} events but the schedule takes {demand}",
                path()
            )));
        }
    }
    Ok(step_loop)
}

/// Stage 4: expansion bounds, then the counts the `compiler` block claims;
/// returns `source_events`.
fn check_counts(compiler: Value<'_>, program: &Program) -> Result<u64> {
    // Expansion bounds before anything is expanded.
    let (logical_events, occurrences) = expanded_counts(program);
    let limit = crate::limits::current().max_expanded_occurrences;
    if occurrences > limit {
        let seen = if occurrences == u64::MAX {
            "more than 2^64 - 1".to_owned()
        } else {
            occurrences.to_string()
        };
        return Err(Error::limit(format!(
            "violates resource constraints: canary expands to {seen} occurrences, above max_expanded_occurrences={limit} {}",
            crate::limits::hint("max_expanded_occurrences")
        )));
    }

    // What the canary says about itself.
    let c = |key: &str| compiler.get(key);
    let count = |key: &str| integer(c(key), 0, &|| format!("compiler.{key}"));
    let source_events = count("source_events")? as u64;
    if source_events != occurrences {
        return Err(bad(format_args!(
            "compiler.source_events={source_events} does not match the {occurrences} events its records cover"
        )));
    }
    let checks: [(&str, u64); 3] = [
        ("canary_events", program.blocks.len() as u64),
        ("expanded_canary_events", logical_events),
        (
            "sequence_motif_count",
            program
                .blocks
                .iter()
                .filter(|b| matches!(b, Block::Motif { .. }))
                .count() as u64,
        ),
    ];
    for (key, want) in checks {
        let got = count(key)? as u64;
        if got != want {
            return Err(bad(format_args!(
                "compiler.{key}={got} does not match the program ({want})"
            )));
        }
    }
    Ok(source_events)
}

/// Stage 5: the fidelity block against the bounded intervals.
fn check_fidelity(compiler: Value<'_>, program: &Program) -> Result<()> {
    let c = |key: &str| compiler.get(key);
    let fidelity = c("fidelity")
        .filter(Value::is_object)
        .ok_or_else(|| bad("compiler.fidelity must be an object"))?;
    let mut maxima = [0.0f64; 8];
    for b in &program.bounded {
        let values = b.errors.fidelity_values();
        for (m, v) in maxima.iter_mut().zip(values) {
            *m = m.max(v);
        }
    }
    for (name, want) in FIDELITY_FIELDS.iter().zip(maxima) {
        let got = number(fidelity.get(name), &|| format!("compiler.fidelity.{name}"))?;
        if (got - want).abs() > 1e-9 {
            return Err(bad(format_args!(
                "compiler.fidelity.{name}={} does not match its bounded intervals ({})",
                crate::pyfloat::repr(got),
                crate::pyfloat::repr(want)
            )));
        }
    }
    let mode = fidelity.get("mode").and_then(|m| m.as_str());
    let want_mode = if program.bounded.is_empty() {
        "lossless_timing"
    } else {
        "bounded_approximate"
    };
    if mode != Some(want_mode) {
        return Err(bad(format_args!(
            "compiler.fidelity.mode must be '{want_mode}'"
        )));
    }

    Ok(())
}

/// The digests a canary's bytes and `compiler` block establish.
struct Digests {
    sha256: String,
    execution_semantic_sha256: String,
    calibration_evaluation_sha256: String,
}

/// Stage 6: sizes and the provenance commitment.
fn check_commitments(bytes: &[u8], top: &TopLevel, compiler: Value<'_>) -> Result<Digests> {
    let c = |key: &str| compiler.get(key);
    let count = |key: &str| integer(c(key), 0, &|| format!("compiler.{key}"));
    let input_is_canonical = top.canonical;
    // Sizes and commitments. Canonical input (what commcanary writes) is
    // hashed as it is; anything else is re-serialized first. The three
    // digests are independent and computed side by side.
    let owned;
    let canonical: &[u8] = if input_is_canonical {
        bytes
    } else {
        owned = top.canonical_json();
        &owned
    };
    let canary_bytes = count("canary_bytes")? as u64;
    if canary_bytes != canonical.len() as u64 && crate::fault::CHECK_DIGESTS {
        return Err(bad(format_args!(
            "compiler.canary_bytes={canary_bytes} does not match its canonical size ({})",
            canonical.len()
        )));
    }
    let (provenance, sha256) = rayon::join(
        || provenance_digest(compiler, canonical),
        || hex(&Sha256::digest(canonical)),
    );
    let claimed = c("artifact_provenance_sha256")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    if claimed != provenance && crate::fault::CHECK_DIGESTS {
        return Err(bad(
            "compiler.artifact_provenance_sha256 does not match the canary's content",
        ));
    }
    let claimed_digest = |key: &str| -> Result<String> {
        c(key)
            .and_then(|v| v.as_str())
            .filter(|s| s.len() == 64)
            .map(str::to_owned)
            .ok_or_else(|| bad(format_args!("compiler.{key} must be a SHA-256 hex digest")))
    };
    Ok(Digests {
        sha256,
        execution_semantic_sha256: claimed_digest("execution_semantic_sha256")?,
        calibration_evaluation_sha256: claimed_digest("calibration_evaluation_sha256")?,
    })
}

/// SHA-256 of the canary minus `compiler.{artifact_provenance_sha256,
/// canary_bytes, byte_compression_ratio}`, given the canary's canonical bytes
/// (which begin with `{"compiler":` since `compiler` sorts first): the
/// compiler block is re-serialized without the three fields and the rest of
/// the bytes are hashed as they are.
fn provenance_digest(compiler: Value<'_>, canonical: &[u8]) -> String {
    let compiler_json = canon::to_vec(compiler);
    let head = b"{\"compiler\":";
    let mut hasher = Sha256::new();
    hasher.update(head);
    let mut inner: Vec<(&[u8], Value<'_>)> = compiler
        .members()
        .filter(|(k, _)| {
            !matches!(
                *k,
                b"artifact_provenance_sha256" | b"canary_bytes" | b"byte_compression_ratio"
            )
        })
        .collect();
    inner.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = Vec::with_capacity(compiler_json.len());
    out.push(b'{');
    for (j, (k, v)) in inner.iter().enumerate() {
        if j > 0 {
            out.push(b',');
        }
        canon::write_wtf8(&mut out, k);
        out.push(b':');
        canon::write_value(&mut out, *v);
    }
    out.push(b'}');
    hasher.update(&out);
    hasher.update(&canonical[head.len() + compiler_json.len()..]);
    hex(&hasher.finalize())
}

fn read_signature(s: Value<'_>, i: usize) -> Result<Signature> {
    let path = || format!("signatures[{i}]");
    if !s.is_object() {
        return Err(bad(format_args!("{} must be an object", path())));
    }
    only_keys(
        s,
        &[
            "bytes",
            "channel",
            "concurrent_groups",
            "custom_op",
            "dtype",
            "group",
            "message_sequence",
            "op",
            "phase",
            "ranks",
            "receiver_rank",
            "reduction_op",
            "root_rank",
            "sender_rank",
            "tag",
        ],
        &path,
    )?;
    let field = |k: &str| format!("{} {k}", path());
    let ranks_v = s
        .get("ranks")
        .filter(Value::is_array)
        .ok_or_else(|| bad(format_args!("{} must be a list", field("ranks"))))?;
    let mut ranks = Vec::with_capacity(ranks_v.len().unwrap_or(0));
    for r in ranks_v.elements() {
        ranks.push(integer(Some(r), 0, &|| field("ranks"))?);
    }
    if ranks.is_empty() || ranks.len() > 65_536 {
        return Err(bad(format_args!(
            "{} must list between 1 and 65536 ranks",
            field("ranks")
        )));
    }
    let mut sorted = ranks.clone();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return Err(bad(format_args!(
            "{} must not repeat a rank",
            field("ranks")
        )));
    }
    let custom_op = match s.get("custom_op") {
        None => false,
        Some(v) if v.as_bool() == Some(true) => true,
        Some(_) => {
            return Err(bad(format_args!(
                "{} must be true when present",
                field("custom_op")
            )));
        }
    };
    let op = string(s.get("op"), &|| field("op"))?.to_vec();
    if !custom_op && !KNOWN_OPS.iter().any(|k| k.as_bytes() == op.as_slice()) {
        return Err(bad(format_args!(
            "{} is not a known operation and custom_op is not set",
            field("op")
        )));
    }
    let optional_rank = |k: &str| -> Result<Option<i64>> {
        match s.get(k) {
            None => Ok(None),
            Some(v) => {
                let r = integer(Some(v), 0, &|| field(k))?;
                if !ranks.contains(&r) {
                    return Err(bad(format_args!("{} must be one of the ranks", field(k))));
                }
                Ok(Some(r))
            }
        }
    };
    let optional_string = |k: &str| -> Result<Option<Vec<u8>>> {
        s.get(k)
            .map(|v| string(Some(v), &|| field(k)).map(<[u8]>::to_vec))
            .transpose()
    };
    Ok(Signature {
        phase: string(s.get("phase"), &|| field("phase"))?.to_vec(),
        op,
        bytes: integer(s.get("bytes"), 1, &|| field("bytes"))?,
        group: string(s.get("group"), &|| field("group"))?.to_vec(),
        concurrent_groups: integer(s.get("concurrent_groups"), 1, &|| {
            field("concurrent_groups")
        })?,
        custom_op,
        dtype: s.get("dtype").map(canon::to_vec),
        reduction_op: s.get("reduction_op").map(canon::to_vec),
        root_rank: s.get("root_rank").map(canon::to_vec),
        sender_rank: optional_rank("sender_rank")?,
        receiver_rank: optional_rank("receiver_rank")?,
        message_sequence: s
            .get("message_sequence")
            .map(|v| integer(Some(v), 0, &|| field("message_sequence")))
            .transpose()?,
        tag: optional_string("tag")?,
        channel: optional_string("channel")?,
        ranks,
    })
}

struct RecordReader<'p> {
    program: &'p mut Program,
    has_observed: bool,
    has_uncertain: bool,
    interval_len: usize,
    errors_len: usize,
}

impl RecordReader<'_> {
    fn leaf(&mut self, leaf: Value<'_>, path: &dyn Fn() -> String) -> Result<()> {
        if !leaf.is_object() || leaf.get("motif").is_some() {
            return Err(bad(format_args!(
                "{} must be a leaf object (motifs do not nest)",
                path()
            )));
        }
        only_keys(leaf, &["signature", "timing"], path)?;
        let sig = integer(leaf.get("signature"), 0, &|| {
            format!("{} signature", path())
        })? as usize;
        if sig >= self.program.signatures.len() {
            return Err(bad(format_args!(
                "{} signature {sig} does not exist",
                path()
            )));
        }
        let ranks = self.program.signatures[sig].rank_count();
        let timing = leaf
            .get("timing")
            .filter(|t| t.is_array() && !t.is_empty())
            .ok_or_else(|| bad(format_args!("{} timing must be a non-empty list", path())))?;
        let first_record = self.program.records.len() as u32;
        for (r, record) in timing.elements().enumerate() {
            let rpath = || format!("{}.timing[{r}]", path());
            let rec = if record.is_array() {
                let (point, weight) = self.plain(record, ranks, &rpath)?;
                Record::Plain { point, weight }
            } else if record.is_object() && record.get("pattern").is_some() {
                only_keys(record, &["gap_sum_us", "pattern", "repeats"], &rpath)?;
                let gap_sum_us = non_negative(record.get("gap_sum_us"), &|| {
                    format!("{} gap_sum_us", rpath())
                })?;
                let repeats =
                    integer(record.get("repeats"), 2, &|| format!("{} repeats", rpath()))? as u64;
                let children = record
                    .get("pattern")
                    .filter(|p| p.is_array() && !p.is_empty())
                    .ok_or_else(|| {
                        bad(format_args!("{} pattern must be a non-empty list", rpath()))
                    })?;
                let first_point = self.program.points.len() as u32;
                for (k, child) in children.elements().enumerate() {
                    let cpath = || format!("{}.pattern[{k}]", rpath());
                    if !child.is_array() {
                        return Err(bad(format_args!("{} must be a plain record", cpath())));
                    }
                    let (_, w) = self.plain(child, ranks, &cpath)?;
                    if w != 1 {
                        return Err(bad(format_args!("{} weight must be 1", cpath())));
                    }
                }
                Record::Pattern {
                    first_point,
                    period: self.program.points.len() as u32 - first_point,
                    repeats,
                    gap_sum_us,
                }
            } else if record.is_object() && record.get("interval").is_some() {
                self.bounded(record, ranks, &rpath)?
            } else {
                return Err(bad(format_args!("{} is not a timing record", rpath())));
            };
            self.program.records.push(rec);
        }
        self.program.leaves.push(Leaf {
            signature: sig as u32,
            first_record,
            record_count: self.program.records.len() as u32 - first_record,
        });
        Ok(())
    }

    fn offsets(
        &mut self,
        v: Option<Value<'_>>,
        ranks: usize,
        path: &dyn Fn() -> String,
    ) -> Result<u32> {
        let v = v
            .filter(|o| o.is_array() && o.len() == Some(ranks))
            .ok_or_else(|| {
                bad(format_args!(
                    "{} arrival_offsets_us must list {ranks} offsets",
                    path()
                ))
            })?;
        let at = self.program.offsets.len() as u32;
        for o in v.elements() {
            let x = non_negative(Some(o), &|| format!("{} arrival_offsets_us", path()))?;
            self.program.offsets.push(x);
        }
        Ok(at)
    }

    fn plain(
        &mut self,
        record: Value<'_>,
        ranks: usize,
        path: &dyn Fn() -> String,
    ) -> Result<(u32, u64)> {
        let want = 6 + usize::from(self.has_observed) + usize::from(self.has_uncertain);
        if record.len() != Some(want) {
            return Err(bad(format_args!("{} must have {want} columns", path())));
        }
        let col = |i: usize| record.element(i);
        let weight = integer(col(0), 1, &|| format!("{} weight", path()))? as u64;
        let field = |name: &'static str| move || format!("{} {name}", path());
        let gap_us = non_negative(col(1), &field("gap_us"))?;
        let offsets_at = self.offsets(col(2), ranks, path)?;
        let compute_before_us = non_negative(col(3), &field("compute_before_us"))?;
        let compute_overlap_us = non_negative(col(4), &field("compute_overlap_us"))?;
        let compute_pressure = non_negative(col(5), &field("compute_pressure"))?;
        let observed_exposed_us = if self.has_observed {
            non_negative(col(6), &field("observed_exposed_us"))?
        } else {
            f64::NAN
        };
        let uncertain = if self.has_uncertain {
            col(want - 1).and_then(|v| v.as_bool()).ok_or_else(|| {
                bad(format_args!(
                    "{} compute_fields_uncertain must be a boolean",
                    path()
                ))
            })?
        } else {
            false
        };
        self.program.points.push(Point {
            gap_us,
            compute_before_us,
            compute_overlap_us,
            compute_pressure,
            observed_exposed_us,
            offsets_at,
            uncertain,
        });
        Ok((self.program.points.len() as u32 - 1, weight))
    }

    fn bounded(
        &mut self,
        record: Value<'_>,
        ranks: usize,
        path: &dyn Fn() -> String,
    ) -> Result<Record> {
        only_keys(
            record,
            &["errors", "interval", "source_segment_sha256"],
            path,
        )?;
        let interval = record
            .get("interval")
            .filter(|v| v.len() == Some(self.interval_len) && v.is_array())
            .ok_or_else(|| {
                bad(format_args!(
                    "{} interval must have {} columns",
                    path(),
                    self.interval_len
                ))
            })?;
        let cols: Vec<Value<'_>> = interval.elements().collect();
        let field = |name: &'static str| move || format!("{} interval {name}", path());
        let weight = integer(Some(cols[0]), 1, &field("weight"))? as u64;
        let gap_sum_us = non_negative(Some(cols[1]), &field("gap_sum_us"))?;
        let gap_us = non_negative(Some(cols[2]), &field("gap_us"))?;
        let representative_index =
            integer(Some(cols[3]), 0, &field("representative_index"))? as u64;
        let offsets_at = self.offsets(Some(cols[4]), ranks, path)?;
        let compute_before_us = non_negative(Some(cols[5]), &field("compute_before_us"))?;
        let compute_overlap_us = non_negative(Some(cols[6]), &field("compute_overlap_us"))?;
        let compute_pressure = non_negative(Some(cols[7]), &field("compute_pressure"))?;
        let mut next = 8;
        let observed_exposed_us = if self.has_observed {
            next += 1;
            non_negative(Some(cols[8]), &field("observed_exposed_us"))?
        } else {
            f64::NAN
        };
        let uncertain_weight = if self.has_uncertain {
            let u = integer(Some(cols[next]), 0, &field("uncertain_weight"))? as u64;
            if u > weight {
                return Err(bad(format_args!(
                    "{} interval uncertain_weight exceeds its weight",
                    path()
                )));
            }
            u
        } else {
            0
        };
        let errors = record
            .get("errors")
            .filter(|v| v.len() == Some(self.errors_len) && v.is_array())
            .ok_or_else(|| {
                bad(format_args!(
                    "{} errors must have {} columns",
                    path(),
                    self.errors_len
                ))
            })?;
        let e: Vec<f64> = errors
            .elements()
            .map(|v| non_negative(Some(v), &|| format!("{} errors", path())))
            .collect::<Result<_>>()?;
        let sha = record
            .get("source_segment_sha256")
            .and_then(|v| v.as_str())
            .filter(|s| {
                s.len() == 64
                    && s.bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            })
            .ok_or_else(|| {
                bad(format_args!(
                    "{} source_segment_sha256 must be 64 lowercase hex digits",
                    path()
                ))
            })?;
        let mut segment_sha256 = [0u8; 32];
        for (i, byte) in segment_sha256.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&sha[2 * i..2 * i + 2], 16).unwrap_or(0);
        }
        self.program.points.push(Point {
            gap_us,
            compute_before_us,
            compute_overlap_us,
            compute_pressure,
            observed_exposed_us,
            offsets_at,
            uncertain: false,
        });
        self.program.bounded.push(Bounded {
            point: self.program.points.len() as u32 - 1,
            weight,
            gap_sum_us,
            representative_index,
            errors: IntervalErrors {
                gap: e[0],
                skew: e[1],
                arrival_offset: e[2],
                compute_before: e[3],
                overlap: e[4],
                pressure: e[5],
                prefix_gap: e[6],
                representative_gap: e[7],
                observed: if self.has_observed { e[8] } else { f64::NAN },
            },
            segment_sha256,
            uncertain_weight,
        });
        Ok(Record::Bounded(self.program.bounded.len() as u32 - 1))
    }
}
