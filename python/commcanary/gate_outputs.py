"""A comparison in the formats CI systems read: JUnit XML (one test case per
gated statistic), SARIF 2.1.0 (one result per regression, naming its phase or
operation) and a Markdown summary for a pull request or
``$GITHUB_STEP_SUMMARY``.

All three are views of the comparison document (one run per side or
repeated runs): they decide nothing themselves. A ``fail`` is a JUnit failure
and a SARIF ``error``; ``inconclusive`` is a skipped test case with its reason
and a SARIF ``note``; ``warn`` passes with its reason in the test's output and
is a SARIF ``warning``. The same document gives the same bytes.
"""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree as ET

from commcanary import __version__

__all__ = ["junit_xml", "sarif_log", "summary_markdown"]

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVELS = {"fail": "error", "warn": "warning", "inconclusive": "note"}


def _gated(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The evaluations that are threshold decisions on a statistic."""
    return [e for e in doc["evaluations"] if not e["metric"].startswith("uncertainty.")]


def _name(e: dict[str, Any]) -> str:
    return f"{e['metric']}[{e['name']}]" if "name" in e else str(e["metric"])


def _reason_for(doc: dict[str, Any], e: dict[str, Any]) -> str:
    """The document's reason for this evaluation, else a plain line."""
    scope, _, metric = e["metric"].partition(".")
    for r in doc["reasons"]:
        if r.get("metric") in (e["metric"], f"{scope}.{metric}") and (
            "name" not in e or f"'{e['name']}'" in r["message"]
        ):
            return str(r["message"])
    change = e.get("relative_delta_pct")
    amount = "n/a" if change is None else f"{change:+.2f}%"
    return f"{_name(e)}: {e['threshold_result']} (change {amount})"


def junit_xml(doc: dict[str, Any]) -> str:
    """The comparison as JUnit XML: one test case per gated statistic."""
    gated = _gated(doc)
    counts = {k: sum(1 for e in gated if e["threshold_result"] == k) for k in ("fail", "inconclusive")}
    suites = ET.Element("testsuites", name="commcanary compare")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="commcanary.gate",
        tests=str(len(gated)),
        failures=str(counts["fail"]),
        errors="0",
        skipped=str(counts["inconclusive"]),
    )
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="verdict", value=str(doc["verdict"]))
    runs = doc.get("runs")
    if runs is not None:
        ET.SubElement(props, "property", name="baseline_runs", value=str(runs["baseline"]))
        ET.SubElement(props, "property", name="candidate_runs", value=str(runs["candidate"]))
        if runs.get("policy_sha256"):
            ET.SubElement(props, "property", name="policy_sha256", value=str(runs["policy_sha256"]))
    for e in gated:
        case = ET.SubElement(
            suite, "testcase", classname=f"commcanary.gate.{e['metric'].split('.')[0]}", name=_name(e)
        )
        result = e["threshold_result"]
        reason = _reason_for(doc, e)
        if result == "fail":
            ET.SubElement(case, "failure", message=reason, type="regression").text = reason
        elif result == "inconclusive":
            ET.SubElement(case, "skipped", message=reason)
        elif result == "warn":
            ET.SubElement(case, "system-out").text = reason
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def sarif_log(doc: dict[str, Any]) -> dict[str, Any]:
    """The comparison as a SARIF 2.1.0 log: one result per statistic that did
    not pass, its phase or operation as the logical location."""
    results = []
    rule_ids: list[str] = []
    for e in _gated(doc):
        level = _LEVELS.get(e["threshold_result"])
        if level is None:
            continue
        scope = e["metric"].split(".")[0]
        rule = f"commcanary/{e['metric']}"
        if rule not in rule_ids:
            rule_ids.append(rule)
        location: dict[str, Any] = {"name": e.get("name", e["metric"]), "kind": scope}
        location["fullyQualifiedName"] = f"{scope}/{e['name']}" if "name" in e else e["metric"]
        result: dict[str, Any] = {
            "ruleId": rule,
            "level": level,
            "message": {"text": _reason_for(doc, e)},
            "locations": [{"logicalLocations": [location]}],
            "properties": {
                "threshold_result": e["threshold_result"],
                "baseline": e.get("baseline"),
                "candidate": e.get("candidate"),
                "relative_delta_pct": e.get("relative_delta_pct"),
            },
        }
        if "interval" in e:
            result["properties"]["interval"] = e["interval"]
        results.append(result)
    rules = [
        {
            "id": r,
            "name": r.split("/", 1)[1],
            "shortDescription": {"text": f"{r.split('/', 1)[1]} regression gate"},
        }
        for r in sorted(rule_ids)
    ]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "commcanary",
                        "version": __version__,
                        "informationUri": "https://pypi.org/project/commcanary/",
                        "rules": rules,
                    }
                },
                "results": results,
                "properties": {"verdict": doc["verdict"]},
            }
        ],
    }


def _num(v: Any, unit: str = "") -> str:
    return "n/a" if v is None else f"{v:,.3f}{unit}"


def summary_markdown(doc: dict[str, Any]) -> str:
    """A Markdown summary: the verdict, why, and a table of the overall statistics
    and every row that did not pass."""
    verdict = doc["verdict"]
    runs = doc.get("runs")
    sides = "" if runs is None else f" ({runs['baseline']} baseline runs, {runs['candidate']} candidate runs)"
    lines = [f"## commcanary gate: **{verdict}**{sides}", ""]
    lines += [f"- {r['message']}" for r in doc["reasons"]]
    lines += [
        "",
        "| statistic | baseline | candidate | change | interval | result |",
        "|---|---|---|---|---|---|",
    ]
    for e in _gated(doc):
        overall = e["metric"].startswith("overall.")
        if not overall and e["threshold_result"] == "pass":
            continue
        if "drop_points" in e:
            change = f"drop {e['drop_points']:.2f} pt"
        else:
            pct = e.get("relative_delta_pct")
            change = "n/a" if pct is None else f"{pct:+.2f}%"
        iv = e.get("interval")
        interval = (
            "-"
            if iv is None
            else f"[{iv['low_pct']:+.1f}%, {iv['high_pct']:+.1f}%]"
            if iv.get("low_pct") is not None and iv.get("high_pct") is not None
            else f"[{iv['low']:+.3f}, {iv['high']:+.3f}]"
        )
        name = _name(e).replace("|", "\\|")
        lines.append(
            f"| `{name}` | {_num(e.get('baseline'))} | {_num(e.get('candidate'))} | {change} | {interval} | "
            f"{e['threshold_result']} |"
        )
    return "\n".join(lines) + "\n"
