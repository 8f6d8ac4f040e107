"""Writes a bench report to files: JSON, CSV and Markdown (``report``) and the HTML page (``report_html``).

``report`` builds the report and renders the text formats and the tables; ``report_html`` draws the
page from those tables. Neither imports the other's way round: this module is where both meet.
"""

from __future__ import annotations

import os
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
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            _write_atomically(p, render(report))
        except OSError as exc:  # named by the report's path, whatever part of it failed
            why = exc.strerror or str(exc)
            if exc.filename and str(exc.filename) != str(p):
                why += f" ({exc.filename})"
            raise OSError(exc.errno, why, str(p)) from exc
        written.append(p)
    return written


def _write_atomically(path: Path, text: str) -> None:
    """Through a temporary file beside it and a rename: a full disk leaves the old report whole and
    no half-written one behind."""
    tmp = path.with_name(f".{path.name}.part")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
