//! Communication performance from NCCL Inspector's records or a job's
//! traces, against what nccl-tests measured on the same nodes: the
//! `commcanary.comm_perf.v1` document and the human lines above it.
//!
//! The table is the straggler analysis's ([`super::stragglers::bandwidth`]):
//! per (communicator, op, power-of-two size bucket), the median time and
//! nccl-tests' algorithm and bus bandwidth, and the instances far below
//! their class. An Inspector instance's time is its slowest rank's
//! execution time; a traced one's, its last arrival to its last end. Given nccl-tests runs, each row whose op and rank count match a run
//! gets that run's bus bandwidth at the row's typical size (the geometric
//! middle of its smallest and largest message, interpolated in log size) and
//! the fraction the job reached of it.
//!
//! Invariants: rows sorted by (communicator id, op, bucket); the
//! document is canonical JSON; bandwidths rounded to the kB/s, times to the ns.

use std::path::PathBuf;

use super::round_us as us;
use super::stragglers::bandwidth::Sample;
use super::stragglers::bandwidth::{Row, round_gbps as gbps, row_json, table};
use crate::import::nccl_tools::inspector::{Instance, Record, instances};
use crate::import::nccl_tools::nccl_tests::Curve;
use crate::json::Json;

/// The format identifier.
pub const FORMAT: &str = crate::document::COMM_PERF;

/// A row's comparison with nccl-tests.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    /// Which run (index into the curves).
    pub run: usize,
    /// The size it was read at, bytes.
    pub bytes: f64,
    /// nccl-tests' bus bandwidth there, GB/s.
    pub busbw_gbps: f64,
    /// The row's median bus bandwidth over it.
    pub fraction: f64,
    /// The size is outside the run's sizes (its nearest end was used).
    pub extrapolated: bool,
}

/// Where the instances came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// NCCL Inspector records (a flagged instance is named by its `seq`).
    Inspector,
    /// A job's traces (a flagged instance is named by its `step`).
    Traces,
}

impl Source {
    /// As the document spells it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Source::Inspector => "nccl-inspector",
            Source::Traces => "traces",
        }
    }
}

/// The analysis.
#[derive(Debug, Clone)]
pub struct CommPerf {
    /// Where the instances came from.
    pub source: Source,
    /// Group names (Inspector: communicator ids), by group index.
    pub comms: Vec<String>,
    /// Inspector's instances (empty for traces).
    pub instances: Vec<Instance>,
    /// Collective instances in the table.
    pub instance_count: usize,
    /// Instances fewer ranks reported (traces: seen on some members only).
    pub partial: usize,
    /// The table.
    pub rows: Vec<Row>,
    /// Per row, its comparison when a run matches.
    pub expected: Vec<Option<Expected>>,
    /// The nccl-tests runs.
    pub runs: Vec<Curve>,
    /// Records (Inspector) or calls (traces) read.
    pub records: usize,
}

/// Per row, the nccl-tests run of the same op on as many ranks, read at the
/// row's typical size.
#[must_use]
pub fn expected(rows: &[Row], runs: &[Curve]) -> Vec<Option<Expected>> {
    rows.iter()
        .map(|r| {
            let run = runs
                .iter()
                .position(|c| c.op == r.op && c.ranks == r.ranks)?;
            let bytes = ((r.bytes_min.max(1) as f64).ln() * 0.5
                + (r.bytes_max.max(1) as f64).ln() * 0.5)
                .exp();
            let (busbw, extrapolated) = runs[run].at(bytes);
            (busbw > 0.0).then(|| Expected {
                run,
                bytes,
                busbw_gbps: busbw,
                fraction: r.median_busbw_gbps / busbw,
                extrapolated,
            })
        })
        .collect()
}

/// The analysis of Inspector `records` against nccl-tests `runs`.
///
/// # Errors
/// Records of one instance that disagree.
pub fn analyse(records: &[Record], runs: Vec<Curve>) -> crate::error::Result<CommPerf> {
    let insts = instances(records)?;
    let (comms, samples) = samples(&insts);
    let rows = table(&samples);
    let expected = expected(&rows, &runs);
    let partial = insts
        .iter()
        .filter(|i| (i.reported as i64) < i.n_ranks)
        .count();
    Ok(CommPerf {
        source: Source::Inspector,
        comms,
        instance_count: insts.len(),
        instances: insts,
        partial,
        rows,
        expected,
        runs,
        records: records.len(),
    })
}

/// The analysis of a job's traces (per-rank Kineto traces, or one merged
/// trace such as `import-nccl-profiler` writes): the straggler analysis's
/// communication table, against nccl-tests `runs`.
///
/// # Errors
/// No usable traces, or what the straggler analysis refuses.
pub fn analyse_traces(paths: &[PathBuf], runs: Vec<Curve>) -> crate::error::Result<CommPerf> {
    use super::evidence::{GatherOptions, gather};
    let evidence = gather(paths, &GatherOptions::for_analysis("stragglers", None)?)?;
    let mut job = evidence
        .traces
        .ok_or_else(|| crate::error::Error::invalid("no profiler traces in the given paths"))?;
    super::stragglers::with_steps(&mut job)?;
    let found = super::stragglers::analyze(&job)?;
    let comms = job
        .groups
        .iter()
        .map(|g| {
            if g.desc.is_empty() {
                g.name.clone()
            } else {
                g.desc.clone()
            }
        })
        .collect();
    let rows = found.bandwidth;
    let expected = expected(&rows, &runs);
    Ok(CommPerf {
        source: Source::Traces,
        comms,
        instances: Vec::new(),
        instance_count: job.instances.iter().filter(|i| i.complete).count(),
        partial: job.instances.iter().filter(|i| !i.complete).count(),
        rows,
        expected,
        runs,
        records: job.profiles.iter().map(|p| p.calls.len()).sum(),
    })
}

fn size(bytes: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} {}", units[u])
    } else {
        format!("{v:.1} {}", units[u])
    }
}

impl CommPerf {
    /// The document.
    #[must_use]
    pub fn document(&self, files: &[String]) -> Json {
        let rows: Vec<Json> = self
            .rows
            .iter()
            .zip(&self.expected)
            .map(|(r, e)| {
                let flagged: Vec<Json> = r
                    .flagged
                    .iter()
                    .map(|f| {
                        let named = match self.source {
                            Source::Inspector => {
                                Json::object().with("seq", self.instances[f.instance].seq)
                            }
                            Source::Traces => Json::object().with("step", f.step),
                        };
                        named
                            .with("rank", f.rank)
                            .with("time_us", us(f.time_us))
                            .with("busbw_gbps", gbps(f.busbw_gbps))
                    })
                    .collect();
                let expected = e.as_ref().map_or(Json::Null, |e| {
                    Json::object()
                        .with("run", e.run)
                        .with("bytes", e.bytes.round())
                        .with("busbw_gbps", gbps(e.busbw_gbps))
                        .with("fraction", (e.fraction * 1e4).round() / 1e4 + 0.0)
                        .with("extrapolated", e.extrapolated)
                });
                row_json(r)
                    .with("comm", self.comms[r.group].as_str())
                    .with("flagged", flagged)
                    .with("expected", expected)
            })
            .collect();
        let runs: Vec<Json> = self
            .runs
            .iter()
            .map(|c| {
                Json::object()
                    .with("binary", c.binary.as_str())
                    .with("op", c.op)
                    .with("ranks", c.ranks)
                    .with("types", c.types.as_str())
                    .with("sizes", c.points.len())
            })
            .collect();
        Json::object()
            .with("format", FORMAT)
            .with("source", self.source.name())
            .with(
                "files",
                files
                    .iter()
                    .map(|f| Json::from(f.as_str()))
                    .collect::<Vec<_>>(),
            )
            .with("records", self.records)
            .with("instances", self.instance_count)
            .with("partially_reported", self.partial)
            .with("rows", rows)
            .with("nccl_tests", runs)
    }

    /// The human lines: a summary, then one line per row.
    #[must_use]
    pub fn lines(&self) -> Vec<String> {
        let flagged: usize = self.rows.iter().map(|r| r.flagged_count).sum();
        let mut out = vec![format!(
            "communication: {} collective instance(s) from {} {}, {} (communicator, op, size) class(es); {} instance(s) far below their class's bus bandwidth",
            self.instance_count,
            self.records,
            if self.source == Source::Inspector {
                "record(s)"
            } else {
                "call(s) in the traces"
            },
            self.rows.len(),
            flagged
        )];
        for (r, e) in self.rows.iter().zip(&self.expected) {
            let mut line = format!(
                "  {} {} on {} ({} ranks, {} instance(s)): median {:.1} us, bus bandwidth {:.2} GB/s",
                r.op,
                size(r.bytes_max as f64),
                self.comms[r.group],
                r.ranks,
                r.count,
                r.median_time_us,
                r.median_busbw_gbps
            );
            if let Some(e) = e {
                line.push_str(&format!(
                    "; {:.0}% of what nccl-tests measured ({:.2} GB/s at {}{})",
                    e.fraction * 100.0,
                    e.busbw_gbps,
                    size(e.bytes),
                    if e.extrapolated {
                        ", outside its sizes"
                    } else {
                        ""
                    }
                ));
            } else if !self.runs.is_empty() {
                line.push_str("; no nccl-tests run of this op on this many ranks");
            }
            if r.flagged_count > 0 {
                line.push_str(&format!("; {} slow instance(s)", r.flagged_count));
            }
            out.push(line);
        }
        out
    }
}

/// The whole command: Inspector files (or directories of them) or a job's
/// traces, and nccl-tests runs, in; the document's canonical bytes and the
/// lines out.
///
/// # Errors
/// An unreadable or malformed file (named), no Inspector record at all, or
/// both kinds of input at once.
pub fn from_files(
    inspector: &[PathBuf],
    traces: &[PathBuf],
    nccl_tests: &[PathBuf],
) -> crate::error::Result<(Vec<u8>, Vec<String>)> {
    use crate::import::nccl_tools::{inspector as insp, nccl_tests as tests};
    let runs = nccl_tests
        .iter()
        .map(|p| tests::read_file(p))
        .collect::<crate::error::Result<Vec<_>>>()?;
    if !traces.is_empty() {
        if !inspector.is_empty() {
            return Err(crate::error::Error::option(
                "trace",
                "cannot be given with Inspector files: one source at a time",
            ));
        }
        let analysis = analyse_traces(traces, runs)?;
        let labels: Vec<String> = traces.iter().map(|f| f.display().to_string()).collect();
        return Ok((analysis.document(&labels).to_canonical(), analysis.lines()));
    }
    let files = insp::files(inspector)?;
    let mut records = Vec::new();
    for f in &files {
        records.extend(insp::read_file(f)?);
    }
    if records.is_empty() {
        return Err(crate::error::Error::invalid(
            "no NCCL Inspector records in the given files",
        ));
    }
    let analysis = analyse(&records, runs)?;
    let labels: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    Ok((analysis.document(&labels).to_canonical(), analysis.lines()))
}

/// The communicators in first-seen order of `instances`, and the table's
/// samples (group = that order's index).
#[must_use]
pub fn samples(instances: &[Instance]) -> (Vec<String>, Vec<Sample>) {
    let mut comms: Vec<String> = Vec::new();
    let samples = instances
        .iter()
        .enumerate()
        .map(|(i, inst)| {
            let group = comms
                .iter()
                .position(|c| *c == inst.comm)
                .unwrap_or_else(|| {
                    comms.push(inst.comm.clone());
                    comms.len() - 1
                });
            Sample {
                group,
                op: inst.op,
                bytes: inst.bytes,
                ranks: inst.n_ranks as usize,
                time_us: inst.time_us,
                step: -1,
                slowest_rank: inst.slowest_rank,
                algorithm: 0,
                instance: i,
            }
        })
        .collect();
    (comms, samples)
}
