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
from typing import Any, TypeGuard

from commcanary.errors import InputError
from commcanary.formats import HANG_FORMAT
from commcanary.views import Markup, components, render, stylesheet
from commcanary.views import escape_text as escape
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


# --- small helpers ----------------------------------------------------------------------------


def _e(value: Any, missing: str = "n/a") -> str:
    """A value as escaped text: ``missing`` for None, yes/no for booleans."""
    if value is None:
        return escape(missing)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return escape(str(value))


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


def _empty(text: str) -> str:
    return f'<p class="empty">{escape(text)}</p>'


def _section(cls: str, title: str, body: str) -> str:
    return f'<section class="{cls}"><h2>{escape(title)}</h2>{body}</section>'


def _root_ranks(doc: Mapping[str, Any]) -> list[int]:
    seen: list[int] = []
    for root in _maps(doc.get("root")):
        r = root.get("rank")
        if _is_rank(r) and r not in seen:
            seen.append(r)
    return seen


# --- hero and cards ---------------------------------------------------------------------------


def _hero(doc: Mapping[str, Any]) -> str:
    verdict = str(doc.get("verdict"))
    cls = f"verdict-{verdict}" if verdict in HANG_VERDICT_COLOURS else "verdict-unknown"
    title = VERDICT_TITLES.get(verdict, f"Verdict: {verdict}")
    confidence = _e(doc.get("confidence"), "unknown")
    return (
        f'<header class="hero verdict {cls}"><h1>{escape(title)}</h1>'
        f'<p class="summary">{_e(doc.get("summary"), "no summary")}</p>'
        f'<p class="confidence">Confidence <span class="badge">{confidence}</span></p></header>'
    )


def _cards_row(doc: Mapping[str, Any]) -> str:
    roots = _root_ranks(doc)
    roots_text = _rank_ranges(roots)
    if len(roots_text) > 16:
        roots_text = f"{len(roots)} ranks"
    step = _map(doc.get("step")).get("value")
    return _cards(
        [
            ("World size", "n/a" if doc.get("world_size") is None else str(doc["world_size"])),
            ("Groups", str(len(_maps(doc.get("groups"))))),
            ("Partial collectives", str(len(_maps(doc.get("partial_collectives"))))),
            ("Mismatches", str(len(_maps(doc.get("mismatches"))))),
            ("Root rank" if len(roots) == 1 else "Root ranks", roots_text),
            ("Step", "unknown" if step is None else str(step)),
        ]
    )


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


def _cell(status: str, mark: str, texts: list[str], title: str) -> str:
    shown = " · ".join(t for t in texts if t)
    body = f" {escape(shown)}" if shown else ""
    return (
        f'<td class="cell cell-{status}" title="{escape(title)}"><span class="mark">{mark}</span>{body}</td>'
    )


def _grid_cell(key: tuple[str, int], marks: _Marks, flight: dict[tuple[str, int], str], state: str) -> str:
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


def _grid_header(groups: list[Mapping[str, Any]]) -> str:
    cells = "".join(
        f'<th class="group" title="{_e(g.get("membership"), "")}">{escape(_group_label(g))}'
        f'<span class="code">pg {_e(g.get("name"))} · ranks {escape(_rank_ranges(g.get("ranks")))}</span></th>'
        for g in groups
    )
    return f"<thead><tr><th>Rank</th><th>State</th>{cells}</tr></thead>"


@dataclass(frozen=True)
class _GridContext:
    """What every grid row needs: the roots, the marks, in-flight calls and group members."""

    roots: list[int]
    marks: _Marks
    flight: dict[tuple[str, int], str]
    members: dict[str, set[int]]


def _grid_row(
    doc_rank: Mapping[str, Any], rank: int, groups: list[Mapping[str, Any]], ctx: _GridContext
) -> str:
    state = str(doc_rank.get("state", "no_evidence"))
    is_root = rank in ctx.roots
    label = '<span class="root-label">ROOT</span>' if is_root else ""
    cells = []
    for g in groups:
        key = (_group_key(g), rank)
        if rank not in ctx.members.get(key[0], set()):
            cells.append('<td class="cell cell-none"></td>')
        else:
            cells.append(_grid_cell(key, ctx.marks, ctx.flight, state))
    cls = ' class="row-root"' if is_root else ""
    return (
        f'<tr{cls} data-rank="{rank}"><th scope="row">{rank}{label}</th>'
        f"<td>{escape(state.replace('_', ' '))}</td>{''.join(cells)}</tr>"
    )


GRID_LEGEND = (
    '<p class="legend"><span><i class="cell-missing"></i>missing: never reached the call</span>'
    '<span><i class="cell-stuck"></i>stuck: waiting in the call for other ranks</span>'
    '<span><i class="cell-ok"></i>ok: not waiting on this group</span>'
    '<span><i class="cell-none"></i>not a member</span></p>'
)


def _grid(doc: Mapping[str, Any]) -> str:
    groups = _maps(doc.get("groups"))
    ranks = _grid_ranks(doc)
    if not groups:
        return _section(
            "grid",
            "Ranks and groups",
            _empty(
                "No process groups are known (the evidence has no Flight Recorder dumps or profiler "
                "traces), so there is no ranks x groups grid; each rank's call is under Ranks below."
            ),
        )
    by_rank = {r["rank"]: r for r in _maps(doc.get("ranks")) if _is_rank(r.get("rank"))}
    members = {_group_key(g): set(_ranks(g.get("ranks"))) for g in groups}
    ctx = _GridContext(_root_ranks(doc), _marks(doc), _in_flight_by_group(doc), members)
    rows = "".join(_grid_row(by_rank.get(rank, {}), rank, groups, ctx) for rank in ranks)
    table = (
        f'<div class="scroll grid-scroll"><table class="grid">{_grid_header(groups)}'
        f"<tbody>{rows}</tbody></table></div>"
    )
    return _section("grid", "Ranks and groups", table + GRID_LEGEND)


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


def _edge_label(mid: tuple[float, float], normal: tuple[float, float], text: str) -> str:
    """An edge's label beside its midpoint, on the side of ``normal`` (a unit vector), clear of the line."""
    nx, ny = normal
    x, y = mid[0] + nx * 8, mid[1] + ny * 8
    if abs(nx) >= 0.5:  # a steep edge: the label starts (or ends) beside it
        anchor, y = ("start" if nx > 0 else "end"), y + 4
    else:  # a flat edge: the label sits above or below it
        anchor, y = "middle", y + (12 if ny > 0 else -3)
    return f'<text class="edge-label" x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{escape(text)}</text>'


def _edge_svg(
    edge: _Edge, layout: _Layout, pos: dict[int, tuple[float, float]], offset: float, label: bool
) -> str:
    """An arrow from waiter to waited-for, shifted ``offset`` to its side (to part a two-way pair)."""
    (x1, y1), (x2, y2) = pos[edge.src], pos[edge.dst]
    length = math.hypot(x2 - x1, y2 - y1) or 1.0
    ux, uy = (x2 - x1) / length, (y2 - y1) / length
    nx, ny = -uy * offset, ux * offset
    a = (x1 + ux * (layout.node_r + 2) + nx, y1 + uy * (layout.node_r + 2) + ny)
    b = (x2 - ux * (layout.node_r + 5) + nx, y2 - uy * (layout.node_r + 5) + ny)
    text = "; ".join(edge.labels)
    out = (
        f'<g class="edge" data-src="{edge.src}" data-dst="{edge.dst}"><title>{edge.src} waits for {edge.dst}: '
        f'{escape(text)}</title><line x1="{a[0]:.1f}" y1="{a[1]:.1f}" x2="{b[0]:.1f}" y2="{b[1]:.1f}" '
        f'stroke="#5b6573" stroke-width="1.6" marker-end="url(#wf-arrow)"/>'
    )
    if label:
        out += _edge_label(((a[0] + b[0]) / 2, (a[1] + b[1]) / 2), (-uy, ux), text)
    return out + "</g>"


def _node_svg(rank: int, x: float, y: float, layout: _Layout, is_root: bool, state: str) -> str:
    fill = ROOT_COLOUR if is_root else NODE_COLOURS.get(state, NODE_COLOURS["no_evidence"])
    cls = "node root" if is_root else "node"
    what = "root, " if is_root else ""
    return (
        f'<g class="{cls}" data-rank="{rank}"><title>rank {rank} ({what}{escape(state.replace("_", " "))})</title>'
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{layout.node_r:.0f}" fill="{fill}"/>'
        f'<text class="node-label" x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle">{rank}</text></g>'
    )


def _graph_svg(doc: Mapping[str, Any], nodes: list[int], edges: list[_Edge]) -> str:
    roots = set(_root_ranks(doc))
    states = {r["rank"]: str(r.get("state")) for r in _maps(doc.get("ranks")) if _is_rank(r.get("rank"))}
    layout = _Layout(nodes, max(130.0, len(nodes) * 44 / (2 * math.pi)))
    pos = {rank: layout.at(i) for i, rank in enumerate(nodes)}
    drawn = [e for e in edges if e.src in pos and e.dst in pos and e.src != e.dst]
    pairs = {(e.src, e.dst) for e in drawn}
    labelled = len(drawn) <= MAX_LABELLED_EDGES
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="wait-for" width="{layout.width}" '
        f'height="{layout.height}" viewBox="0 0 {layout.width} {layout.height}" role="img" '
        f'aria-label="Wait-for chain: {len(nodes)} ranks, {len(drawn)} edges">'
        "<title>Wait-for chain (an arrow points from a waiting rank to the rank it waits for)</title>"
        '<defs><marker id="wf-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#5b6573"/></marker></defs>'
    ]
    for e in drawn:
        offset = 3.0 if (e.dst, e.src) in pairs else 0.0
        parts.append(_edge_svg(e, layout, pos, offset, labelled))
    for rank in nodes:
        x, y = pos[rank]
        parts.append(_node_svg(rank, x, y, layout, rank in roots, states.get(rank, "no_evidence")))
    parts.append("</svg>")
    return "".join(parts)


def _edge_list(edges: list[_Edge], doc: Mapping[str, Any]) -> str:
    items = []
    for w in _maps(doc.get("wait_for")):
        src, dst = w.get("rank"), w.get("waits_for")
        label = " ".join(p for p in (_group_label(w.get("group")), _seq(w), str(w.get("op") or "")) if p)
        items.append(f"<li>{_e(src)} → {_e(dst)} {escape(label)}</li>")
    return f'<ul class="edges">{"".join(items)}</ul>'


def _no_edges_text(doc: Mapping[str, Any]) -> str:
    if doc.get("verdict") == "no_hang":
        return "No rank waits for another: the job is not hung, so there is no wait-for chain to draw."
    if doc.get("sequence_numbers") in (None, "unknown"):
        return (
            "No wait-for edges: the evidence carries no process groups or sequence numbers (no Flight "
            "Recorder dumps or profiler traces), so who waits for whom is unknown."
        )
    return "No wait-for edges were found in the evidence, so there is no chain to draw."


def _wait_for(doc: Mapping[str, Any]) -> str:
    edges = _edges(doc)
    if not edges:
        return _section("wait-for", "Wait-for chain", _empty(_no_edges_text(doc)))
    nodes, left_out = _graph_nodes(_root_ranks(doc), edges)
    notes = [
        "An arrow points from a waiting rank to the rank it waits for; root ranks are red.",
    ]
    if left_out:
        notes.append(
            f"The drawing shows {len(nodes)} ranks; {left_out} more ranks in the chain are left out "
            "of it (every edge is listed below)."
        )
    if len([e for e in edges if e.src in nodes and e.dst in nodes]) > MAX_LABELLED_EDGES:
        notes.append("With this many edges the drawing is unlabelled; the list below labels each edge.")
    body = (
        f'<div class="graph">{_graph_svg(doc, nodes, edges)}</div>'
        + "".join(f'<p class="note">{escape(n)}</p>' for n in notes)
        + f"<h3>Edges</h3>{_edge_list(edges, doc)}"
    )
    return _section("wait-for", "Wait-for chain", body)


# --- roots, partial collectives, mismatches ---------------------------------------------------


def _evidence_text(value: Any) -> str:
    items = _list(value)
    return ", ".join(str(v) for v in items) if items else "none"


def _root_item(root: Mapping[str, Any]) -> str:
    where = f"{_call(root)} on {_group_label(root.get('group'))}"
    return (
        f'<li class="fail" data-rank="{_e(root.get("rank"))}"><strong>Rank {_e(root.get("rank"))}</strong>'
        f'<span class="tag">{_e(root.get("kind"), "root")}</span> <span class="code">{escape(where)}</span>'
        f"<br>{_e(root.get('reason'), 'no reason given')}"
        f'<br><span class="note">confidence {_e(root.get("confidence"), "unknown")} · evidence '
        f"{escape(_evidence_text(root.get('evidence')))}</span></li>"
    )


def _roots(doc: Mapping[str, Any]) -> str:
    roots = _maps(doc.get("root"))
    if roots:
        return _section("roots", "Root ranks", f'<ul class="reasons">{"".join(map(_root_item, roots))}</ul>')
    if doc.get("verdict") == "no_hang":
        text = "No root rank: the job is not hung."
    else:
        text = "No root rank was identified: the evidence does not say which rank the others wait for."
    return _section("roots", "Root ranks", _empty(text))


def _compared_text(doc: Mapping[str, Any]) -> str:
    count = _map(doc.get("compared")).get("collectives")
    if not count:
        return "no collectives could be compared across ranks"
    return f"among the {count} collectives compared across ranks"


def _partials(doc: Mapping[str, Any]) -> str:
    partials = _maps(doc.get("partial_collectives"))
    if not partials:
        return _section("partials", "Partial collectives", _empty(f"None found ({_compared_text(doc)})."))
    rows = [
        [
            escape(_group_label(p.get("group"))),
            escape(_seq(p) or "n/a"),
            _e(p.get("op")),
            _e(p.get("state")),
            _e(p.get("step")),
            escape(_rank_ranges(p.get("present_ranks"))),
            escape(_rank_ranges(p.get("missing_ranks"))),
            _e(p.get("confidence")),
            escape(_evidence_text(p.get("evidence"))),
        ]
        for p in partials
    ]
    headers = ["Group", "Seq", "Op", "State", "Step", "Present", "Missing", "Confidence", "Evidence"]
    return _section("partials", "Partial collectives", _table(headers, rows, numeric_from=len(headers)))


SIGNATURE_FIELDS = ("op", "input_sizes", "input_dtypes", "output_sizes", "output_dtypes")


def _signature(entry: Any) -> str:
    """A call's op, sizes and dtypes as plain ``key=value`` text; ``n/a`` when none is known."""
    e = _map(entry)
    parts = [f"{k.replace('_', ' ')} {e[k]}" for k in SIGNATURE_FIELDS if e.get(k) is not None]
    return " · ".join(parts) or "n/a"


def _mismatch_row(m: Mapping[str, Any]) -> list[str]:
    seen = "<br>".join(f"rank {_e(s.get('rank'))}: {escape(_signature(s))}" for s in _maps(m.get("seen")))
    return [
        escape(_group_label(m.get("group"))),
        escape(_seq(m) or "n/a"),
        _e(m.get("kind")),
        escape(_signature(m.get("expected"))),
        escape(_rank_ranges(m.get("majority_ranks"))),
        escape(_rank_ranges(m.get("minority_ranks"))),
        seen or "n/a",
        _e(m.get("state")),
        _e(m.get("step")),
    ]


def _mismatches(doc: Mapping[str, Any]) -> str:
    mismatches = _maps(doc.get("mismatches"))
    if not mismatches:
        return _section("mismatches", "Mismatches", _empty(f"None found ({_compared_text(doc)})."))
    headers = ["Group", "Seq", "Kind", "Expected", "Majority", "Minority", "Seen", "State", "Step"]
    rows = [_mismatch_row(m) for m in mismatches]
    return _section("mismatches", "Mismatches", _table(headers, rows, numeric_from=len(headers)))


# --- per-rank details -------------------------------------------------------------------------


def _call_detail(entry: Any) -> str:
    """A Flight Recorder call as escaped text: op, seq, group, step, sizes, dtypes, frame."""
    c = _map(entry)
    if not c:
        return "none"
    text = f"{_call(c)} on {_group_label(c.get('group'))}"
    if c.get("step") is not None:
        text += f" (step {c['step']})"
    sizes = " ".join(str(c[k]) for k in ("input_sizes", "input_dtypes") if c.get(k) is not None)
    out = escape(text) + (f'<br><span class="code">{escape(sizes)}</span>' if sizes else "")
    return out + _frame(c.get("frame"))


def _frame(frame: Any) -> str:
    f = _map(frame)
    if not f:
        return ""
    where = f"{f.get('file', '?')}:{f.get('line', '?')} in {f.get('func', '?')}"
    return f'<br><span class="code">{escape(where)}</span>'


def _stack_detail(stack: Any) -> str:
    s = _map(stack)
    if not s:
        return "none"
    api, call = s.get("api"), s.get("call")
    text = str(api or call or "unknown call")
    if call and api and call != api:
        text += f" ({call})"
    thread = f'<br><span class="code">thread {escape(str(s["thread"]))}</span>' if s.get("thread") else ""
    return escape(text) + _frame(s.get("frame")) + thread


def _exception_detail(exception: Any) -> str:
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
    return escape(text) + (f'<br><span class="code">{escape(" · ".join(extra))}</span>' if extra else "")


def _rank_details(doc: Mapping[str, Any]) -> str:
    ranks = _maps(doc.get("ranks"))
    if not ranks:
        return _section("ranks", "Ranks", _empty("The document describes no rank."))
    roots = set(_root_ranks(doc))
    rows, classes = [], []
    for r in ranks:
        label = '<span class="root-label">ROOT</span>' if r.get("rank") in roots else ""
        files = "<br>".join(f'<span class="code">{_e(f)}</span>' for f in _list(r.get("evidence"))) or "none"
        rows.append(
            [
                _e(r.get("rank")) + label,
                escape(str(r.get("state", "n/a")).replace("_", " ")),
                _call_detail(r.get("in_flight")),
                _call_detail(r.get("last_completed")),
                _stack_detail(r.get("stack")),
                _exception_detail(r.get("exception")),
                files,
            ]
        )
        classes.append("row-root" if label else "")
    headers = ["Rank", "State", "In flight", "Last completed", "Stack", "Exception", "Evidence"]
    table = _table(headers, rows, numeric_from=len(headers), row_classes=classes, table_class="details")
    return _section("ranks", "Ranks", table)


# --- conclusions, basis, evidence, notes ------------------------------------------------------


def _conclusions(doc: Mapping[str, Any]) -> str:
    items = []
    for c in _maps(doc.get("conclusions")):
        conf = str(c.get("confidence", "unknown"))
        cls = f" conf-{conf}" if conf in ("high", "medium", "low") else ""
        items.append(
            f'<li>{_e(c.get("statement"), "")} <span class="badge{cls}">{escape(conf)}</span>'
            f'<br><span class="note">evidence: {escape(_evidence_text(c.get("evidence")))}</span></li>'
        )
    body = f'<ul class="plain conclusions">{"".join(items)}</ul>' if items else _empty("No conclusions.")
    return _section("conclusions", "Conclusions", body)


def _basis(doc: Mapping[str, Any]) -> str:
    """How the diagnosis was read: the step and its source, sequence numbers, what was compared."""
    step = _map(doc.get("step"))
    source = step.get("source")
    known = f' <span class="note">({_e(source)})</span>' if source not in (None, "", "unknown") else ""
    rows = [
        ["Step", _e(step.get("value"), "unknown") + known],
        ["Sequence numbers", _e(doc.get("sequence_numbers"), "unknown")],
    ]
    compared = _map(doc.get("compared"))
    for key in sorted(compared):
        rows.append([escape(f"Compared: {key.replace('_', ' ')}"), _e(compared[key])])
    return _section("basis", "Basis", _table(["Field", "Value"], rows, numeric_from=2, table_class="kv"))


def _evidence_details(e: Mapping[str, Any]) -> str:
    extra = sorted(k for k in e if k not in ("file", "kind", "rank", "used"))
    return escape(" · ".join(f"{k} {e[k]}" for k in extra)) or ""


def _evidence(doc: Mapping[str, Any]) -> str:
    files = _maps(doc.get("evidence"))
    if not files:
        return _section("evidence", "Evidence files", _empty("The document lists no evidence files."))
    used = sum(1 for e in files if e.get("used") is True)
    rows = [
        [
            f'<span class="code">{_e(e.get("file"))}</span>',
            _e(e.get("kind")),
            _e(e.get("rank")),
            "used" if e.get("used") is True else "skipped",
            _evidence_details(e),
        ]
        for e in files
    ]
    classes = ["" if e.get("used") is True else "skipped" for e in files]
    count = f'<p class="note">{used} used, {len(files) - used} skipped.</p>'
    table = _table(
        ["File", "Kind", "Rank", "Used", "Details"],
        rows,
        numeric_from=5,
        row_classes=classes,
        table_class="evidence",
    )
    return _section("evidence", "Evidence files", count + table)


def _notes(doc: Mapping[str, Any]) -> str:
    notes = _list(doc.get("notes"))
    if not notes:
        return _section("notes", "Notes", _empty("No notes."))
    items = "".join(f"<li>{_e(n)}</li>" for n in notes)
    return _section("notes", "Notes", f'<ul class="plain">{items}</ul>')


# --- the page ---------------------------------------------------------------------------------


def _cards(items: list[tuple[str, str]]) -> str:
    return str(components().cards(items))


def _table(
    headers: list[str],
    rows: list[list[str]],
    numeric_from: int = 1,
    row_classes: list[str] | None = None,
    table_class: str = "",
) -> str:
    """The components' table; cells here are escaped fragments already."""
    cells = [[Markup(c) for c in row] for row in rows]
    return str(components().table(headers, cells, numeric_from, row_classes, table_class))


def _page(title: str, body: list[str]) -> str:
    fragments = [Markup(b) for b in body]
    return render("diagnosis.html.j2", title=title, style=stylesheet("base", "hang"), fragments=fragments)


def render_hang(document: Mapping[str, Any]) -> str:
    """HTML for one hang diagnosis (a ``commcanary.hang.v1`` document, as parsed JSON)."""
    if not isinstance(document, Mapping) or document.get("format") != HANG_FORMAT:
        found = document.get("format") if isinstance(document, Mapping) else type(document).__name__
        raise InputError(f"not a {HANG_FORMAT} document (format {found!r})")
    sections = (_grid, _wait_for, _roots, _partials, _mismatches, _rank_details, _conclusions, _basis)
    body = [_hero(document), _cards_row(document)]
    body += [section(document) for section in sections]
    body += [_evidence(document), _notes(document)]
    verdict = VERDICT_TITLES.get(str(document.get("verdict")), str(document.get("verdict")))
    return _page(f"commcanary hang diagnosis - {verdict}", body)
