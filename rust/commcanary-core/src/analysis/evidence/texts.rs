//! Text evidence: stack dumps, exception texts and combined launcher logs.
//!
//! A text whose lines carry rank tags (`[rank3]:`, `srun --label`'s `3: `)
//! is a combined log: split by rank, each rank's part read as its own text
//! (labelled `file[rank 3]`). A launcher's failure summary (`torchrun`'s
//! `exitcode : -9 ... (SIGKILL)`) says how a rank's process ended. Any other
//! text is one rank's, named by its file (`rank3_stacks.txt`); a thread
//! dump is stacks, otherwise its last exception is the rank's exception.

use std::path::PathBuf;

use super::{Evidence, Ranked, damaged, file_json, skipped};
use crate::error::{Error, Result};
use crate::import::stacks::{
    parse_exception, parse_stacks, process_exits, rank_from_file_name, split_by_rank,
};
use crate::input::read_input;

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

/// Reads every text, each rank's part of a combined log on its own.
pub(super) fn read_texts(
    evidence: &mut Evidence,
    damage: &mut Vec<Error>,
    texts: Vec<(PathBuf, String)>,
) {
    for (path, label) in texts {
        let bytes = match read_text(&path) {
            Ok(b) => b,
            Err(e) => {
                damaged(evidence, damage, &label, e);
                continue;
            }
        };
        let exits = process_exits(&bytes);
        for exit in &exits {
            evidence.files.push(
                file_json(&label, "process_exit", Some(exit.rank), true)
                    .with("exitcode", exit.exitcode)
                    .with("signal", exit.signal.as_deref()),
            );
            evidence.exits.push((label.clone(), exit.clone()));
        }
        if let Some(parts) = split_by_rank(&bytes) {
            for (rank, part) in parts {
                let part_label = format!("{label}[rank {rank}]");
                if !read_one(evidence, &part, part_label.clone(), Some(rank)) {
                    evidence.files.push(skipped(
                        &part_label,
                        "a rank's lines with neither a stack dump nor an exception",
                    ));
                }
            }
            continue;
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let rank = rank_from_file_name(&name);
        if !read_one(evidence, &bytes, label.clone(), rank) && exits.is_empty() {
            evidence.files.push(skipped(
                &label,
                "text with neither a stack dump nor an exception",
            ));
        }
    }
}

/// Reads one rank's text; whether it was evidence (stacks or an exception).
/// Evidence without a rank is listed as unused.
/// What a backend writes when members disagree on a collective (gloo's
/// enforce message; NCCL's desync report).
const MISMATCH_REPORTS: [&str; 2] = [
    "distributed collective mismatch",
    "doesn't match expected size",
];

fn read_one(evidence: &mut Evidence, bytes: &[u8], label: String, rank: Option<i64>) -> bool {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(65536)]).into_owned();
    if let Some(r) = rank
        && MISMATCH_REPORTS.iter().any(|m| text.contains(m))
        && !evidence.mismatch_reports.contains(&r)
    {
        evidence.mismatch_reports.push(r);
    }
    let thread_dump = text.contains("(most recent call first)")
        || text
            .lines()
            .any(|l| l.starts_with("Thread ") && l.contains("): \""));
    let exception = if thread_dump {
        None
    } else {
        parse_exception(bytes)
    };
    let stacks = if exception.is_none() {
        parse_stacks(bytes)
    } else {
        None
    };
    let kind = match (&exception, &stacks) {
        (Some(_), _) => "exception",
        (None, Some(_)) => "stacks",
        (None, None) => return false,
    };
    let Some(rank) = rank else {
        evidence
            .files
            .push(file_json(&label, kind, None, false).with(
                "reason",
                format!("no rank in the file name (name it like rank3_{kind}.txt)"),
            ));
        return true;
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
    true
}
