//! Criterion micro-benchmarks of the hot paths: JSON parsing and the v1
//! trace reader, canonical JSON writing, the streaming Chrome-trace scanner,
//! compilation, and the replay model over 10^5 occurrences. Whole-command timings live in `benches/` at the
//! repository root.
//!
//! `cargo bench -p commcanary-core --bench hot_paths`

use std::fmt::Write as _;
use std::hint::black_box;

use commcanary_core::compile::{CompileOptions, compile};
use commcanary_core::import::stream::{ScanLimits, scan_bytes};
use commcanary_core::json::{JsonLimits, canon, parse};
use commcanary_core::sim::{Settings, replay};
use commcanary_core::trace::{LoadOptions, load_bytes};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// A synthetic TP8 trace of `events` all-reduces in three sizes, with
/// per-rank arrivals: the shape of the bundled example, any length.
fn synthetic_trace(events: usize) -> Vec<u8> {
    let mut s = String::from(
        r#"{"format":"commcanary.trace.v1","system":{"backend":"bench"},"workload":{"name":"bench"},"events":["#,
    );
    let mut start = 0.0f64;
    for i in 0..events {
        if i > 0 {
            s.push(',');
        }
        let bytes = [262_144, 131_072, 65_536][i % 3];
        let skew = 1.0 + (i % 7) as f64 * 0.25;
        s.push_str(
            r#"{"op":"all_reduce","group":"tp0","phase":"decode","ranks":[0,1,2,3,4,5,6,7],"#,
        );
        let _ = write!(
            s,
            r#""bytes":{bytes},"start_us":{start:.3},"compute_before_us":{:.3},"compute_overlap_us":{:.3},"compute_pressure":0.6,"rank_arrival_us":["#,
            20.0 + (i % 5) as f64,
            12.0 + (i % 3) as f64
        );
        for r in 0..8 {
            if r > 0 {
                s.push(',');
            }
            let _ = write!(s, "{:.3}", r as f64 * skew);
        }
        s.push_str("]}");
        start += 40.0 + (i % 11) as f64;
    }
    s.push_str("]}");
    s.into_bytes()
}

fn json(c: &mut Criterion) {
    let text = synthetic_trace(10_000);
    let mut g = c.benchmark_group("json");
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("parse 10^4 events", |b| {
        b.iter(|| parse(black_box(&text), JsonLimits::default()).unwrap());
    });
    let doc = parse(&text, JsonLimits::default()).unwrap();
    g.bench_function("canonical write 10^4 events", |b| {
        b.iter(|| canon::to_vec(black_box(doc.root().unwrap())));
    });
    g.bench_function("trace load 10^4 events", |b| {
        b.iter(|| load_bytes(black_box(&text), &LoadOptions::default()).unwrap());
    });
    g.finish();
}

/// A synthetic Kineto (PyTorch profiler) trace of about `target` bytes,
/// pretty-printed as the profiler writes it: CPU ops, collectives and GPU
/// kernels of 200-400 bytes each with small `args`.
fn synthetic_kineto(target: usize) -> Vec<u8> {
    let mut s = String::from(
        "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 8},\n  \"traceEvents\": [\n",
    );
    let mut ts = 5_223_586_558_616.141f64;
    let mut i = 0usize;
    while s.len() < target {
        if i > 0 {
            s.push_str(",\n");
        }
        let (cat, name) = [
            ("cpu_op", "aten::empty_strided"),
            ("user_annotation", "nccl:all_reduce"),
            (
                "kernel",
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            ),
        ][i % 3];
        let _ = write!(
            s,
            "  {{\n    \"ph\": \"X\", \"cat\": \"{cat}\", \"name\": \"{name}\", \"pid\": 26175, \"tid\": 26989,\n    \"ts\": {ts:.3}, \"dur\": {:.3},\n    \"args\": {{\n      \"External id\": {i}, \"Record function id\": 0, \"Concrete Inputs\": [\"\", \"\"], \"Input type\": [\"float\"], \"Input Dims\": [[65536]], \"Ev Idx\": {}\n    }}\n  }}",
            3.0 + (i % 17) as f64 * 0.731,
            i % 1000
        );
        ts += 7.25 + (i % 11) as f64;
        i += 1;
    }
    s.push_str("\n  ],\n  \"traceName\": \"/tmp/rank0.json\"\n}");
    s.into_bytes()
}

fn stream(c: &mut Criterion) {
    let text = synthetic_kineto(20 << 20);
    let mut g = c.benchmark_group("stream");
    g.sample_size(20);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("scan_bytes 20 MB Kineto trace", |b| {
        b.iter(|| {
            let mut kept = 0usize;
            let scanned = scan_bytes(black_box(&text), &ScanLimits::default(), &mut |e| {
                kept += e.name.as_ref().map_or(0, |n| n.len()) + usize::from(e.ts.is_some());
                Ok(())
            })
            .unwrap();
            (scanned.events, kept)
        });
    });
    g.finish();
}

fn compile_and_replay(c: &mut Criterion) {
    let trace = load_bytes(&synthetic_trace(100_000), &LoadOptions::default()).unwrap();
    let mut g = c.benchmark_group("model");
    g.sample_size(10);
    g.bench_function("compile 10^5 events", |b| {
        b.iter(|| compile(black_box(&trace), &CompileOptions::default()).unwrap());
    });
    let program = compile(&trace, &CompileOptions::default()).unwrap().program;
    g.throughput(Throughput::Elements(100_000));
    g.bench_function("replay 10^5 occurrences", |b| {
        b.iter(|| replay(black_box(&program), &Settings::default()).unwrap());
    });
    g.finish();
}

criterion_group!(benches, json, stream, compile_and_replay);
criterion_main!(benches);
