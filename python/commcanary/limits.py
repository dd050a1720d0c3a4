"""The resource policy: every bound applied to untrusted input, one setting
for the whole process (``docs/resource-limits.md``).

Every reader of the package (traces, Kineto files, Flight Recorder dumps,
capture shards, canaries, reports, configuration and evidence files) takes
its bounds from this policy, in Rust and Python alike, before it expands or
allocates anything for an input. The command line sets it with its root
options (``commcanary --max-input-bytes N compile ...``); a program sets it
with :func:`set_limits` or, for a block, :func:`limits`::

    with commcanary.limits.limits(max_input_bytes=8 << 30):
        commcanary.compile("huge.trace.json.gz")

A refusal names the limit, its value and the flag that raises it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from commcanary import _core
from commcanary.errors import OptionError

__all__ = ["DEFAULTS", "NAMES", "current", "limits", "refusal", "set_limits"]

#: Every limit's default, by name, in documented order.
DEFAULTS: dict[str, int] = dict(_core.DEFAULT_RESOURCE_LIMITS)
#: Every limit's name, in documented order.
NAMES: tuple[str, ...] = tuple(DEFAULTS)
#: Limits whose largest value is below 2^64 - 1.
_LARGEST = {"max_json_depth": (1 << 32) - 1}


def current() -> dict[str, int]:
    """The policy in force, by name."""
    return dict(_core.resource_limits())


def refusal(name: str) -> str:
    """``exceeds NAME=VALUE (raise it with commcanary --NAME N)``: how a refusal
    under the policy in force ends, the same words as the core's."""
    flag = "--" + name.replace("_", "-")
    return f"exceeds {name}={current()[name]} (raise it with commcanary {flag} N)"


def set_limits(**values: int) -> dict[str, int]:
    """Set the named limits (each at least 1; the others keep their values)
    and return the previous policy. All or nothing: an unknown name or a bad
    value raises :class:`~commcanary.errors.OptionError` and changes nothing."""
    for name, value in values.items():
        if name not in NAMES:
            raise OptionError(name, f"is not a resource limit (one of {', '.join(NAMES)})")
        top = _LARGEST.get(name, (1 << 64) - 1)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise OptionError(name, f"must be an integer from 1 to {top}")
    return dict(_core.set_resource_limits(list(values.items())))


@contextmanager
def limits(**values: int) -> Iterator[dict[str, int]]:
    """Run a block under the named limits; the previous policy is restored
    after it, however it ends."""
    previous = set_limits(**values)
    try:
        yield current()
    finally:
        _core.set_resource_limits(list(previous.items()))
