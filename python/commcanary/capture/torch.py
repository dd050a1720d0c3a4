"""Recording every ``torch.distributed`` collective of a process, unmodified.

:func:`install` wraps the public collective and point-to-point functions of
``torch.distributed`` (sync and async: an async call is recorded when its
work object completes, through the wrapped ``wait``). Each call becomes a
:func:`commcanary.capture.record_collective` with the group's global ranks
and name (``pg_name``, the same on every member), message bytes and dtype
from the tensors, root and peer ranks, the call's duration, and a
``collective_id`` every member derives alike: the group's name and the
call's position among that group's collectives in this process (the
backends pair collectives by that order too), or, for a transfer, its two
ends, tag and position among their transfers. ``barrier`` is a control op
and is not recorded. Phases come from the innermost
``torch.profiler.record_function`` range, when the program opens any.

With ``capture --evidence DIR``, the wrapped ``init_process_group`` also
arms :mod:`commcanary.capture.evidence` (the hang evidence: Flight Recorder
dumps, stacks, exception texts).

``commcanary capture`` enables this in every child by putting a
``sitecustomize`` on the children's ``PYTHONPATH`` that calls
:func:`install_when_imported`: nothing happens until the program itself
imports ``torch.distributed``, and nothing at all when torch is absent.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from commcanary.capture import current_phase, current_step, flight, live, record_collective

__all__ = ["install", "install_when_imported"]

_COLLECTIVES = {
    "all_reduce": ("all_reduce", 0, None),
    "all_gather_into_tensor": ("all_gather", 0, None),
    "all_gather": ("all_gather", 0, None),
    "reduce_scatter_tensor": ("reduce_scatter", 1, None),
    "reduce_scatter": ("reduce_scatter", 1, None),
    "all_to_all_single": ("all_to_all", 1, None),
    "broadcast": ("broadcast", 0, "src"),
    "reduce": ("reduce", 0, "dst"),
}
_P2P = {"send": ("send", "dst"), "isend": ("send", "dst"), "recv": ("recv", "src"), "irecv": ("recv", "src")}
_lock = threading.Lock()
_sequence: dict[tuple[Any, ...], itertools.count[int]] = {}


def _next(key: tuple[Any, ...]) -> int:
    with _lock:
        return next(_sequence.setdefault(key, itertools.count()))


def _tensor_bytes(value: Any) -> tuple[int, str]:
    if isinstance(value, list | tuple):
        sizes = [_tensor_bytes(v) for v in value]
        return sum(s[0] for s in sizes), sizes[0][1] if sizes else "float32"
    return int(value.numel() * value.element_size()), str(value.dtype).removeprefix("torch.")


def _element(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    tensor = args[0] if args else kwargs.get("tensor")
    return int(tensor.element_size()) if tensor is not None else 1


def _ensure_rank(dist: Any) -> None:
    """The recorder's rank label is the process's global rank."""
    import os

    if not os.environ.get("COMMCANARY_RANK"):
        os.environ["COMMCANARY_RANK"] = str(dist.get_rank())


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str) -> Any:
    return kwargs[name] if name in kwargs else (args[index] if len(args) > index else None)


def _group(dist: Any, group: Any) -> tuple[str, list[int]]:
    group = group if group is not None else dist.group.WORLD
    ranks = list(dist.get_process_group_ranks(group))
    name = getattr(group, "group_name", None) or "0"
    return str(name), ranks


class _RecordedWork:
    """A work object that records its collective when it is waited for (or,
    if the program never waits, when it is dropped, without a duration)."""

    def __init__(self, work: Any, record: Callable[[float | None], None], start: int) -> None:
        self._work = work
        self._record = record
        self._start = start
        self._done = False

    def _finish(self, duration: float | None) -> None:
        if not self._done:
            self._done = True
            self._record(duration)

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        out = self._work.wait(*args, **kwargs)
        self._finish((time.time_ns() - self._start) / 1000)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # never raise from a finaliser
            self._finish(None)


def _when_done(result: Any, record: Callable[[float | None], None], start: int, token: int) -> Any:
    """Records when the call is done: now (sync), or when its work is waited;
    the call leaves :mod:`commcanary.capture.live`'s open calls then."""

    def done(duration: float | None) -> None:
        live.leave(token)
        record(duration)

    if result is None or not hasattr(result, "wait"):
        done((time.time_ns() - start) / 1000)
        return result
    return _RecordedWork(result, done, start)


def _call(fn: Callable[..., Any], token: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Runs the wrapped function; a call that raises is no longer open."""
    try:
        return fn(*args, **kwargs)
    except BaseException:
        live.leave(token)
        raise


def _wrap_collective(
    dist: Any, fn: Callable[..., Any], op: str, tensor_at: int, root_name: str | None
) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.time_ns()
        _follow_record_function()
        name, ranks = _group(dist, kwargs.get("group"))
        _ensure_rank(dist)
        tensor = _arg(args, kwargs, tensor_at, "input" if tensor_at else "tensor")
        size, dtype = _tensor_bytes(args[0] if tensor is None else tensor)
        root = _arg(args, kwargs, 1, root_name) if root_name else None
        info = {
            "root_rank": root,
            "phase": current_phase() or "unknown",
            "step": current_step(),
            "bytes": max(size, 1),
            "dtype": dtype,
        }
        call = flight.annotate(name, op, start, info)
        token = live.enter(name, op)
        if call is not None:
            # The Flight Recorder reader records the entry this call creates,
            # with the annotation; the call adds its duration once done (an
            # async call, when waited).
            def annotate(duration: float | None) -> None:
                flight.close(call, duration)

            return _when_done(_call(fn, token, args, kwargs), annotate, start, token)
        collective_id = f"{name}:{_next((name,))}"
        result = _call(fn, token, args, kwargs)

        def record(duration: float | None) -> None:
            record_collective(
                op,
                ranks,
                bytes=max(size, 1),
                dtype=dtype,
                group=name,
                collective_id=collective_id,
                root_rank=root if root in ranks else None,
                duration_us=duration,
                called_at_ns=start,
            )

        return _when_done(result, record, start, token)

    return wrapper


def _wrap_p2p(dist: Any, fn: Callable[..., Any], op: str, peer_name: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.time_ns()
        name, _ = _group(dist, kwargs.get("group"))
        _ensure_rank(dist)
        me = dist.get_rank()
        peer_value = _arg(args, kwargs, 1, peer_name)
        if peer_value is None:  # a receive from any source: no pair to record
            return fn(*args, **kwargs)
        peer = int(peer_value)
        tag = int(kwargs.get("tag", args[3] if len(args) > 3 else 0) or 0)
        sender, receiver = (me, peer) if op == "send" else (peer, me)
        size, dtype = _tensor_bytes(args[0] if args else kwargs["tensor"])
        collective_id = f"p2p:{sender}>{receiver}:{tag}:{_next(('p2p', sender, receiver, tag))}"
        token = live.enter(name, op, peer)
        with contextlib.suppress(Exception):  # the pending transfer a signal's dump shows
            group = kwargs.get("group")
            mine, theirs = (
                (me, peer)
                if group is None
                else (dist.get_group_rank(group, me), dist.get_group_rank(group, peer))
            )
            position = int(collective_id.rsplit(":", 1)[1])
            live.transfer(
                token, name, mine, theirs, max(size // max(_element(args, kwargs), 1), 1), dtype, position
            )
        result = _call(fn, token, args, kwargs)

        def record(duration: float | None) -> None:
            record_collective(
                op,
                sorted({sender, receiver}),
                bytes=max(size, 1),
                dtype=dtype,
                group=name,
                collective_id=collective_id,
                sender_rank=sender,
                receiver_rank=receiver,
                duration_us=duration,
                called_at_ns=start,
            )

        return _when_done(result, record, start, token)

    return wrapper


def install() -> bool:
    """Wraps ``torch.distributed`` in this process (once); ``False`` when
    torch is not installed."""
    import importlib

    try:
        dist: Any = importlib.import_module("torch.distributed")
    except ImportError:
        return False
    if getattr(dist, "_commcanary_installed", False):
        return True
    for fn_name, (op, tensor_at, root) in _COLLECTIVES.items():
        if hasattr(dist, fn_name):
            setattr(dist, fn_name, _wrap_collective(dist, getattr(dist, fn_name), op, tensor_at, root))
    for fn_name, (op, peer) in _P2P.items():
        if hasattr(dist, fn_name):
            setattr(dist, fn_name, _wrap_p2p(dist, getattr(dist, fn_name), op, peer))
    # torch may still be importing itself here (torch.distributed is loaded
    # from inside torch's own __init__): phases are followed from the first
    # init_process_group (or collective) on, when torch is whole.
    init = dist.init_process_group

    @functools.wraps(init)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        _follow_record_function()
        _follow_profiler_steps()
        out = init(*args, **kwargs)
        with contextlib.suppress(Exception):  # never break the program being captured
            from commcanary.capture.evidence import start

            start(dist)
        with contextlib.suppress(Exception):
            flight.start(dist)
        with contextlib.suppress(Exception):
            live.start(dist)
        return out

    dist.init_process_group = init_process_group
    destroy = dist.destroy_process_group

    @functools.wraps(destroy)
    def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
        flight.flush()  # the ring's last entries, while the groups are still there
        return destroy(*args, **kwargs)

    dist.destroy_process_group = destroy_process_group
    dist._commcanary_installed = True
    return True


def _class_to_patch(module: str, name: str, flag: str) -> Any:
    """``module.name`` when it exists and is not patched yet (then marked
    with ``flag``), else ``None``."""
    import importlib

    try:
        loaded: Any = importlib.import_module(module)
    except ImportError:
        return None
    cls = getattr(loaded, name, None)
    if cls is None or getattr(cls, flag, False):
        return None
    setattr(cls, flag, True)
    return cls


def _follow_profiler_steps() -> None:
    """Steps: ``torch.profiler.profile``'s ``start()`` (step 0) and each
    ``step()`` mark the step the program's collectives belong to."""
    from commcanary.capture import step as mark

    cls = _class_to_patch("torch.profiler", "profile", "_commcanary_steps")
    if cls is None:
        return
    start, step = cls.start, cls.step

    def patched_start(self: Any) -> Any:
        out = start(self)
        with contextlib.suppress(Exception):
            mark(int(self.step_num))
        return out

    def patched_step(self: Any) -> Any:
        out = step(self)
        with contextlib.suppress(Exception):
            mark(int(self.step_num))
        return out

    cls.start, cls.step = patched_start, patched_step


def _follow_record_function() -> None:
    """Phases: ``torch.profiler.record_function`` ranges (innermost wins)."""
    from commcanary.capture import pop_phase, push_phase

    cls = _class_to_patch("torch.autograd.profiler", "record_function", "_commcanary_phases")
    if cls is None:
        return
    enter, leave = cls.__enter__, cls.__exit__

    def patched_enter(self: Any) -> Any:
        out = enter(self)
        push_phase(str(getattr(self, "name", "")) or "unknown")
        return out

    def patched_exit(self: Any, *exc: Any) -> Any:
        pop_phase()
        return leave(self, *exc)

    cls.__enter__, cls.__exit__ = patched_enter, patched_exit


def _patch_spawn(module: Any) -> None:
    """``torch.multiprocessing.spawn`` catches a worker's exception before
    ``sys.excepthook`` sees it: its ``_wrap`` gets the evidence's hook first.
    The replacement keeps ``_wrap``'s name so the parent's pickle of it
    resolves, in the child, to the child's (also replaced) one."""
    original = getattr(module, "_wrap", None)
    if original is None or getattr(original, "_commcanary", False):
        return

    def _wrap(fn: Any, i: int, args: Any, error_file: str) -> Any:
        return original(functools.partial(_reporting, fn), i, args, error_file)

    _wrap.__qualname__ = _wrap.__name__ = "_wrap"
    _wrap.__module__ = module.__name__
    _wrap._commcanary = True  # type: ignore[attr-defined]
    module._wrap = _wrap


def _reporting(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:
        from commcanary.capture.evidence import record_uncaught

        record_uncaught(*sys.exc_info())
        live.record_uncaught(*sys.exc_info())
        raise


def _install_on(_module: Any) -> None:
    install()


#: What to do once a module has loaded.
_WHEN_LOADED: dict[str, Callable[[Any], None]] = {
    "torch.distributed": _install_on,
    "torch.multiprocessing.spawn": _patch_spawn,
}


def install_when_imported() -> None:
    """Installs as soon as the program imports ``torch.distributed`` (now, if
    it already has), and readies ``torch.multiprocessing.spawn`` for the
    evidence; does nothing when torch is absent."""
    import importlib.util

    pending = {}
    for name, action in _WHEN_LOADED.items():
        if name in sys.modules:
            action(sys.modules[name])
        else:
            pending[name] = action
    if not pending or importlib.util.find_spec("torch") is None:
        return

    class _Hook:
        """A meta-path finder that acts on the modules above after they load."""

        @staticmethod
        def find_spec(name: str, path: Any = None, target: Any = None) -> Any:
            action = pending.pop(name, None)
            if action is None:
                return None
            if not pending:
                sys.meta_path.remove(_Hook)  # type: ignore[arg-type,unused-ignore]
            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None:
                return spec
            loader = spec.loader
            exec_module = loader.exec_module

            def patched(module: Any) -> None:
                exec_module(module)
                action(module)

            loader.exec_module = patched  # type: ignore[method-assign]
            return spec

    sys.meta_path.insert(0, _Hook)  # type: ignore[arg-type,unused-ignore]
