//! NCCL Inspector's JSON output → per-rank collective records → instances.
//!
//! Each record (`inspector_output_format_version` `v4.0`) is one rank's view
//! of one collective: `header` (`id`, the communicator id as hex text;
//! `rank`; `n_ranks`; `nnodes`), `metadata` (the version, `hostname`, `pid`,
//! `dump_timestamp_us`) and `coll_perf` (`coll`, `coll_sn`,
//! `coll_msg_size_bytes`, `coll_exec_time_us`, optionally
//! `coll_timing_source`, `coll_algobw_gbs`, `coll_busbw_gbs`). Files hold
//! records one after another (JSON Lines or pretty-printed).
//!
//! An instance is (communicator, `coll_sn`); its time is the slowest rank's
//! execution time, which is what bounds the collective (Inspector times each
//! rank's own kernel).

use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use super::each_value;
use crate::error::{Error, Result};
use crate::import::kineto::ops::Kind;
use crate::json::Value;

/// The format versions this reader knows.
pub const VERSIONS: [&str; 1] = ["v4.0"];

/// One rank's record of one collective.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Communicator id (`header.id`).
    pub comm: String,
    /// Rank in the communicator.
    pub rank: i64,
    /// Ranks in it.
    pub n_ranks: i64,
    /// Nodes.
    pub n_nodes: i64,
    /// Trace op (`all_reduce`, …).
    pub op: &'static str,
    /// Sequence number in the communicator.
    pub seq: i64,
    /// Message bytes.
    pub bytes: i64,
    /// Execution time, µs.
    pub exec_us: f64,
    /// `coll_busbw_gbs` as written.
    pub busbw_gbps: f64,
    /// `coll_timing_source` (`kernel_gpu`, …), empty when absent.
    pub timing_source: String,
    /// Host name.
    pub host: String,
}

fn field<'a>(v: Value<'a>, path: &str) -> Result<Value<'a>> {
    let mut cur = v;
    for key in path.split('.') {
        cur = cur
            .get(key)
            .ok_or_else(|| Error::invalid(format!("field '{path}' is missing")))?;
    }
    Ok(cur)
}

fn int(v: Value<'_>, path: &str, min: i64) -> Result<i64> {
    field(v, path)?
        .as_i64()
        .filter(|&n| n >= min)
        .ok_or_else(|| {
            Error::invalid(format!(
                "field '{path}' must be an integer of at least {min}"
            ))
        })
}

fn number(v: Value<'_>, path: &str) -> Result<f64> {
    field(v, path)?
        .as_number()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| Error::invalid(format!("field '{path}' must be a non-negative number")))
}

fn text<'a>(v: Value<'a>, path: &str) -> Result<&'a str> {
    field(v, path)?
        .as_str()
        .ok_or_else(|| Error::invalid(format!("field '{path}' must be a string")))
}

/// The trace op of an NCCL function name (`AllReduce` → `all_reduce`).
#[must_use]
pub fn op_of(func: &str) -> Option<&'static str> {
    let letters: String = func
        .chars()
        .filter(char::is_ascii_alphabetic)
        .collect::<String>()
        .to_ascii_lowercase();
    match Kind::of_normalized(&letters)? {
        Kind::Other => None,
        Kind::Send | Kind::Recv => Some("send_recv"),
        k => Some(k.trace_op().0),
    }
}

fn record(v: Value<'_>) -> Result<Record> {
    let version = text(v, "metadata.inspector_output_format_version")?;
    if !VERSIONS.contains(&version) {
        return Err(Error::invalid(format!(
            "field 'metadata.inspector_output_format_version' is '{version}'; this reader knows {}",
            VERSIONS.join(", ")
        )));
    }
    let coll = text(v, "coll_perf.coll")?;
    let op = op_of(coll).ok_or_else(|| {
        Error::invalid(format!(
            "field 'coll_perf.coll': unknown collective '{coll}'"
        ))
    })?;
    let n_ranks = int(v, "header.n_ranks", 1)?;
    if n_ranks as u64 > crate::limits::current().max_ranks {
        return Err(crate::limits::exceeded(
            "field 'header.n_ranks'",
            "max_ranks",
            crate::limits::current().max_ranks,
        ));
    }
    let rank = int(v, "header.rank", 0)?;
    if rank >= n_ranks {
        return Err(Error::invalid(format!(
            "field 'header.rank' is {rank}, not below n_ranks {n_ranks}"
        )));
    }
    Ok(Record {
        comm: text(v, "header.id")?.to_owned(),
        rank,
        n_ranks,
        n_nodes: int(v, "header.nnodes", 1)?,
        op,
        seq: int(v, "coll_perf.coll_sn", 0)?,
        bytes: int(v, "coll_perf.coll_msg_size_bytes", 0)?,
        exec_us: number(v, "coll_perf.coll_exec_time_us")?,
        busbw_gbps: number(v, "coll_perf.coll_busbw_gbs")?,
        timing_source: v
            .get("coll_perf")
            .and_then(|c| c.get("coll_timing_source"))
            .and_then(|s| s.as_str())
            .unwrap_or("")
            .to_owned(),
        host: text(v, "metadata.hostname")?.to_owned(),
    })
}

/// Reads one Inspector output file.
///
/// # Errors
/// Bad JSON or a record that breaks the format: one line naming the file,
/// the record's position and the field.
pub fn read_file(path: &Path) -> Result<Vec<Record>> {
    let named = |e: Error| Error::new(e.kind(), format!("{}: {}", path.display(), e.message()));
    let bytes = crate::input::read_input(path, crate::input::MAX_INPUT_BYTES).map_err(named)?;
    read_bytes(&bytes).map_err(named)
}

/// Reads Inspector records from a file's bytes.
///
/// # Errors
/// As [`read_file`], without the file's name.
pub fn read_bytes(bytes: &[u8]) -> Result<Vec<Record>> {
    let mut out = Vec::new();
    each_value(bytes, |n, v| {
        if !v.is_object() {
            return Err(Error::invalid(format!("record {n} is not an object")));
        }
        out.push(
            record(v).map_err(|e| Error::new(e.kind(), format!("record {n}: {}", e.message())))?,
        );
        Ok(())
    })?;
    Ok(out)
}

/// The Inspector files among `paths` (directories are read one level deep:
/// every regular file in them), sorted.
///
/// # Errors
/// A path that does not exist.
pub fn files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let entries = std::fs::read_dir(p).map_err(|e| {
                Error::new(crate::error::ErrorKind::Io, format!("{}: {e}", p.display()))
            })?;
            let mut inside: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.is_file())
                .collect();
            inside.sort();
            out.extend(inside);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// A collective seen by Inspector: one (communicator, sequence number).
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// Communicator id.
    pub comm: String,
    /// Trace op.
    pub op: &'static str,
    /// Sequence number.
    pub seq: i64,
    /// Message bytes.
    pub bytes: i64,
    /// Ranks in the communicator.
    pub n_ranks: i64,
    /// Ranks that reported it.
    pub reported: usize,
    /// The slowest rank's execution time, µs.
    pub time_us: f64,
    /// The slowest rank.
    pub slowest_rank: i64,
}

/// Joins the ranks' records into instances, sorted by (communicator, sequence).
///
/// # Errors
/// Two records of one instance that disagree on op, size or ranks.
pub fn instances(records: &[Record]) -> Result<Vec<Instance>> {
    let mut by: FxHashMap<(&str, i64), Instance> = FxHashMap::default();
    for r in records {
        let e = by.entry((&r.comm, r.seq)).or_insert_with(|| Instance {
            comm: r.comm.clone(),
            op: r.op,
            seq: r.seq,
            bytes: r.bytes,
            n_ranks: r.n_ranks,
            reported: 0,
            time_us: -1.0,
            slowest_rank: r.rank,
        });
        if (e.op, e.bytes, e.n_ranks) != (r.op, r.bytes, r.n_ranks) {
            return Err(Error::invalid(format!(
                "communicator {} collective {}: ranks disagree ({} of {} bytes on {} ranks, and {} of {} bytes on {} ranks)",
                r.comm, r.seq, e.op, e.bytes, e.n_ranks, r.op, r.bytes, r.n_ranks
            )));
        }
        e.reported += 1;
        if r.exec_us > e.time_us {
            e.time_us = r.exec_us;
            e.slowest_rank = r.rank;
        }
    }
    let mut out: Vec<Instance> = by.into_values().collect();
    out.sort_by(|a, b| (&a.comm, a.seq).cmp(&(&b.comm, b.seq)));
    Ok(out)
}
