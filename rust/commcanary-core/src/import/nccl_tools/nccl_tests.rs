//! nccl-tests' JSON output (`-J FILE.json`): the bus bandwidth the same
//! nodes reach, per operation and message size.
//!
//! One document (versions 1 to 3): `args` (its first element names the
//! binary, `all_reduce_perf`, which names the operation), `config`
//! (`nthreads`, `ngpus`, `devices`: one entry per process; ranks =
//! processes × threads × GPUs) and `results`: per size, `size` (bytes),
//! `type`, `redop`, and `out_of_place` / `in_place` (either may be `null`)
//! with `time` (or `cpu_time`, µs), `alg_bw` and `bus_bw` (GB/s). A number
//! may be the string `"nan"`; such a measurement is skipped.
//!
//! The curve keeps, per size, the better of the out-of-place and in-place
//! bus bandwidths: what the nodes can reach.

use std::path::Path;

use super::inspector::op_of;
use crate::error::{Error, Result};
use crate::json::{JsonLimits, Value, parse};

/// Versions this reader knows.
pub const VERSIONS: std::ops::RangeInclusive<i64> = 1..=3;

/// One run's curve.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// Trace op (`all_reduce`, …; `send_recv` for `sendrecv_perf`).
    pub op: &'static str,
    /// Ranks.
    pub ranks: usize,
    /// Element type(s) measured, as written (`float`, …), joined by `,`.
    pub types: String,
    /// (bytes, bus bandwidth GB/s), by size ascending.
    pub points: Vec<(i64, f64)>,
    /// The binary (`args[0]`'s file name).
    pub binary: String,
}

fn get<'a>(v: Value<'a>, key: &str) -> Result<Value<'a>> {
    v.get(key)
        .ok_or_else(|| Error::invalid(format!("field '{key}' is missing")))
}

fn int(v: Value<'_>, key: &str, min: i64) -> Result<i64> {
    get(v, key)?.as_i64().filter(|&n| n >= min).ok_or_else(|| {
        Error::invalid(format!(
            "field '{key}' must be an integer of at least {min}"
        ))
    })
}

/// A measurement's number: finite and non-negative, or `None` for `"nan"`.
fn measured(v: Option<Value<'_>>, path: &str) -> Result<Option<f64>> {
    match v {
        None => Ok(None),
        Some(x) if x.is_null() || x.as_str().is_some_and(|s| s.eq_ignore_ascii_case("nan")) => {
            Ok(None)
        }
        Some(x) => x
            .as_number()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .map(Some)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "field '{path}' must be a non-negative number or \"nan\""
                ))
            }),
    }
}

/// The operation a binary's name measures.
fn binary_op(binary: &str) -> Option<&'static str> {
    let stem = binary.rsplit('/').next().unwrap_or(binary);
    let stem = stem.strip_suffix("_perf").unwrap_or(stem);
    let letters: String = stem
        .chars()
        .filter(char::is_ascii_alphabetic)
        .collect::<String>()
        .to_ascii_lowercase();
    if letters == "sendrecv" {
        return Some("send_recv");
    }
    op_of(&letters)
}

fn curve(doc: Value<'_>) -> Result<Curve> {
    let version = int(doc, "version", 1)?;
    if !VERSIONS.contains(&version) {
        return Err(Error::invalid(format!(
            "field 'version' is {version}; this reader knows versions {} to {}",
            VERSIONS.start(),
            VERSIONS.end()
        )));
    }
    let binary = get(doc, "args")?
        .element(0)
        .and_then(|a| a.as_str())
        .ok_or_else(|| Error::invalid("field 'args' must start with the binary's path"))?
        .to_owned();
    let op = binary_op(&binary).ok_or_else(|| {
        Error::invalid(format!(
            "field 'args': '{binary}' is not an nccl-tests collective binary"
        ))
    })?;
    let config = get(doc, "config")?;
    let devices = get(config, "devices")?
        .len()
        .filter(|&n| n > 0)
        .ok_or_else(|| Error::invalid("field 'config.devices' must be a non-empty list"))?;
    let ranks = devices as i64 * int(config, "nthreads", 1)? * int(config, "ngpus", 1)?;
    if ranks as u64 > crate::limits::current().max_ranks {
        return Err(crate::limits::exceeded(
            "the run's ranks",
            "max_ranks",
            crate::limits::current().max_ranks,
        ));
    }
    let results = get(doc, "results")?;
    if !results.is_array() {
        return Err(Error::invalid("field 'results' must be a list"));
    }
    let mut points: Vec<(i64, f64)> = Vec::new();
    let mut types: Vec<String> = Vec::new();
    for (i, r) in results.elements().enumerate() {
        let size = int(r, "size", 0)
            .map_err(|e| Error::invalid(format!("results[{i}]: {}", e.message())))?;
        if let Some(t) = r.get("type").and_then(|t| t.as_str()) {
            if !types.iter().any(|x| x == t) {
                types.push(t.to_owned());
            }
        }
        let mut best: Option<f64> = None;
        for place in ["out_of_place", "in_place"] {
            let Some(m) = r.get(place).filter(|m| !m.is_null()) else {
                continue;
            };
            if let Some(bw) = measured(m.get("bus_bw"), &format!("results[{i}].{place}.bus_bw"))? {
                best = Some(best.map_or(bw, |b: f64| b.max(bw)));
            }
        }
        if let (Some(bw), true) = (best, size > 0) {
            match points.iter_mut().find(|p| p.0 == size) {
                Some(p) => p.1 = p.1.max(bw),
                None => points.push((size, bw)),
            }
        }
    }
    if points.is_empty() {
        return Err(Error::invalid("field 'results' holds no measured size"));
    }
    points.sort_by_key(|p| p.0);
    Ok(Curve {
        op,
        ranks: ranks as usize,
        types: types.join(","),
        points,
        binary,
    })
}

/// Reads one nccl-tests JSON file.
///
/// # Errors
/// Bad JSON or a document that breaks the format: one line naming the file
/// and the field.
pub fn read_file(path: &Path) -> Result<Curve> {
    let named = |e: Error| Error::new(e.kind(), format!("{}: {}", path.display(), e.message()));
    let bytes = crate::input::read_input(path, crate::input::MAX_INPUT_BYTES).map_err(named)?;
    read_bytes(&bytes).map_err(named)
}

/// Reads an nccl-tests JSON document from its bytes.
///
/// # Errors
/// As [`read_file`], without the file's name.
pub fn read_bytes(bytes: &[u8]) -> Result<Curve> {
    let doc = parse(bytes, JsonLimits::default())?;
    let root = doc.root().ok_or_else(|| Error::invalid("empty document"))?;
    if !root.is_object() {
        return Err(Error::invalid(
            "is not an nccl-tests JSON document (an object)",
        ));
    }
    curve(root)
}

impl Curve {
    /// The bus bandwidth at `bytes`: interpolated linearly in log2(size)
    /// between the nearest measured sizes; outside them, the nearest end
    /// (the second value says so).
    #[must_use]
    pub fn at(&self, bytes: f64) -> (f64, bool) {
        let first = self.points[0];
        let last = self.points[self.points.len() - 1];
        if bytes <= first.0 as f64 {
            return (first.1, bytes < first.0 as f64);
        }
        if bytes >= last.0 as f64 {
            return (last.1, bytes > last.0 as f64);
        }
        let i = self
            .points
            .iter()
            .position(|p| p.0 as f64 >= bytes)
            .unwrap_or(self.points.len() - 1);
        let (a, b) = (self.points[i - 1], self.points[i]);
        let t =
            ((bytes).log2() - (a.0 as f64).log2()) / ((b.0 as f64).log2() - (a.0 as f64).log2());
        (a.1 + t * (b.1 - a.1), false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Result<Curve> {
        let d = parse(text.as_bytes(), JsonLimits::default())?;
        curve(d.root().unwrap())
    }

    const RUN: &str = r#"{"version":2,"args":["./build/all_reduce_perf","-b","8"],"config":{"nthreads":1,"ngpus":2,
        "devices":[{"rank":0},{"rank":1}]},"results":[
        {"size":1024,"type":"float","redop":"sum","root":"    -1","out_of_place":{"time":10.0,"alg_bw":0.1,"bus_bw":0.15,"nwrong":0.0},
         "in_place":{"time":9.0,"alg_bw":0.11,"bus_bw":0.17,"nwrong":null}},
        {"size":4096,"type":"float","redop":"sum","root":"    -1","out_of_place":null,"in_place":{"cpu_time":9.0,"alg_bw":0.4,"bus_bw":0.6,"nwrong":0.0}},
        {"size":8192,"type":"float","redop":"sum","root":"    -1","out_of_place":{"time":"nan","alg_bw":"nan","bus_bw":"nan","nwrong":0.0},"in_place":null}]}"#;

    #[test]
    fn a_run_reads_as_its_best_bandwidth_per_size() {
        let c = doc(RUN).unwrap();
        assert_eq!(
            (c.op, c.ranks, c.types.as_str()),
            ("all_reduce", 4, "float")
        );
        assert_eq!(c.points, [(1024, 0.17), (4096, 0.6)]);
        let (mid, out) = c.at(2048.0);
        assert!(!out && (mid - 0.385).abs() < 1e-9);
        assert_eq!(c.at(1e9), (0.6, true));
    }

    #[test]
    fn hostile_documents_are_refused_naming_the_field() {
        let e = |t: &str| doc(t).unwrap_err().to_string();
        assert!(e(&RUN.replace("\"version\":2", "\"version\":9")).contains("version"));
        assert!(e(&RUN.replace("all_reduce_perf", "hello")).contains("args"));
        assert!(e(&RUN.replace("\"bus_bw\":0.15", "\"bus_bw\":-1")).contains("bus_bw"));
        assert!(
            e(&RUN.replace("\"devices\":[{\"rank\":0},{\"rank\":1}]", "\"devices\":[]"))
                .contains("devices")
        );
        assert!(e(&RUN.replace("\"size\":1024", "\"size\":\"big\"")).contains("size"));
    }
}
