//! The real evidence of `hang/gloo_tp4_rank3_skips_allreduce` (in the
//! repository's fixtures), and never-panic properties over it.

use super::*;

const HANG: &str = "hang/gloo_tp4_rank3_skips_allreduce";

fn fixture(name: &str) -> Option<Vec<u8>> {
    Some(crate::test_data::fixture_bytes(&format!("{HANG}/{name}")))
}

fn frame(file: &str, line: u32, func: &str) -> Frame {
    Frame {
        file: file.to_owned(),
        line,
        func: func.to_owned(),
    }
}

const WORKLOAD: &str = "/opt/workload/comm_workload.py";
const C10D: &str = "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py";

#[test]
fn fixture_stacks_have_two_threads_innermost_first() {
    for rank in 0..4 {
        let Some(bytes) = fixture(&format!("rank{rank}_stacks.txt")) else {
            return;
        };
        let dump = parse_stacks(&bytes).expect("stacks");
        assert_eq!(dump.threads.len(), 2, "rank {rank}");
        let (watchdog, main) = (&dump.threads[0], &dump.threads[1]);
        assert!(watchdog.current && !main.current);
        assert!(watchdog.id.starts_with("0x") && main.id.starts_with("0x"));
        assert_eq!(watchdog.frames[0], frame(WORKLOAD, 196, "watchdog"));
        assert_eq!(watchdog.frames.len(), 4);
        assert_eq!(main.frames.len(), if rank == 3 { 15 } else { 12 });
        assert_eq!(
            main.frames.last().unwrap(),
            &frame("<string>", 1, "<module>")
        );
    }
}

#[test]
fn fixture_in_flight_calls_match_the_ground_truth() {
    for rank in 0..4 {
        let Some(bytes) = fixture(&format!("rank{rank}_stacks.txt")) else {
            return;
        };
        let dump = parse_stacks(&bytes).expect("stacks");
        let calls = in_flight_calls(&dump);
        assert_eq!(
            calls.len(),
            1,
            "rank {rank}: the watchdog thread is skipped"
        );
        let call = &calls[0];
        assert_eq!(call.thread, dump.threads[1].id);
        if rank == 3 {
            assert_eq!(call.call, "all_gather_single");
            assert_eq!(call.api, "all_gather_into_tensor");
            assert_eq!(call.op, Some("all_gather"));
            assert_eq!(call.user_frame, Some(frame(WORKLOAD, 275, "<lambda>")));
        } else {
            assert_eq!(call.call, "all_reduce");
            assert_eq!(call.api, "all_reduce");
            assert_eq!(call.op, Some("all_reduce"));
            assert_eq!(call.user_frame, Some(frame(WORKLOAD, 267, "<lambda>")));
        }
    }
}

#[test]
fn fixture_exceptions_are_gloo_timeouts() {
    for rank in 0..4 {
        let Some(bytes) = fixture(&format!("rank{rank}_exception.txt")) else {
            return;
        };
        let e = parse_exception(&bytes).expect("exception");
        assert_eq!(e.type_name, "RuntimeError");
        assert!(
            e.message.ends_with("operation to complete"),
            "{}",
            e.message
        );
        assert!(!e.peer_lost());
        let t = e.timeout.expect("timeout");
        assert_eq!(t.backend, "gloo");
        assert_eq!(t.timeout_ms, Some(10_000));
        let expected = if rank == 0 || rank == 3 {
            "send"
        } else {
            "recv"
        };
        assert_eq!(t.detail, expected, "rank {rank}");
        assert_eq!(
            (t.seq, t.op.as_deref(), t.pg.as_deref()),
            (None, None, None)
        );
        let innermost = if rank == 3 {
            frame(C10D, 4394, "all_gather_single")
        } else {
            frame(C10D, 3252, "all_reduce")
        };
        assert_eq!(e.frames[0], innermost);
        assert_eq!(e.frames.last().unwrap(), &frame(WORKLOAD, 334, "worker"));
        assert_eq!(e.frames.len(), if rank == 3 { 9 } else { 6 });
    }
}

#[test]
fn fixture_exception_as_stacks_is_its_traceback() {
    let Some(bytes) = fixture("rank3_exception.txt") else {
        return;
    };
    let dump = parse_stacks(&bytes).expect("traceback stack");
    assert_eq!(dump.threads.len(), 1);
    assert_eq!(dump.threads[0].id, "traceback");
    let calls = in_flight_calls(&dump);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].api, "all_gather_into_tensor");
    assert_eq!(calls[0].user_frame, Some(frame(WORKLOAD, 275, "<lambda>")));
}

#[test]
fn fixture_file_names_give_their_ranks() {
    for rank in 0..4 {
        for name in [
            format!("{HANG}/rank{rank}_stacks.txt"),
            format!("{HANG}/rank{rank}_exception.txt"),
            format!("{HANG}/rank{rank}.window2.json"),
            format!("{HANG}/fr_during_hang/fr_trace_rank_{rank}"),
            format!("{HANG}/fr_during_hang/fr_trace_rank_{rank}.json"),
        ] {
            assert_eq!(rank_from_file_name(&name), Some(rank), "{name}");
        }
    }
}

/// Every prefix of every fixture text parses without panicking, and a
/// prefix's stacks never have more frames than the whole file's.
#[test]
fn every_prefix_of_the_fixtures_parses() {
    for rank in 0..4 {
        for kind in ["stacks", "exception"] {
            let Some(bytes) = fixture(&format!("rank{rank}_{kind}.txt")) else {
                return;
            };
            let whole = frame_count(parse_stacks(&bytes).as_ref());
            for end in 0..=bytes.len() {
                let prefix = &bytes[..end];
                assert!(frame_count(parse_stacks(prefix).as_ref()) <= whole);
                if let Some(dump) = parse_stacks(prefix) {
                    let _ = in_flight_calls(&dump);
                }
                let _ = parse_exception(prefix);
                let _ = parse_exception(&bytes[end..]);
                let _ = parse_stacks(&bytes[end..]);
            }
        }
    }
}

/// Damaged copies (bytes replaced, CRLF line ends, NULs) never panic and
/// CRLF reads like LF.
#[test]
fn damaged_fixtures_never_panic() {
    let Some(bytes) = fixture("rank3_stacks.txt") else {
        return;
    };
    let crlf: Vec<u8> = String::from_utf8_lossy(&bytes)
        .replace('\n', "\r\n")
        .into_bytes();
    assert_eq!(parse_stacks(&crlf), parse_stacks(&bytes));
    for step in [1_usize, 3, 7, 13] {
        for junk in [0xff_u8, 0x00, b'"', b'(', b'\n', b' '] {
            let mut damaged = bytes.clone();
            for b in damaged.iter_mut().step_by(step) {
                *b = junk;
            }
            if let Some(dump) = parse_stacks(&damaged) {
                let _ = in_flight_calls(&dump);
            }
            let _ = parse_exception(&damaged);
        }
    }
}

fn frame_count(dump: Option<&StackDump>) -> usize {
    dump.map_or(0, |d| d.threads.iter().map(|t| t.frames.len()).sum())
}
