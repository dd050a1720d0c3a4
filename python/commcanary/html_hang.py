"""Self-contained HTML for the diagnosis of a hung distributed job (``commcanary.hang.v1``).

:func:`render_hang` turns a hang document into one page: no scripts, no network, inline CSS and
inline SVG, the strict Content-Security-Policy of :mod:`commcanary.html`, and every value taken
from the document HTML-escaped (text and attributes alike). The output is a pure function of the
document: the same document renders to the same bytes (lists are shown in the document's order
or sorted, never in hash order, and nothing reads the clock or the environment).

The page shows, in order: the verdict banner (red for a hang, green for no hang, amber when
inconclusive); cards; the ranks x groups grid (``table.grid``: rows ``row-root`` for root ranks,
cells ``cell-stuck``, ``cell-missing``, ``cell-ok``, ``cell-unknown`` or ``cell-none``); the
wait-for chain as an SVG (at most :data:`MAX_GRAPH_NODES` nodes, the roots and their neighbours
first) and as a plain list of every edge; the roots; partial collectives and mismatches;
per-rank details; conclusions and what they rest on; evidence files; notes. A section with
nothing to show (no root, no edges, no groups) says so in words.

Fields the document lacks or gives in an unexpected type are shown as missing ("n/a", "none")
rather than failing; only a document that is not a mapping of format ``commcanary.hang.v1`` is
refused, with :class:`commcanary.errors.InputError`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeGuard

from commcanary.errors import InputError
from commcanary.formats import HANG_FORMAT
from commcanary.views import Markup, render, stylesheet
from commcanary.views.palette import HANG_VERDICT_COLOURS, NODE_COLOURS

__all__ = ["HANG_FORMAT", "HANG_VERDICT_COLOURS", "MAX_GRAPH_NODES", "render_hang"]


VERDICT_TITLES = {"hang": "Hang", "no_hang": "No hang", "inconclusive": "Inconclusive"}

#: The most ranks the wait-for drawing shows; every edge is still listed in words.
MAX_GRAPH_NODES = 64
#: Edge labels are drawn on the SVG only up to this many edges (beyond, they crowd; see the list).
MAX_LABELLED_EDGES = 16
#: Ranks ``0..world_size-1`` are added to the grid only for a world up to this size.
MAX_IMPLIED_RANKS = 65536

ROOT_COLOUR = HANG_VERDICT_COLOURS["hang"]

#: A line break and a code span: the only markup a cell carries (its text escaped).
BR = Markup("<br>")
CODE = Markup('<span class="code">{}</span>')


# --- small helpers ----------------------------------------------------------------------------


def _t(value: Any, missing: str = "n/a") -> str:
    """A value as text: ``missing`` for None, yes/no for booleans."""
    if value is None:
        return missing
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _maps(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in _list(value) if isinstance(item, Mapping)]


def _is_rank(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _ranks(value: Any) -> list[int]:
    return [r for r in _list(value) if _is_rank(r)]


def _rank_ranges(value: Any) -> str:
    """Ranks as plain text with runs folded (``0-2, 5``); ``none`` for no ranks."""
    items = _list(value)
    if not items:
        return "none"
    if not all(_is_rank(r) for r in items):
        return ", ".join(str(r) for r in items)
    ordered = sorted(set(items))
    runs: list[list[int]] = [[ordered[0], ordered[0]]]
    for r in ordered[1:]:
        if r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _seq(entry: Mapping[str, Any]) -> str:
    """``#86`` for a collective, ``p2p #5`` for a point-to-point call, '' when unknown (plain)."""
    if entry.get("collective_seq_id") is not None:
        return f"#{entry['collective_seq_id']}"
    if entry.get("p2p_seq_id") is not None:
        return f"p2p #{entry['p2p_seq_id']}"
    return ""


def _call(entry: Mapping[str, Any], op: Any = None) -> str:
    """``all_reduce #86`` (plain): the entry's operation and sequence number, as far as known."""
    name = entry.get("op") if op is None else op
    return " ".join(part for part in (str(name) if name is not None else "", _seq(entry)) if part)


def _group_key(group: Any) -> str:
    g = _map(group)
    return str(g.get("name", g.get("desc", "")))


def _group_label(group: Any) -> str:
    g = _map(group)
    return str(g.get("desc") or g.get("name") or "unknown group")


def _root_ranks(doc: Mapping[str, Any]) -> list[int]:
    seen: list[int] = []
    for root in _maps(doc.get("root")):
        r = root.get("rank")
        if _is_rank(r) and r not in seen:
            seen.append(r)
    return seen


# --- hero and cards ---------------------------------------------------------------------------


def _hero(doc: Mapping[str, Any]) -> dict[str, str]:
    verdict = str(doc.get("verdict"))
    return {
        "classes": f"verdict-{verdict}" if verdict in HANG_VERDICT_COLOURS else "verdict-unknown",
        "title": VERDICT_TITLES.get(verdict, f"Verdict: {verdict}"),
        "summary": _t(doc.get("summary"), "no summary"),
        "confidence": _t(doc.get("confidence"), "unknown"),
    }


def _cards_row(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    roots = _root_ranks(doc)
    roots_text = _rank_ranges(roots)
    if len(roots_text) > 16:
        roots_text = f"{len(roots)} ranks"
    step = _map(doc.get("step")).get("value")
    return [
        ("World size", "n/a" if doc.get("world_size") is None else str(doc["world_size"])),
        ("Groups", str(len(_maps(doc.get("groups"))))),
        ("Partial collectives", str(len(_maps(doc.get("partial_collectives"))))),
        ("Mismatches", str(len(_maps(doc.get("mismatches"))))),
        ("Root rank" if len(roots) == 1 else "Root ranks", roots_text),
        ("Step", "unknown" if step is None else str(step)),
    ]


# --- the ranks x groups grid ------------------------------------------------------------------


@dataclass(frozen=True)
class _Marks:
    """What the partial collectives and mismatches say of (group, rank) pairs (plain texts)."""

    missing: dict[tuple[str, int], list[str]]
    stuck: dict[tuple[str, int], list[str]]

    def add(
        self, table: dict[tuple[str, int], list[str]], group: str, ranks: Iterable[int], text: str
    ) -> None:
        for r in ranks:
            texts = table.setdefault((group, r), [])
            if text not in texts:
                texts.append(text)


def _marks(doc: Mapping[str, Any]) -> _Marks:
    marks = _Marks({}, {})
    for p in _maps(doc.get("partial_collectives")):
        g = _group_key(p.get("group"))
        marks.add(marks.missing, g, _ranks(p.get("missing_ranks")), _seq(p))
        marks.add(marks.stuck, g, _ranks(p.get("present_ranks")), _call(p))
    for m in _maps(doc.get("mismatches")):
        g = _group_key(m.get("group"))
        call = _call(m, _map(m.get("expected")).get("op"))
        waiting = _ranks(m.get("majority_ranks")) + _ranks(m.get("minority_ranks"))
        marks.add(marks.stuck, g, waiting, f"{call} ({m.get('kind') or 'signature'} mismatch)")
    return marks


def _grid_ranks(doc: Mapping[str, Any]) -> list[int]:
    """Every rank the document names, and ``0..world_size-1`` for a world of a sane size."""
    found: set[int] = set(_ranks([r.get("rank") for r in _maps(doc.get("ranks"))]))
    for g in _maps(doc.get("groups")):
        found.update(_ranks(g.get("ranks")))
    found.update(_root_ranks(doc))
    world = doc.get("world_size")
    if _is_rank(world) and 0 < world <= MAX_IMPLIED_RANKS:
        found.update(range(world))
    return sorted(found)


def _in_flight_by_group(doc: Mapping[str, Any]) -> dict[tuple[str, int], str]:
    calls: dict[tuple[str, int], str] = {}
    for r in _maps(doc.get("ranks")):
        flight = _map(r.get("in_flight"))
        if flight and _is_rank(r.get("rank")):
            calls[(_group_key(flight.get("group")), r["rank"])] = _call(flight)
    return calls


class _Cell(NamedTuple):
    """A grid cell: its status class, mark, text and title (``None``: not a member)."""

    status: str
    mark: str
    text: str
    title: str


def _cell(status: str, mark: str, texts: list[str], title: str) -> _Cell:
    return _Cell(status, mark, " · ".join(t for t in texts if t), title)


def _grid_cell(key: tuple[str, int], marks: _Marks, flight: dict[tuple[str, int], str], state: str) -> _Cell:
    group, rank = key
    call = flight.get(key, "")
    where = f"rank {rank} on group {group}"
    if key in marks.missing:
        at = [f"at {call}"] if call else []
        return _cell("missing", "missing", [*marks.missing[key], *at], f"{where}: never reached the call")
    if key in marks.stuck:
        return _cell("stuck", "stuck", [call or marks.stuck[key][0]], f"{where}: waiting for other ranks")
    if state == "no_evidence":
        return _cell("unknown", "no evidence", [call], f"{where}: no evidence for this rank")
    return _cell("ok", "ok", [call], f"{where}: not waiting on this group")


class _GridRow(NamedTuple):
    rank: int
    root: bool
    state: str
    cells: list[_Cell | None]


class _Grid(NamedTuple):
    #: Per group: label, membership (a title), name, its ranks folded.
    groups: list[tuple[str, str, str, str]]
    rows: list[_GridRow]


def _grid(doc: Mapping[str, Any]) -> _Grid | None:
    groups = _maps(doc.get("groups"))
    if not groups:
        return None
    by_rank = {r["rank"]: r for r in _maps(doc.get("ranks")) if _is_rank(r.get("rank"))}
    members = {_group_key(g): set(_ranks(g.get("ranks"))) for g in groups}
    roots, marks, flight = _root_ranks(doc), _marks(doc), _in_flight_by_group(doc)
    rows = []
    for rank in _grid_ranks(doc):
        state = str(by_rank.get(rank, {}).get("state", "no_evidence"))
        cells: list[_Cell | None] = []
        for g in groups:
            key = (_group_key(g), rank)
            member = rank in members.get(key[0], set())
            cells.append(_grid_cell(key, marks, flight, state) if member else None)
        rows.append(_GridRow(rank, rank in roots, state.replace("_", " "), cells))
    header = [
        (_group_label(g), _t(g.get("membership"), ""), _t(g.get("name")), _rank_ranges(g.get("ranks")))
        for g in groups
    ]
    return _Grid(header, rows)


# --- the wait-for chain -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Edge:
    """One waiter -> waited-for pair, with the plain labels of every wait-for entry between them."""

    src: int
    dst: int
    labels: tuple[str, ...]


def _edges(doc: Mapping[str, Any]) -> list[_Edge]:
    """The wait-for pairs in document order, entries between the same pair merged."""
    merged: dict[tuple[int, int], list[str]] = {}
    for w in _maps(doc.get("wait_for")):
        src, dst = w.get("rank"), w.get("waits_for")
        if _is_rank(src) and _is_rank(dst):
            label = f"{_group_label(w.get('group'))} {_seq(w)}".strip()
            merged.setdefault((src, dst), []).append(label)
    return [_Edge(s, d, tuple(labels)) for (s, d), labels in merged.items()]


def _graph_nodes(roots: list[int], edges: list[_Edge]) -> tuple[list[int], int]:
    """The ranks to draw and how many of the chain's ranks are left out.

    Chosen breadth-first: the roots, then the ranks one edge from them, and so on, each ring in
    rank order (a part of the chain that reaches no root starts from its lowest rank). Drawn in
    that choice's order: roots first (at the top of the circle), then the others by rank.
    """
    adjacent: dict[int, set[int]] = {}
    for e in edges:
        adjacent.setdefault(e.src, set()).add(e.dst)
        adjacent.setdefault(e.dst, set()).add(e.src)
    order: list[int] = []
    seen: set[int] = set()
    ring = list(dict.fromkeys(roots)) or sorted(adjacent)[:1]
    starts = iter(sorted(adjacent))
    while ring:
        seen.update(ring)
        order.extend(ring)
        ring = sorted({n for r in ring for n in adjacent.get(r, ()) if n not in seen})
        if not ring:
            start = next((r for r in starts if r not in seen), None)
            ring = [] if start is None else [start]
    chosen = set(order[:MAX_GRAPH_NODES])
    drawn = [r for r in dict.fromkeys(roots) if r in chosen] + sorted(chosen - set(roots))
    return drawn, len(order) - len(drawn)


@dataclass(frozen=True)
class _Layout:
    """Ranks on a circle, the first at the top, clockwise."""

    nodes: list[int]
    radius: float
    node_r: float = 16.0
    margin_x: float = 70.0
    margin_y: float = 50.0

    @property
    def width(self) -> int:
        return math.ceil(2 * (self.radius + self.margin_x))

    @property
    def height(self) -> int:
        return math.ceil(2 * (self.radius + self.margin_y))

    def at(self, index: int) -> tuple[float, float]:
        cx, cy = self.width / 2, self.height / 2
        if len(self.nodes) == 1:
            return cx, cy
        angle = -math.pi / 2 + 2 * math.pi * index / len(self.nodes)
        return cx + self.radius * math.cos(angle), cy + self.radius * math.sin(angle)


class _EdgeDrawing(NamedTuple):
    src: int
    dst: int
    text: str
    x1: str
    y1: str
    x2: str
    y2: str
    #: The label beside it: x, y, anchor (``None`` when the drawing is unlabelled).
    label: tuple[str, str, str] | None


class _NodeDrawing(NamedTuple):
    rank: int
    root: bool
    state: str
    cx: str
    cy: str
    r: str
    fill: str
    label_y: str


class _Graph(NamedTuple):
    width: int
    height: int
    nodes: list[_NodeDrawing]
    edges: list[_EdgeDrawing]


def _edge_label(mid: tuple[float, float], normal: tuple[float, float]) -> tuple[str, str, str]:
    """Where an edge's label goes: beside its midpoint, on the side of ``normal`` (a unit vector), clear of the line."""
    nx, ny = normal
    x, y = mid[0] + nx * 8, mid[1] + ny * 8
    if abs(nx) >= 0.5:  # a steep edge: the label starts (or ends) beside it
        anchor, y = ("start" if nx > 0 else "end"), y + 4
    else:  # a flat edge: the label sits above or below it
        anchor, y = "middle", y + (12 if ny > 0 else -3)
    return f"{x:.1f}", f"{y:.1f}", anchor


def _edge_drawing(
    edge: _Edge, layout: _Layout, pos: dict[int, tuple[float, float]], offset: float, label: bool
) -> _EdgeDrawing:
    """An arrow from waiter to waited-for, shifted ``offset`` to its side (to part a two-way pair)."""
    (x1, y1), (x2, y2) = pos[edge.src], pos[edge.dst]
    length = math.hypot(x2 - x1, y2 - y1) or 1.0
    ux, uy = (x2 - x1) / length, (y2 - y1) / length
    nx, ny = -uy * offset, ux * offset
    a = (x1 + ux * (layout.node_r + 2) + nx, y1 + uy * (layout.node_r + 2) + ny)
    b = (x2 - ux * (layout.node_r + 5) + nx, y2 - uy * (layout.node_r + 5) + ny)
    at = _edge_label(((a[0] + b[0]) / 2, (a[1] + b[1]) / 2), (-uy, ux)) if label else None
    text = "; ".join(edge.labels)
    return _EdgeDrawing(
        edge.src, edge.dst, text, f"{a[0]:.1f}", f"{a[1]:.1f}", f"{b[0]:.1f}", f"{b[1]:.1f}", at
    )


def _graph(doc: Mapping[str, Any], nodes: list[int], edges: list[_Edge]) -> _Graph:
    roots = set(_root_ranks(doc))
    states = {r["rank"]: str(r.get("state")) for r in _maps(doc.get("ranks")) if _is_rank(r.get("rank"))}
    layout = _Layout(nodes, max(130.0, len(nodes) * 44 / (2 * math.pi)))
    pos = {rank: layout.at(i) for i, rank in enumerate(nodes)}
    drawn = [e for e in edges if e.src in pos and e.dst in pos and e.src != e.dst]
    pairs = {(e.src, e.dst) for e in drawn}
    labelled = len(drawn) <= MAX_LABELLED_EDGES
    edge_drawings = [
        _edge_drawing(e, layout, pos, 3.0 if (e.dst, e.src) in pairs else 0.0, labelled) for e in drawn
    ]
    node_drawings = []
    for rank in nodes:
        x, y = pos[rank]
        is_root = rank in roots
        state = states.get(rank, "no_evidence")
        fill = ROOT_COLOUR if is_root else NODE_COLOURS.get(state, NODE_COLOURS["no_evidence"])
        node_drawings.append(
            _NodeDrawing(
                rank,
                is_root,
                state.replace("_", " "),
                f"{x:.1f}",
                f"{y:.1f}",
                f"{layout.node_r:.0f}",
                fill,
                f"{y + 4:.1f}",
            )
        )
    return _Graph(layout.width, layout.height, node_drawings, edge_drawings)


def _no_edges_text(doc: Mapping[str, Any]) -> str:
    if doc.get("verdict") == "no_hang":
        return "No rank waits for another: the job is not hung, so there is no wait-for chain to draw."
    if doc.get("sequence_numbers") in (None, "unknown"):
        return (
            "No wait-for edges: the evidence carries no process groups or sequence numbers (no Flight "
            "Recorder dumps or profiler traces), so who waits for whom is unknown."
        )
    return "No wait-for edges were found in the evidence, so there is no chain to draw."


class _WaitFor(NamedTuple):
    graph: _Graph
    notes: list[str]
    #: Every wait-for entry: waiter, waited-for, label.
    edges: list[tuple[str, str, str]]


def _wait_for(doc: Mapping[str, Any]) -> _WaitFor | None:
    edges = _edges(doc)
    if not edges:
        return None
    nodes, left_out = _graph_nodes(_root_ranks(doc), edges)
    notes = ["An arrow points from a waiting rank to the rank it waits for; root ranks are red."]
    if left_out:
        notes.append(
            f"The drawing shows {len(nodes)} ranks; {left_out} more ranks in the chain are left out "
            "of it (every edge is listed below)."
        )
    if len([e for e in edges if e.src in nodes and e.dst in nodes]) > MAX_LABELLED_EDGES:
        notes.append("With this many edges the drawing is unlabelled; the list below labels each edge.")
    listed = []
    for w in _maps(doc.get("wait_for")):
        label = " ".join(p for p in (_group_label(w.get("group")), _seq(w), str(w.get("op") or "")) if p)
        listed.append((_t(w.get("rank")), _t(w.get("waits_for")), label))
    return _WaitFor(_graph(doc, nodes, edges), notes, listed)


# --- roots, partial collectives, mismatches ---------------------------------------------------


def _evidence_text(value: Any) -> str:
    items = _list(value)
    return ", ".join(str(v) for v in items) if items else "none"


class _Root(NamedTuple):
    rank: str
    kind: str
    where: str
    reason: str
    confidence: str
    evidence: str


def _roots(doc: Mapping[str, Any]) -> list[_Root]:
    return [
        _Root(
            _t(r.get("rank")),
            _t(r.get("kind"), "root"),
            f"{_call(r)} on {_group_label(r.get('group'))}",
            _t(r.get("reason"), "no reason given"),
            _t(r.get("confidence"), "unknown"),
            _evidence_text(r.get("evidence")),
        )
        for r in _maps(doc.get("root"))
    ]


def _compared_text(doc: Mapping[str, Any]) -> str:
    count = _map(doc.get("compared")).get("collectives")
    if not count:
        return "no collectives could be compared across ranks"
    return f"among the {count} collectives compared across ranks"


def _partials(doc: Mapping[str, Any]) -> list[list[str]]:
    return [
        [
            _group_label(p.get("group")),
            _seq(p) or "n/a",
            _t(p.get("op")),
            _t(p.get("state")),
            _t(p.get("step")),
            _rank_ranges(p.get("present_ranks")),
            _rank_ranges(p.get("missing_ranks")),
            _t(p.get("confidence")),
            _evidence_text(p.get("evidence")),
        ]
        for p in _maps(doc.get("partial_collectives"))
    ]


SIGNATURE_FIELDS = ("op", "input_sizes", "input_dtypes", "output_sizes", "output_dtypes")


def _signature(entry: Any) -> str:
    """A call's op, sizes and dtypes as plain ``key=value`` text; ``n/a`` when none is known."""
    e = _map(entry)
    parts = [f"{k.replace('_', ' ')} {e[k]}" for k in SIGNATURE_FIELDS if e.get(k) is not None]
    return " · ".join(parts) or "n/a"


def _lines(lines: Iterable[str], empty: str = "n/a") -> Markup | str:
    """Lines of text in one cell, each escaped, broken by ``<br>``; ``empty`` for none."""
    items = list(lines)
    return BR.join(items) if items else empty


def _mismatches(doc: Mapping[str, Any]) -> list[list[str | Markup]]:
    return [
        [
            _group_label(m.get("group")),
            _seq(m) or "n/a",
            _t(m.get("kind")),
            _signature(m.get("expected")),
            _rank_ranges(m.get("majority_ranks")),
            _rank_ranges(m.get("minority_ranks")),
            _lines(f"rank {_t(s.get('rank'))}: {_signature(s)}" for s in _maps(m.get("seen"))),
            _t(m.get("state")),
            _t(m.get("step")),
        ]
        for m in _maps(doc.get("mismatches"))
    ]


# --- per-rank details -------------------------------------------------------------------------


def _frame(frame: Any) -> list[Markup]:
    f = _map(frame)
    if not f:
        return []
    return [CODE.format(f"{f.get('file', '?')}:{f.get('line', '?')} in {f.get('func', '?')}")]


def _call_detail(entry: Any) -> Markup | str:
    """A Flight Recorder call: op, seq, group, step, sizes, dtypes, frame."""
    c = _map(entry)
    if not c:
        return "none"
    text = f"{_call(c)} on {_group_label(c.get('group'))}"
    if c.get("step") is not None:
        text += f" (step {c['step']})"
    sizes = " ".join(str(c[k]) for k in ("input_sizes", "input_dtypes") if c.get(k) is not None)
    return BR.join([text, *([CODE.format(sizes)] if sizes else []), *_frame(c.get("frame"))])


def _stack_detail(stack: Any) -> Markup | str:
    s = _map(stack)
    if not s:
        return "none"
    api, call = s.get("api"), s.get("call")
    text = str(api or call or "unknown call")
    if call and api and call != api:
        text += f" ({call})"
    thread = [CODE.format(f"thread {s['thread']}")] if s.get("thread") else []
    return BR.join([text, *_frame(s.get("frame")), *thread])


def _exception_detail(exception: Any) -> Markup | str:
    x = _map(exception)
    if not x:
        return "none"
    text = f"{x.get('type', 'exception')}: {x.get('message', '')}".rstrip(": ")
    extra = []
    if x.get("timeout_ms") is not None:
        extra.append(f"timeout {x['timeout_ms']} ms")
    elif x.get("timeout") is not None:
        extra.append(f"timeout {x['timeout']}")
    if x.get("backend") is not None:
        extra.append(f"backend {x['backend']}")
    if _call(x):
        extra.append(_call(x))
    return BR.join([text, *([CODE.format(" · ".join(extra))] if extra else [])])


class _Details(NamedTuple):
    rows: list[list[str | Markup]]
    classes: list[str]


def _rank_details(doc: Mapping[str, Any]) -> _Details:
    roots = set(_root_ranks(doc))
    rows: list[list[str | Markup]] = []
    classes = []
    for r in _maps(doc.get("ranks")):
        root = r.get("rank") in roots
        rank = (
            Markup('{}<span class="root-label">ROOT</span>').format(_t(r.get("rank")))
            if root
            else _t(r.get("rank"))
        )
        rows.append(
            [
                rank,
                str(r.get("state", "n/a")).replace("_", " "),
                _call_detail(r.get("in_flight")),
                _call_detail(r.get("last_completed")),
                _stack_detail(r.get("stack")),
                _exception_detail(r.get("exception")),
                _lines((CODE.format(_t(f)) for f in _list(r.get("evidence"))), "none"),
            ]
        )
        classes.append("row-root" if root else "")
    return _Details(rows, classes)


# --- conclusions, basis, evidence, notes ------------------------------------------------------


def _conclusions(doc: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """Per conclusion: statement, confidence, its badge class, evidence."""
    out = []
    for c in _maps(doc.get("conclusions")):
        conf = str(c.get("confidence", "unknown"))
        cls = f" conf-{conf}" if conf in ("high", "medium", "low") else ""
        out.append((_t(c.get("statement"), ""), conf, cls, _evidence_text(c.get("evidence"))))
    return out


def _basis(doc: Mapping[str, Any]) -> list[list[str | Markup]]:
    """How the diagnosis was read: the step and its source, sequence numbers, what was compared."""
    step = _map(doc.get("step"))
    source = step.get("source")
    value: str | Markup = _t(step.get("value"), "unknown")
    if source not in (None, "", "unknown"):
        value = Markup('{} <span class="note">({})</span>').format(value, _t(source))
    rows: list[list[str | Markup]] = [
        ["Step", value],
        ["Sequence numbers", _t(doc.get("sequence_numbers"), "unknown")],
    ]
    compared = _map(doc.get("compared"))
    for key in sorted(compared):
        rows.append([f"Compared: {key.replace('_', ' ')}", _t(compared[key])])
    return rows


def _evidence_details(e: Mapping[str, Any]) -> str:
    extra = sorted(k for k in e if k not in ("file", "kind", "rank", "used"))
    return " · ".join(f"{k} {e[k]}" for k in extra)


class _Evidence(NamedTuple):
    used: int
    skipped: int
    rows: list[list[str | Markup]]
    classes: list[str]


def _evidence(doc: Mapping[str, Any]) -> _Evidence:
    files = _maps(doc.get("evidence"))
    used = sum(1 for e in files if e.get("used") is True)
    rows: list[list[str | Markup]] = [
        [
            CODE.format(_t(e.get("file"))),
            _t(e.get("kind")),
            _t(e.get("rank")),
            "used" if e.get("used") is True else "skipped",
            _evidence_details(e),
        ]
        for e in files
    ]
    classes = ["" if e.get("used") is True else "skipped" for e in files]
    return _Evidence(used, len(files) - used, rows, classes)


# --- the page ---------------------------------------------------------------------------------


def render_hang(document: Mapping[str, Any]) -> str:
    """HTML for one hang diagnosis (a ``commcanary.hang.v1`` document, as parsed JSON)."""
    if not isinstance(document, Mapping) or document.get("format") != HANG_FORMAT:
        found = document.get("format") if isinstance(document, Mapping) else type(document).__name__
        raise InputError(f"not a {HANG_FORMAT} document (format {found!r})")
    doc = document
    verdict = VERDICT_TITLES.get(str(doc.get("verdict")), str(doc.get("verdict")))
    return render(
        "hang.html.j2",
        title=f"commcanary hang diagnosis - {verdict}",
        style=stylesheet("base", "hang"),
        hero=_hero(doc),
        card_items=_cards_row(doc),
        grid=_grid(doc),
        wait_for=_wait_for(doc),
        no_edges=_no_edges_text(doc),
        not_hung=doc.get("verdict") == "no_hang",
        roots=_roots(doc),
        compared=_compared_text(doc),
        partials=_partials(doc),
        mismatches=_mismatches(doc),
        ranks=_rank_details(doc),
        conclusions=_conclusions(doc),
        basis=_basis(doc),
        evidence=_evidence(doc),
        notes=[_t(n) for n in _list(doc.get("notes"))],
    )
