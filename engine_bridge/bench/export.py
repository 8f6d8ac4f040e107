"""Writes a bench report to files: JSON, CSV and Markdown (``report``) and the HTML page (``report_html``).

``report`` builds the report and renders the text formats and the tables; ``report_html`` draws the
page from those tables. Neither imports the other's way round: this module is where both meet.
"""

from __future__ import annotations

from pathlib import Path

from .report import to_csv, to_json, to_markdown
from .report_html import to_html


def write_report(report: dict, *, json_path=None, csv_path=None, md_path=None, html_path=None) -> list[Path]:
    """Writes the formats asked for; returns the paths written."""
    written = []
    for path, render in ((json_path, to_json), (csv_path, to_csv), (md_path, to_markdown), (html_path, to_html)):
        if not path:
            continue
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(render(report), encoding="utf-8")
        written.append(p)
    return written
