//! Constructed texts: py-spy, tracebacks, chained exceptions, NCCL
//! watchdog messages, hostile bytes and file names.

use super::*;

const C10D: &str = "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py";

#[test]
fn pyspy_dump_threads_and_in_flight_call() {
    let text = format!(
        "Process 4242: python train.py\n\
         Python v3.10.12 (/usr/bin/python3.10)\n\
         \n\
         Thread 4242 (idle): \"MainThread\"\n    \
             barrier ({C10D}:4150)\n    \
             wrapper (/usr/lib/python3/dist-packages/torch/distributed/c10d_logger.py:83)\n    \
             sync (/home/me/train.py:40)\n    \
             <module> (/home/me/train.py:99)\n\
         Thread 4300 (active+gil): \"pt_elastic\"\n    \
             do_futex_wait (libpthread-2.31.so)\n    \
             wait (/usr/lib/python3.10/threading.py:324)\n    \
             run (/usr/lib/python3.10/threading.py:953)\n\
         Thread 4301 (idle)\n    \
             _bootstrap (/usr/lib/python3.10/threading.py:973)\n"
    );
    let dump = parse_stacks(text.as_bytes()).expect("py-spy");
    assert_eq!(dump.threads.len(), 3);
    let main = &dump.threads[0];
    assert_eq!(main.id, "4242");
    assert_eq!(main.name.as_deref(), Some("MainThread"));
    assert!(!main.current);
    assert_eq!(main.frames.len(), 4);
    assert_eq!(main.frames[0].func, "barrier");
    assert_eq!(main.frames[0].line, 4150);
    assert_eq!(dump.threads[1].name.as_deref(), Some("pt_elastic"));
    assert_eq!(dump.threads[1].frames.len(), 2, "native frames are skipped");
    assert_eq!(dump.threads[2].name, None);
    let calls = in_flight_calls(&dump);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].thread, "4242");
    assert_eq!(
        (calls[0].call.as_str(), calls[0].op),
        ("barrier", Some("barrier"))
    );
    let user = calls[0].user_frame.as_ref().expect("user frame");
    assert_eq!(
        (user.file.as_str(), user.line, user.func.as_str()),
        ("/home/me/train.py", 40, "sync")
    );
}

#[test]
fn single_thread_faulthandler_stack() {
    let text = "Stack (most recent call first):\n  \
                File \"/x/torch/distributed/distributed_c10d.py\", line 10 in broadcast\n  \
                File \"/x/app.py\", line ??? in main\n";
    let dump = parse_stacks(text.as_bytes()).expect("stack");
    let t = &dump.threads[0];
    assert_eq!((t.id.as_str(), t.current), ("stack", true));
    assert_eq!(t.frames[1].line, 0);
    let call = &in_flight_calls(&dump)[0];
    assert_eq!(call.op, Some("broadcast"));
    assert_eq!(
        call.user_frame.as_ref().map(|f| f.func.as_str()),
        Some("main")
    );
}

#[test]
fn traceback_only_text() {
    let text = format!(
        "Traceback (most recent call last):\n  \
           File \"/home/me/train.py\", line 12, in <module>\n    \
             main()\n    \
             ^^^^^^\n  \
           File \"/home/me/train.py\", line 8, in main\n    \
             dist.reduce_scatter_tensor(out, inp)\n  \
           File \"{C10D}\", line 4500, in reduce_scatter_tensor\n    \
             work.wait()\n\
         torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited\n"
    );
    let e = parse_exception(text.as_bytes()).expect("exception");
    assert_eq!(e.type_name, "torch.distributed.DistBackendError");
    assert!(e.message.starts_with("NCCL error in:"));
    let funcs: Vec<&str> = e.frames.iter().map(|f| f.func.as_str()).collect();
    assert_eq!(funcs, ["reduce_scatter_tensor", "main", "<module>"]);
    assert_eq!(e.timeout, None);
    let dump = parse_stacks(text.as_bytes()).expect("traceback stack");
    assert_eq!(dump.threads[0].frames, e.frames);
    let call = &in_flight_calls(&dump)[0];
    assert_eq!(
        (call.api.as_str(), call.op),
        ("reduce_scatter_tensor", Some("reduce_scatter"))
    );
    assert_eq!(call.user_frame.as_ref().map(|f| f.line), Some(8));
}

#[test]
fn chained_exceptions_keep_the_last() {
    let text = "Traceback (most recent call last):\n  \
                  File \"/a.py\", line 1, in inner\n\
                RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:4242\n\
                \n\
                The above exception was the direct cause of the following exception:\n\
                \n\
                Traceback (most recent call last):\n  \
                  File \"/a.py\", line 9, in outer\n  \
                  File \"/a.py\", line 5, in middle\n\
                mypkg.StepFailed: step 12 failed\n";
    let e = parse_exception(text.as_bytes()).expect("exception");
    assert_eq!(e.type_name, "mypkg.StepFailed");
    assert_eq!(e.message, "step 12 failed");
    assert_eq!(e.frames[0].func, "middle");
    assert_eq!(e.frames.len(), 2);
    assert!(!e.peer_lost(), "the main message names no lost peer");
    assert_eq!(e.timeout, None);

    let during = "Traceback (most recent call last):\n  \
                  File \"/a.py\", line 1, in inner\n\
                  RuntimeError: [unbound_buffer.cc:78] Timed out waiting 1800000ms for recv operation to complete\n\
                  \n\
                  During handling of the above exception, another exception occurred:\n\
                  \n\
                  Traceback (most recent call last):\n  \
                  File \"/a.py\", line 3, in handler\n\
                  KeyboardInterrupt\n";
    let e = parse_exception(during.as_bytes()).expect("exception");
    assert_eq!(
        (e.type_name.as_str(), e.message.as_str()),
        ("KeyboardInterrupt", "")
    );
    let t = e.timeout.expect("the cause's timeout is kept");
    assert_eq!(
        (t.backend, t.timeout_ms, t.detail.as_str()),
        ("gloo", Some(1_800_000), "recv")
    );
    let dump = parse_stacks(during.as_bytes()).expect("stack");
    assert_eq!(dump.threads[0].frames[0].func, "handler");
}

#[test]
fn gloo_peer_lost_is_not_a_timeout() {
    for text in [
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [172.17.0.2]:13041",
        "builtins.RuntimeError: [pair.cc:598] Connection reset by peer",
    ] {
        let e = parse_exception(text.as_bytes()).expect("exception");
        assert_eq!(e.type_name, "RuntimeError");
        assert!(e.peer_lost(), "{text}");
        assert_eq!(e.timeout, None);
        assert!(e.frames.is_empty());
    }
}

const WATCHDOG: &str = "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=86, \
                        OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) \
                        ran for 600012 milliseconds before timing out.";

#[test]
fn nccl_watchdog_with_pg_prefix() {
    let text = format!(
        "torch.distributed.DistBackendError: [PG ID 0 PG GUID 0(default_pg) Rank 3] {WATCHDOG}\n\
         Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:635 (most recent call first):\n\
         frame #0: c10::Error::Error() + 0x98 (0x7f in /x/libc10.so)\n"
    );
    let e = parse_exception(text.as_bytes()).expect("exception");
    assert_eq!(e.type_name, "torch.distributed.DistBackendError");
    let t = e.timeout.expect("timeout");
    assert_eq!(t.backend, "nccl");
    assert_eq!(t.detail, "watchdog");
    assert_eq!(t.seq, Some(86));
    assert_eq!(t.op.as_deref(), Some("all_reduce"));
    assert_eq!((t.numel_in, t.numel_out), (Some(262_144), Some(262_144)));
    assert_eq!(t.timeout_ms, Some(600_000));
    assert_eq!(t.pg.as_deref(), Some("0(default_pg)"));
}

#[test]
fn nccl_watchdog_with_rank_prefix_and_op_types() {
    let e = parse_exception(format!("[rank3]: RuntimeError: [Rank 3] {WATCHDOG}").as_bytes())
        .expect("exception");
    let t = e.timeout.expect("timeout");
    assert_eq!((t.backend, t.seq, t.pg), ("nccl", Some(86), None));
    let cases = [
        ("ALLGATHER", "all_gather"),
        ("_ALLGATHER_BASE", "all_gather"),
        ("REDUCE_SCATTER", "reduce_scatter"),
        ("_REDUCE_SCATTER_BASE", "reduce_scatter"),
        ("BROADCAST", "broadcast"),
        ("REDUCE", "reduce"),
        ("ALLTOALL", "all_to_all"),
        ("ALLTOALL_BASE", "all_to_all"),
        ("BARRIER", "barrier"),
        ("SEND", "send"),
        ("RECV", "recv"),
        ("COALESCED", "coalesced"),
        ("GATHER", "gather"),
        ("ALLREDUCE_COALESCED", "allreduce_coalesced"),
    ];
    for (op_type, op) in cases {
        let text = format!(
            "RuntimeError: [Rank 0] Watchdog caught collective operation timeout: \
             WorkNCCL(SeqNum=7, OpType={op_type}, Timeout(ms)=1000) ran for 1001 milliseconds before timing out."
        );
        let t = parse_exception(text.as_bytes())
            .and_then(|e| e.timeout)
            .expect("timeout");
        assert_eq!(t.op.as_deref(), Some(op), "{op_type}");
        assert_eq!(
            (t.seq, t.timeout_ms, t.numel_in),
            (Some(7), Some(1000), None)
        );
    }
}

#[test]
fn generic_timeouts() {
    let e =
        parse_exception(b"torch.distributed.DistStoreError: Socket Timeout").expect("exception");
    let t = e.timeout.expect("timeout");
    assert_eq!((t.backend, t.timeout_ms), ("unknown", None));
    assert_eq!(t.detail, "Socket Timeout");
    let e = parse_exception(b"RuntimeError: Wait timeout after 30000ms").expect("exception");
    assert_eq!(e.timeout.and_then(|t| t.timeout_ms), Some(30_000));
    let e = parse_exception(b"TimeoutError: ").expect("exception");
    assert!(e.timeout.is_some());
    let e = parse_exception(b"ValueError: bad shape").expect("exception");
    assert_eq!(e.timeout, None);
}

#[test]
fn hostile_and_empty_inputs() {
    assert_eq!(parse_stacks(b""), None);
    assert_eq!(parse_exception(b""), None);
    let no_stacks = b"INFO: starting step 3\nNote: nothing here\nFatal Python error: Aborted\n\
                      Current thread 0x00007f (most recent call first):\n  <no Python frame>\n";
    assert_eq!(parse_stacks(no_stacks), None);
    assert_eq!(parse_exception(no_stacks), None);

    let mut bytes = b"Thread 0x00007f95a2dd2b80 (most recent call first):\n  File \"/x/torch/distributed/\xff\xfe.py\", line 3 in all_reduce\n".to_vec();
    bytes.extend_from_slice(b"  File \"/y/\xc3(.py\", line 4 in go\xe2\x82\n");
    let dump = parse_stacks(&bytes).expect("lossy");
    let frames = &dump.threads[0].frames;
    assert_eq!(frames.len(), 2);
    assert!(frames[0].file.contains('\u{fffd}'));
    assert_eq!(in_flight_calls(&dump)[0].call, "all_reduce");
    let e = parse_exception(b"RuntimeError: caf\xe9 \xff timed out").expect("lossy exception");
    assert!(e.message.contains('\u{fffd}'));
    assert!(e.timeout.is_some());
}

#[test]
fn oversized_lines_are_ignored() {
    let long = format!(
        "  File \"/{}.py\", line 1 in all_reduce\n",
        "a".repeat(MAX_LINE_BYTES)
    );
    let text = format!("Stack (most recent call first):\n{long}  File \"/b.py\", line 2 in f\n");
    let dump = parse_stacks(text.as_bytes()).expect("stack");
    assert_eq!(dump.threads[0].frames.len(), 1);
    assert_eq!(dump.threads[0].frames[0].file, "/b.py");
}

#[test]
fn user_function_named_like_an_api_is_not_the_api() {
    let text = format!(
        "Thread 0x1 (most recent call first):\n  \
           File \"{C10D}\", line 2 in all_reduce\n  \
           File \"/x/torch/distributed/c10d_logger.py\", line 83 in wrapper\n  \
           File \"/home/me/comm.py\", line 5 in all_gather\n  \
           File \"/home/me/train.py\", line 9 in step\n\
         \n\
         Thread 0x2 (most recent call first):\n  \
           File \"/usr/lib64/python3.12/threading.py\", line 320 in wait\n  \
           File \"/home/me/mytorch/distributed/watch.py\", line 7 in loop\n"
    );
    let dump = parse_stacks(text.as_bytes()).expect("stacks");
    let calls = in_flight_calls(&dump);
    assert_eq!(
        calls.len(),
        1,
        "mytorch/distributed is not torch/distributed"
    );
    assert_eq!(
        (calls[0].api.as_str(), calls[0].op),
        ("all_reduce", Some("all_reduce"))
    );
    assert_eq!(
        calls[0].user_frame.as_ref().map(|f| f.func.as_str()),
        Some("all_gather")
    );
}

#[test]
fn op_of_api_names() {
    let cases = [
        ("all_reduce", Some("all_reduce")),
        ("all_gather_into_tensor", Some("all_gather")),
        ("_all_gather_base", Some("all_gather")),
        ("all_gather", Some("all_gather")),
        ("reduce_scatter_tensor", Some("reduce_scatter")),
        ("reduce_scatter", Some("reduce_scatter")),
        ("broadcast", Some("broadcast")),
        ("reduce", Some("reduce")),
        ("all_to_all_single", Some("all_to_all")),
        ("all_to_all", Some("all_to_allv")),
        ("barrier", Some("barrier")),
        ("monitored_barrier", Some("barrier")),
        ("isend", Some("send")),
        ("irecv", Some("recv")),
        ("batch_isend_irecv", Some("coalesced")),
        ("gather", Some("gather")),
        ("scatter", Some("scatter")),
        ("wait", Some("wait")),
        ("new_group", None),
    ];
    for (api, op) in cases {
        assert_eq!(op_of_api(api), op, "{api}");
    }
}

#[test]
fn rank_from_file_names() {
    let cases = [
        ("rank3_stacks.txt", Some(3)),
        ("rank_3.txt", Some(3)),
        ("rank-3", Some(3)),
        ("rank.12.json", Some(12)),
        ("fr_trace_rank_3", Some(3)),
        ("/runs/a1/RANK7_exception.txt", Some(7)),
        ("dir\\rank_2.pkl", Some(2)),
        ("rank0.window3.json", Some(0)),
        ("stacks_5.txt", Some(5)),
        ("trace-11.pickle", Some(11)),
        ("stacks-4", Some(4)),
        ("fr_trace_2.json.gz", Some(2)),
        ("rank_1_of_rank_1.txt", Some(1)),
        ("stacks.3.txt", None),
        ("stacks3.txt", None),
        ("job7_stacks_3.txt", None),
        ("rank1_rank2.txt", None),
        ("ranks_0-3.txt", None),
        ("frank3.txt", None),
        ("rank3a.txt", None),
        ("stacks_3.log", None),
        ("_3.txt", None),
        ("stacks.txt", None),
        ("rank_99999999999999999999.txt", None),
        ("", None),
    ];
    for (name, rank) in cases {
        assert_eq!(rank_from_file_name(name), rank, "{name}");
    }
}

#[test]
fn windows_paths_are_read_with_forward_slashes() {
    let text = "Current thread 0x0000a (most recent call first):\n  \
                File \"C:\\venv\\Lib\\site-packages\\torch\\distributed\\distributed_c10d.py\", line 7 in send\n  \
                File \"C:\\venv\\Lib\\site-packages\\accelerate\\utils.py\", line 3 in helper\n  \
                File \"C:\\work\\pp.py\", line 21 in stage\n";
    let dump = parse_stacks(text.as_bytes()).expect("stack");
    let call = &in_flight_calls(&dump)[0];
    assert_eq!((call.call.as_str(), call.op), ("send", Some("send")));
    assert_eq!(call.user_frame.as_ref().map(|f| f.line), Some(21));
}

#[test]
fn the_capture_wrappers_are_not_the_user_frame() {
    let text = format!(
        "Thread 0x00007f95a2dd2b80 (most recent call first):\n  \
         File \"{C10D}\", line 3697 in recv\n  \
         File \"/home/u/src/commcanary/python/commcanary/capture/torch.py\", line 132 in _call\n  \
         File \"/home/u/src/commcanary/python/commcanary/capture/torch.py\", line 215 in wrapper\n  \
         File \"/home/u/job/train.py\", line 88 in step\n"
    );
    let dump = parse_stacks(text.as_bytes()).expect("stacks");
    let call = &in_flight_calls(&dump)[0];
    assert_eq!(call.op, Some("recv"));
    let user = call.user_frame.as_ref().expect("user frame");
    assert_eq!(
        (user.file.as_str(), user.line),
        ("/home/u/job/train.py", 88)
    );
}
