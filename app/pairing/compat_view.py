"""The pairing report: one row per check, PASS / WARN / FAIL, with the reason and the fix."""

from __future__ import annotations

from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QHeaderView, QTreeWidget, QTreeWidgetItem

STATUS_COLOURS = {"PASS": "#1e7b34", "WARN": "#a86400", "FAIL": "#b00020"}
STATUS_BACKGROUNDS = {"PASS": "#e9f6ec", "WARN": "#fff4dc", "FAIL": "#fde7ea"}


class CompatReportView(QTreeWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("compatReport")
        self.setColumnCount(4)
        self.setHeaderLabels(["Status", "Check", "Reason", "Fix"])
        self.setRootIsDecorated(False)
        self.setUniformRowHeights(False)
        self.setWordWrap(True)
        self.setAlternatingRowColors(False)
        h = self.header()
        h.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        h.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        h.setSectionResizeMode(2, QHeaderView.ResizeMode.Interactive)
        h.setStretchLastSection(True)
        self.setColumnWidth(2, 260)
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
        item = QTreeWidgetItem([status, name, reason, fix])
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
        return [tuple(self.topLevelItem(i).text(c) for c in range(4)) for i in range(self.topLevelItemCount())]

    def statuses(self) -> list[str]:
        return [r[0] for r in self.rows()]
