"""Text that comes from outside (file names, model names, error messages) shown as text.

A QLabel and a tooltip guess whether a string is rich text (Qt::mightBeRichText): a file named
``<font size=7>…`` would restyle the window and show fake text. Labels that show such strings are
set to plain text; tooltips, which have no such switch, get the string escaped.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt


def plain(*labels) -> None:
    """Sets each QLabel to show its text literally."""
    for label in labels:
        label.setTextFormat(Qt.TextFormat.PlainText)


def plain_tip(text: str) -> str:
    """A tooltip that shows ``text`` literally, line breaks kept."""
    if not text:
        return ""
    return "<qt>" + html.escape(text).replace("\n", "<br>") + "</qt>"
