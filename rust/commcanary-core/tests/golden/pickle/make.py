#!/usr/bin/env python3
"""Regenerates the golden pickles read by `src/import/pickle.rs` tests.

Standard library only. Run from anywhere:

    python3 rust/commcanary-core/tests/golden/pickle/make.py

Files written next to this script:

* ``fr_p{0,2,4,5}.pickle`` -- a Flight-Recorder-like dict (nested dicts,
  lists, tuples, None, True/False, big and negative ints, floats, unicode, a
  sub-list shared through the memo) at protocols 0, 2, 4 and 5;
* ``extras_p5.pickle`` -- bytes, bytearray, set, frozenset and a dict of more
  than 1000 items (batched SETITEMS) at protocol 5;
* ``recursive_p{0,2}.pickle`` -- a 4-tuple whose first item is a list that
  contains the tuple (protocol 0 pops the MARK with POP, protocol 2 uses
  POP_MARK);
* ``many_p2.pickle`` -- a list of 300 strings, its last string again and the
  list again (memo indices above 255: LONG_BINPUT and LONG_BINGET);
* ``system_p{0,4}.pickle`` -- an object whose ``__reduce__`` calls
  ``os.system("echo hi")`` (must be refused, never run).

Pickles are written with ``pickle.Pickler(..., protocol=p)`` and
``fix_imports`` left at its default; their bytes depend only on the Python
version's pickler, which is stable for these plain values.
"""

import os
import pickle
from pathlib import Path

HERE = Path(__file__).resolve().parent


def fr_like():
    shared = [[32768], [2, 32768]]
    frames = [
        {"name": "all_gather_single", "filename": "/opt/venv/torch/distributed_c10d.py", "line": 4387},
        {"name": "<module>", "filename": "<string>", "line": 1},
    ]
    entry = {
        "frames": frames,
        "record_id": 111,
        "pg_id": 1,
        "process_group": ("2", "tp_pair_1"),
        "collective_seq_id": 27,
        "profiling_name": "gloo:all_gather",
        "time_created_ns": 1796080643554207554,
        "input_sizes": shared,
        "output_sizes": shared,
        "state": "scheduled",
        "time_discovered_started_ns": None,
        "retired": False,
        "is_p2p": True,
        "duration_ms": 1.5,
        "neg": -123456789012,
        "small_neg": -7,
        "big": 2**70,
        "neg_big": -(2**70) - 1,
        "tiny": -2.5e-300,
        "huge": 1e308,
        "inf": float("inf"),
        "text": "caf\u00e9 \u2713 \u65e5\u672c \U0001f600 back\\slash \"q\" 'a'\n",
        "empty": "",
        "empty_tuple": (),
        "one_tuple": (1,),
        "three_tuple": (1, 2.0, "x"),
        "four_tuple": (1, 2, 3, 4),
    }
    return {
        "version": "2.10",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}},
        "pg_status": {"0": {"last_enqueued_collective": 27, "last_completed_collective": 26}},
        "entries": [entry, {"record_id": 112, "ints": list(range(1200))}],
    }


def extras():
    return {
        "bytes": b"\x00\xffab",
        "bytearray": bytearray(b"xy"),
        "set": {1, 2, 3},
        "frozenset": frozenset(["a"]),
        "many": {"k%d" % i: i for i in range(1100)},
    }


class System:
    def __reduce__(self):
        return (os.system, ("echo hi",))


def recursive():
    t = ([], 1, 2, 3)
    t[0].append(t)
    return t


def many():
    names = ["k%d" % i for i in range(300)]
    return [names, names[299], names]


def write(name, value, protocol):
    (HERE / name).write_bytes(pickle.dumps(value, protocol=protocol))


def main():
    for p in (0, 2, 4, 5):
        write("fr_p%d.pickle" % p, fr_like(), p)
    write("extras_p5.pickle", extras(), 5)
    for p in (0, 2):
        write("recursive_p%d.pickle" % p, recursive(), p)
    write("many_p2.pickle", many(), 2)
    for p in (0, 4):
        write("system_p%d.pickle" % p, System(), p)


if __name__ == "__main__":
    main()
