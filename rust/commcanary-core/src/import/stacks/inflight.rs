//! The `torch.distributed` call each thread of a dump is blocked in.
//!
//! Reading a thread's frames innermost first:
//! * the **call** is the innermost frame whose file is under
//!   `torch/distributed/` (not a `wrapper` frame, unless there is nothing
//!   else);
//! * the **chain** is that frame and the consecutive frames above it that are
//!   under `torch/distributed/` or are decorator frames named `wrapper`
//!   (`c10d_logger.py`, `typing_extensions.py`);
//! * the **api** is the outermost frame of the chain that is a known c10d
//!   API ([`op_of_api`]), else the call itself (so an FSDP or elastic frame
//!   further out is never taken for the API);
//! * the **user frame** is the first frame above the chain that is outside
//!   `torch/`, `site-packages/`, `dist-packages/`, `lib/pythonX` (`lib64/pythonX`) and
//!   `commcanary/capture/` (the capture's wrappers, wherever commcanary is
//!   installed) and is not a pseudo-file such as `<string>`.
//!
//! Threads with no `torch/distributed/` frame (watchdogs, idle workers) have
//! no in-flight call. Paths are compared with `\` read as `/`.

use std::borrow::Cow;

use super::{Frame, StackDump, ThreadStack};

/// The collective a thread is blocked in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlightCall {
    /// The thread's [`ThreadStack::id`].
    pub thread: String,
    /// The innermost `torch.distributed` function (`all_reduce`,
    /// `all_gather_single`).
    pub call: String,
    /// The outermost public c10d function of the chain
    /// (`all_gather_into_tensor`); the call when no frame of the chain is a
    /// known API.
    pub api: String,
    /// The canonical collective of `api` ([`op_of_api`]).
    pub op: Option<&'static str>,
    /// The user's frame that made the call, if the stack shows it.
    pub user_frame: Option<Frame>,
}

/// One call per thread blocked in `torch.distributed`, in thread order.
#[must_use]
pub fn in_flight_calls(dump: &StackDump) -> Vec<InFlightCall> {
    dump.threads.iter().filter_map(in_flight_call).collect()
}

/// The call `thread` is blocked in, if any.
fn in_flight_call(thread: &ThreadStack) -> Option<InFlightCall> {
    let frames = &thread.frames;
    let inner = frames
        .iter()
        .position(|f| in_distributed(&f.file) && f.func != "wrapper")
        .or_else(|| frames.iter().position(|f| in_distributed(&f.file)))?;
    let end = inner
        + frames[inner..]
            .iter()
            .take_while(|f| in_distributed(&f.file) || f.func == "wrapper")
            .count();
    let api = frames[inner..end]
        .iter()
        .rev()
        .find(|f| in_distributed(&f.file) && op_of_api(&f.func).is_some())
        .unwrap_or(&frames[inner]);
    Some(InFlightCall {
        thread: thread.id.clone(),
        call: frames[inner].func.clone(),
        api: api.func.clone(),
        op: op_of_api(&api.func),
        user_frame: frames[end..]
            .iter()
            .find(|f| is_user_file(&f.file))
            .cloned(),
    })
}

/// The canonical collective of a c10d Python API function (or of a
/// functional collective), `None` for anything else.
///
/// `all_to_all_single` is `all_to_all` and the list form `all_to_all` is
/// `all_to_allv`; `batch_isend_irecv` is `coalesced` (NCCL's `OpType` for
/// it); `wait` / `wait_tensor` is `wait`.
#[must_use]
pub fn op_of_api(func: &str) -> Option<&'static str> {
    Some(match func {
        "all_reduce" | "all_reduce_coalesced" | "all_reduce_multigpu" => "all_reduce",
        "all_gather_into_tensor"
        | "_all_gather_base"
        | "all_gather"
        | "all_gather_single"
        | "all_gather_object"
        | "all_gather_coalesced"
        | "all_gather_into_tensor_coalesced"
        | "all_gather_tensor" => "all_gather",
        "reduce_scatter_tensor"
        | "_reduce_scatter_base"
        | "reduce_scatter"
        | "reduce_scatter_tensor_coalesced" => "reduce_scatter",
        "broadcast" | "broadcast_object_list" => "broadcast",
        "reduce" => "reduce",
        "all_to_all_single" => "all_to_all",
        "all_to_all" => "all_to_allv",
        "gather" | "gather_object" => "gather",
        "scatter" | "scatter_object_list" => "scatter",
        "barrier" | "monitored_barrier" => "barrier",
        "send" | "isend" | "send_object_list" => "send",
        "recv" | "irecv" | "recv_object_list" => "recv",
        "batch_isend_irecv" => "coalesced",
        "wait" | "wait_tensor" => "wait",
        _ => return None,
    })
}

/// Whether `file` is under `torch/distributed/`.
fn in_distributed(file: &str) -> bool {
    has_dir(&slashes(file), "torch/distributed/")
}

/// Whether `file` looks like the user's code.
fn is_user_file(file: &str) -> bool {
    if file.is_empty() || file.starts_with('<') {
        return false;
    }
    let file = slashes(file);
    let library = has_dir(&file, "torch/")
        || has_dir(&file, "commcanary/capture/")
        || file.contains("site-packages/")
        || file.contains("dist-packages/")
        || in_stdlib(&file);
    !library
}

/// `file` with each `\` read as `/`.
fn slashes(file: &str) -> Cow<'_, str> {
    if file.contains('\\') {
        Cow::Owned(file.replace('\\', "/"))
    } else {
        Cow::Borrowed(file)
    }
}

/// Whether `file` has the directory path `dir` (`a/b/`) starting at a path
/// component.
fn has_dir(file: &str, dir: &str) -> bool {
    file.match_indices(dir)
        .any(|(at, _)| at == 0 || file.as_bytes()[at - 1] == b'/')
}

/// Whether `file` is under a `lib/pythonX…/` (or `lib64/pythonX…/`)
/// directory.
fn in_stdlib(file: &str) -> bool {
    ["lib/python", "lib64/python"].iter().any(|dir| {
        file.match_indices(dir).any(|(at, m)| {
            file.as_bytes()
                .get(at + m.len())
                .is_some_and(u8::is_ascii_digit)
        })
    })
}
