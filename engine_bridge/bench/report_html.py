"""The bench report as one self-contained HTML page: tables plus PNG plots embedded as base64.

Self-contained means no scripts, stylesheets or images fetched from anywhere: the page can be
mailed, attached to an issue or opened offline years later. Plots are drawn with matplotlib's
Agg canvas on a private Figure (no pyplot state), so this is safe off the GUI thread.
"""

from __future__ import annotations

import base64
import html
import io

from .report import context_lines, phase_table, prompt_table, summary_table
from ..runtime.records import PHASES

#: Plot ids, in page order, with their captions.
PLOTS = {
    "tokps": "Decode tok/s per configuration (bars: mean; whiskers: bootstrap 95% interval)",
    "commit_hist": "Tokens committed per step (speculative rows; all steps of all runs)",
    "phases": "Mean step time by phase (ms per step)",
}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-variant-numeric:tabular-nums}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}th{background:#f3f3f3}
td:nth-child(-n+3),th:nth-child(-n+3){text-align:left}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px}dt{font-weight:600}dd{margin:0}
figure{margin:1em 0}figcaption{color:#555}.real{color:#0a6b20;font-weight:600}.bad{color:#b00020}
"""


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=96)
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def plot_tokps(report: dict) -> bytes:
    rows = [r for r in report["rows"] if r["avg_ts"] is not None]
    fig = _figure(8, 0.5 + 0.45 * max(2, len(rows)))
    ax = fig.add_subplot()
    if rows:
        y = list(range(len(rows)))[::-1]
        means = [r["avg_ts"] for r in rows]
        err = [[m - r["ts_ci_lo"] for m, r in zip(means, rows)], [r["ts_ci_hi"] - m for m, r in zip(means, rows)]]
        colors = ["#888888" if r["kind"] == "ar" else "#1f77b4" for r in rows]
        ax.barh(y, means, xerr=err, color=colors, capsize=4)
        ax.set_yticks(y, [f"{r['id']}: {r['label']}" for r in rows])
        ax.set_xlabel("tok/s")
    else:
        ax.text(0.5, 0.5, "no finished rows", ha="center", va="center", transform=ax.transAxes)
    return _png(fig)


def plot_commit_hist(report: dict) -> bytes:
    rows = [r for r in report["rows"] if r["kind"] == "spec" and r["commit_hist"]]
    fig = _figure(8, 3.2)
    ax = fig.add_subplot()
    if rows:
        lens = sorted({int(k) for r in rows for k in r["commit_hist"]})
        w = 0.8 / len(rows)
        for i, r in enumerate(rows):
            total = sum(r["commit_hist"].values())
            ax.bar(
                [n - 0.4 + w * (i + 0.5) for n in lens],
                [r["commit_hist"].get(str(n), 0) / total for n in lens],
                width=w,
                label=f"{r['id']}: {r['label']}",
            )
        ax.set_xticks(lens)
        ax.set_xlabel("tokens committed in one step")
        ax.set_ylabel("share of steps")
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no speculative steps", ha="center", va="center", transform=ax.transAxes)
    return _png(fig)


def plot_phases(report: dict) -> bytes:
    rows = [r for r in report["rows"] if r["avg_ts"] is not None]
    fig = _figure(8, 0.8 + 0.45 * max(2, len(rows)))
    ax = fig.add_subplot()
    if rows:
        y = list(range(len(rows)))[::-1]
        left = [0.0] * len(rows)
        for p in PHASES:
            vals = [r[f"phase_{p}_ms"] or 0.0 for r in rows]
            ax.barh(y, vals, left=left, label=p)
            left = [a + b for a, b in zip(left, vals)]
        ax.set_yticks(y, [f"{r['id']}: {r['label']}" for r in rows])
        ax.set_xlabel("ms per step")
        # above the axes: inside, it would hide the longest bar
        ax.legend(fontsize=8, ncols=len(PHASES), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    else:
        ax.text(0.5, 0.5, "no finished rows", ha="center", va="center", transform=ax.transAxes)
    return _png(fig)


PLOTTERS = {"tokps": plot_tokps, "commit_hist": plot_commit_hist, "phases": plot_phases}


def _table(headers: list[str], rows: list[list[str]], flag_col: int | None = None) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for i, c in enumerate(row):
            cls = ""
            if i == flag_col and c.startswith("real"):
                cls = ' class="real"'
            elif c == "NO" or c.startswith("failed"):
                cls = ' class="bad"'
            cells.append(f"<td{cls}>{e(c)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def to_html(report: dict) -> str:
    e = html.escape
    headers, rows = summary_table(report)
    ctx = "".join(f"<dt>{e(k)}</dt><dd>{e(str(v))}</dd>" for k, v in context_lines(report))
    figs = []
    for key, caption in PLOTS.items():
        data = base64.b64encode(PLOTTERS[key](report)).decode("ascii")
        figs.append(
            f'<figure id="plot-{key}"><img alt="{e(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{e(caption)}</figcaption></figure>"
        )
    notes = "".join(f"<li>{e(r['id'])}: {e(n)}</li>" for r in report["rows"] for n in r["notes"])
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>DFlash Studio bench — {e(report['settings']['suite']['name'])}</title>",
            f"<style>{CSS}</style></head><body>",
            "<h1>DFlash Studio bench</h1>",
            f"<dl>{ctx}</dl>",
            "<h2>Results</h2>",
            _table(headers, rows, flag_col=headers.index("verdict")),
            f"<ul>{notes}</ul>" if notes else "",
            *figs,
            "<h2>Step phases (mean per step)</h2>",
            _table(*phase_table(report)),
            "<h2>Per prompt</h2>",
            _table(*prompt_table(report)),
            f"<p><small>schema {e(report['schema'])} · dflash-studio {e(report['tool']['version'])}</small></p>",
            "</body></html>",
            "",
        ]
    )
