"""The pairing report: one row per check, PASS / WARN / FAIL, with the reason and the fix.

It has to fit the Pair dock at its default width (about 400 px) with every column on screen: the
Reason and Fix columns share the width left after Status and Check and wrap their text (rows grow
instead of the text being cut off), and check names wrap at their underscores.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QPointF, QSize, Qt
from PySide6.QtGui import QBrush, QColor, QTextLayout, QTextOption
from PySide6.QtWidgets import QHeaderView, QStyledItemDelegate, QTreeWidget, QTreeWidgetItem

STATUS_COLOURS = {"PASS": "#1e7b34", "WARN": "#a86400", "FAIL": "#b00020"}
STATUS_BACKGROUNDS = {"PASS": "#e9f6ec", "WARN": "#fff4dc", "FAIL": "#fde7ea"}
#: the check's own name (the shown one may carry wrap points)
NAME_ROLE = Qt.ItemDataRole.UserRole
#: the Check column's width: names longer than this wrap at their underscores
CHECK_WIDTH = 112
ZWSP = "\u200b"  # a zero-width space: a place where a long check name may wrap


def wrappable(name: str) -> str:
    return name.replace("_", "_" + ZWSP)


def wrapped_height(text: str, font, width: int) -> int:
    """Pixels ``text`` takes in ``font`` wrapped to ``width``, the way item views wrap it."""
    layout = QTextLayout(text, font)
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    layout.setTextOption(option)
    layout.beginLayout()
    height = 0.0
    while True:
        line = layout.createLine()
        if not line.isValid():
            break
        line.setLineWidth(max(1, width))
        line.setPosition(QPointF(0, height))
        height += line.height()
    layout.endLayout()
    return math.ceil(height)


class WrappingDelegate(QStyledItemDelegate):
    """Row heights for wrapped text: a tree view asks its delegate for a size without telling it the
    column's width, and the default answer is one line high, so wrapped text was elided instead."""

    #: what the style keeps around an item's text (left + right, top + bottom), in pixels
    H_PADDING, V_PADDING = 10, 4

    def __init__(self, view: QTreeWidget):
        super().__init__(view)
        self.view = view

    def sizeHint(self, option, index) -> QSize:  # noqa: N802 (Qt override)
        base = super().sizeHint(option, index)
        width = self.view.header().sectionSize(index.column()) - self.H_PADDING
        text = index.data() or ""
        font = index.data(Qt.ItemDataRole.FontRole) or option.font
        return QSize(base.width(), max(base.height(), wrapped_height(text, font, width) + self.V_PADDING))


class CompatReportView(QTreeWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("compatReport")
        self.setColumnCount(4)
        self.setHeaderLabels(["Status", "Check", "Reason", "Fix"])
        self.setRootIsDecorated(False)
        self.setUniformRowHeights(False)
        self.setWordWrap(True)
        self.setTextElideMode(Qt.TextElideMode.ElideNone)
        self.setAlternatingRowColors(False)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        h = self.header()
        h.setStretchLastSection(False)
        h.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        h.setSectionResizeMode(1, QHeaderView.ResizeMode.Fixed)
        h.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)  # Reason and Fix share the rest
        h.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        self.setColumnWidth(1, CHECK_WIDTH)
        self.setItemDelegate(WrappingDelegate(self))
        # wrapped rows change height with their column's width: lay the rows out again on a resize
        h.sectionResized.connect(lambda *_: self.scheduleDelayedItemsLayout())
        self.report = None

    def set_report(self, report) -> None:
        """Shows a compat.CompatReport; FAILs first, then WARNs, then PASSes (each in check order)."""
        self.report = report
        self.clear()
        order = {"FAIL": 0, "WARN": 1, "PASS": 2}
        for c in sorted(report.checks, key=lambda c: order.get(c.status, 3)):
            self._add(c.status, c.name, c.reason, c.fix if c.status != "PASS" else "")

    def set_message(self, status: str, name: str, reason: str, fix: str = "") -> None:
        """A single row that is not from a report (the check itself could not run)."""
        self.report = None
        self.clear()
        self._add(status, name, reason, fix)

    def _add(self, status: str, name: str, reason: str, fix: str) -> None:
        item = QTreeWidgetItem([status, wrappable(name), reason, fix])
        item.setData(1, NAME_ROLE, name)
        item.setForeground(0, QBrush(QColor(STATUS_COLOURS.get(status, "#333"))))
        bg = QBrush(QColor(STATUS_BACKGROUNDS.get(status, "#ffffff")))
        for col in range(4):
            item.setBackground(col, bg)
            item.setToolTip(col, f"{status} {name}\n{reason}" + (f"\nfix: {fix}" if fix else ""))
        f = item.font(0)
        f.setBold(True)
        item.setFont(0, f)
        self.addTopLevelItem(item)

    def rows(self) -> list[tuple[str, str, str, str]]:
        """(status, check name, reason, fix) of every row, as the report has them."""
        out = []
        for i in range(self.topLevelItemCount()):
            it = self.topLevelItem(i)
            out.append((it.text(0), it.data(1, NAME_ROLE), it.text(2), it.text(3)))
        return out

    def statuses(self) -> list[str]:
        return [r[0] for r in self.rows()]
