"""Every parting from AR in greedy bench reports, counted per suite and row (issue 29's divergence
table).

The bench's judge (engine_bridge.runtime.near_tie) records each speculative run's first parting from
the AR run of the same prompt and seed: the target's top-2 margin there, and the target's own logits
when it decodes the same tokens in the verify's batch shapes. This module reads those records back
from one or more reports (``dflash-studio bench --json``) and counts, per suite and row: the runs,
those identical to AR, the partings, the near-ties by the reason that makes each one, the partings
that are not near-ties, and the margins. Given a device's measured drift bound
(engine_bridge.bench.drift, ``benchmarks/bench_drift.py``), it also names every parting whose margin
lies above it: issue 29's stricter test, where a near-tie is a gap below the bound.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

#: Why a parting is a near-tie, in the order the judge's rule reads them (near_tie.Parting.near_tie)
UNDER_TOLERANCE = "under the tolerance"
PICKED = "picked by the target in a batch shape"
LEAD_UNDER_TOLERANCE = "AR's lead under the tolerance in a batch shape"
SPREAD = "within the shapes' spread"
REASONS = (UNDER_TOLERANCE, PICKED, LEAD_UNDER_TOLERANCE, SPREAD)


class NotGreedyError(ValueError):
    """A sampled run cannot be compared with AR token for token."""


def reason(div: dict) -> str | None:
    """The first reason, in the judge's order, that makes this parting a near-tie; None for one that
    is not a near-tie."""
    if not div.get("near_tie"):
        return None
    margin, tol = div.get("margin"), div.get("tolerance")
    if margin is not None and tol is not None and margin < tol:
        return UNDER_TOLERANCE
    gaps = list((div.get("shape_gaps") or {}).values())
    if div.get("picked_by_target") or (gaps and min(gaps) <= 0.0):
        return PICKED
    if gaps and tol is not None and min(gaps) < tol:
        return LEAD_UNDER_TOLERANCE
    return SPREAD


@dataclass
class Row:
    """One suite's speculative row of a report."""

    suite: str
    label: str
    runs: int = 0
    identical: int = 0
    near_ties: Counter = field(default_factory=Counter)  # by reason
    not_near_ties: list[tuple[str, int, float | None]] = field(default_factory=list)  # (prompt, rep, margin)
    margins: list[float] = field(default_factory=list)
    above_bound: list[tuple[str, int, float, int]] = field(default_factory=list)  # (prompt, rep, margin, index)

    @property
    def parted(self) -> int:
        return self.runs - self.identical


def rows_of(report: dict, bound: float | None = None) -> list[Row]:
    """The speculative rows of one greedy bench report, with their partings counted."""
    settings = report.get("settings", {})
    if float(settings.get("temperature", 0.0) or 0.0) > 0.0:
        raise NotGreedyError("the report's runs were sampled (temperature > 0): only greedy runs part from AR")
    suite = (settings.get("suite") or {}).get("name", "?")
    out = []
    for r in report["rows"]:
        if r.get("kind") != "spec":
            continue
        row = Row(suite=suite, label=r["label"])
        for run in report["runs"]:
            if run["row_id"] != r["id"]:
                continue
            row.runs += 1
            div = run.get("divergence")
            if not div:
                row.identical += 1
                continue
            margin = div.get("margin")
            if margin is not None:
                row.margins.append(float(margin))
            why = reason(div)
            if why is None:
                row.not_near_ties.append((run["prompt_id"], run["rep"], margin))
            else:
                row.near_ties[why] += 1
            if bound is not None and margin is not None and margin > bound:
                row.above_bound.append((run["prompt_id"], run["rep"], float(margin), int(div.get("index", -1))))
        out.append(row)
    return out


def markdown(rows: list[Row], bound: float | None = None) -> str:
    """The table, then the partings that are not near-ties and those above the bound, by prompt."""
    bound_col = [f"margins above {bound:.3f}"] if bound is not None else []
    head = [
        "suite",
        "row",
        "runs",
        "identical to AR",
        "parted",
        "near-ties: " + " / ".join(REASONS),
        "not near-ties",
        "margin median / max",
        *bound_col,
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ms = r.margins
        cells = [
            r.suite,
            r.label,
            str(r.runs),
            str(r.identical),
            str(r.parted),
            " / ".join(str(r.near_ties[k]) for k in REASONS),
            str(len(r.not_near_ties)),
            f"{statistics.median(ms):.3f} / {max(ms):.3f}" if ms else "–",
            *([str(len(r.above_bound))] if bound is not None else []),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    total = sum(r.runs for r in rows)
    parted = sum(r.parted for r in rows)
    bugs = sum(len(r.not_near_ties) for r in rows)
    lines += ["", f"{parted} of {total} runs parted from AR; {parted - bugs} near-ties, {bugs} not."]
    for r in rows:
        for prompt, rep, margin in r.not_near_ties:
            m = "no margin" if margin is None else f"margin {margin:.3f}"
            lines.append(f"- not a near-tie: {r.suite} {r.label}, {prompt} rep {rep} ({m})")
        for prompt, rep, margin, index in r.above_bound:
            lines.append(
                f"- above the bound: {r.suite} {r.label}, {prompt} rep {rep}, token {index}, margin {margin:.3f}"
            )
    return "\n".join(lines) + "\n"
