//! The NCCL profiler import on the committed job (`tests/data/nccl_profiler`,
//! written by the real plugin), on damaged copies of it, and the join on
//! hand-made records.

use std::path::{Path, PathBuf};

use commcanary_nccl_log::Record;
use commcanary_nccl_log::event::{kind, state};
use commcanary_nccl_log::frame::Comm;
use commcanary_nccl_log::record::{call, flag, slot};

use super::*;
use crate::import::kineto::job::JobOptions;

fn job4() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/nccl_profiler/job4")
}

fn options() -> JobOptions {
    JobOptions::requested("t".into(), None, None, 1, Vec::new(), false).unwrap()
}

fn copy_of(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "commcanary-nccl-import-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(job4()).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
    }
    dir
}

#[test]
fn the_plugins_job_imports_one_event_per_instance() {
    let job = import_dir(&job4(), &options()).unwrap();
    let c = &job.import.counts;
    assert_eq!((c.ranks, c.imported, c.partial), (4, 42, 0));
    assert_eq!(
        job.processes.iter().map(|p| p.rank).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    for p in &job.processes {
        assert_eq!((p.dropped, p.torn, p.orphans, p.abi), (0, 0, 0, 6));
        let world = p.comms.iter().find(|(g, _)| g == "default_pg:0").unwrap().1;
        assert_eq!(
            (world.enqueued, world.last_enqueued, world.last_completed),
            (6, 5, 5)
        );
    }
    let trace = &job.import.trace;
    let ops: Vec<String> = (0..trace.events.len())
        .map(|i| {
            let sig = &trace.signatures[trace.events.signature[i] as usize];
            format!(
                "{}@{}",
                String::from_utf8_lossy(&sig.op),
                String::from_utf8_lossy(&sig.group)
            )
        })
        .collect();
    let count = |s: &str| ops.iter().filter(|o| *o == s).count();
    assert_eq!(count("all_reduce@default_pg:0"), 6);
    assert_eq!(
        count("all_gather@dp:pair0") + count("all_gather@dp:pair1"),
        12
    );
    assert_eq!(count("point_to_point@default_pg:0"), 24);
}

#[test]
fn a_cut_tail_is_counted_and_damage_before_it_names_the_file() {
    let dir = copy_of("cut");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let bytes = std::fs::read(&files[1]).unwrap();
    std::fs::write(&files[1], &bytes[..bytes.len() - 30]).unwrap();
    let job = import_dir(&dir, &options()).unwrap();
    assert!(job.processes.iter().any(|p| p.torn > 0));
    let mut broken = bytes.clone();
    broken[40] ^= 0xff;
    std::fs::write(&files[1], &broken).unwrap();
    let err = import_dir(&dir, &options()).unwrap_err().to_string();
    assert!(
        err.contains(files[1].file_name().unwrap().to_str().unwrap()),
        "{err}"
    );
    let empty = copy_of("empty");
    for f in std::fs::read_dir(&empty).unwrap() {
        std::fs::remove_file(f.unwrap().path()).unwrap();
    }
    assert!(
        import_dir(&empty, &options())
            .unwrap_err()
            .to_string()
            .contains("no NCCL profiler logs")
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&empty);
}

#[test]
fn a_missing_rank_leaves_partial_collectives_and_strict_refuses_them() {
    let dir = copy_of("missing");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    // The world communicator still names its four ranks; the pair whose member
    // is gone cannot say who it was.
    let gone = files.iter().find(|f| {
        let logs = logs::read_dir(&dir).unwrap();
        logs.iter()
            .any(|l| l.header.world_rank == 3 && l.files.contains(f))
    });
    std::fs::remove_file(gone.unwrap()).unwrap();
    let err = import_dir(&dir, &options()).unwrap_err().to_string();
    assert!(
        err.contains("dp:pair1") && err.contains("world ranks are unknown"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn start(id: u64, k: u8, parent: u64, ts: u64) -> Record {
    Record {
        call: call::START,
        kind: k,
        id,
        parent,
        ts_ns: ts,
        ..Record::default()
    }
}

#[test]
fn completion_is_the_last_child_stop_and_gpu_time_the_channels_span() {
    let mut coll = start(1, kind::COLL, 0, 1_000);
    coll.payload[slot::COLL_SEQ] = 7;
    coll.payload[slot::COLL_COUNT] = 10;
    let mut ch = start(2, kind::KERNEL_CH, 1, 1_500);
    ch.payload[slot::KERNEL_CH_TIMER] = 50_000;
    let mut ch_stop = Record {
        call: call::STATE,
        state: state::KERNEL_CH_STOP,
        flags: flag::HAS_ARGS,
        id: 2,
        ts_ns: 2_000,
        ..Record::default()
    };
    ch_stop.payload[slot::STATE_ARG] = 80_000;
    let mut open = start(3, kind::COLL, 0, 5_000);
    open.payload[slot::COLL_SEQ] = 8;
    let open_ch = start(4, kind::KERNEL_CH, 3, 5_500);
    let log = ProcessLog {
        comms: vec![Comm {
            nranks: 2,
            ..Comm::default()
        }],
        records: vec![
            Record {
                call: call::STOP,
                id: 2,
                ts_ns: 9_000,
                ..Record::default()
            },
            ch_stop,
            ch,
            coll,
            Record {
                call: call::STOP,
                id: 1,
                ts_ns: 1_200,
                ..Record::default()
            },
            open,
            open_ch,
            Record {
                call: call::STOP,
                id: 99,
                ts_ns: 1,
                ..Record::default()
            },
        ],
        ..ProcessLog::default()
    };
    let joined = ops::join(&log);
    assert_eq!(joined.ops.len(), 2);
    let done = &joined.ops[0];
    assert!(done.completed());
    assert_eq!(
        (done.end_ns(), done.gpu_span),
        (9_000, Some((50_000, 80_000)))
    );
    assert!(!joined.ops[1].completed());
    assert_eq!(joined.orphans, 1);
    let p = joined.progress[0];
    assert_eq!(
        (p.enqueued, p.last_enqueued, p.last_completed, p.observed),
        (2, 8, 7, 2)
    );
}
