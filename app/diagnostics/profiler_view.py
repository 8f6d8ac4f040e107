"""The per-step table: every step record of the session, filterable, exportable to CSV and JSON.

The filter box takes either numeric conditions on columns (``accepted>=3, verify_ms>2``; all must
hold) or, failing that, text that any cell must contain. Exports write the rows the filter shows,
with the columns of ``StepRecord.to_dict()`` plus the run they belong to and where it came from:
"chat" (a chat turn) or "served" (a request to the local server, app.serve; served runs are
numbered apart from chat turns).
"""

from __future__ import annotations

import csv
import json
import operator
import re
from pathlib import Path

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtWidgets import QHBoxLayout, QHeaderView, QLabel, QLineEdit, QPushButton, QTableView, QVBoxLayout, QWidget

from engine_bridge.runtime.records import PHASES

from ..common.save_dialogs import ask_save_path

#: (header, key, how to read it off a (run, StepRecord) row)
COLUMNS = [
    ("run", "run", lambda run, r: run),
    ("step", "step", lambda run, r: r.step),
    ("pos", "pos", lambda run, r: r.pos),
    ("drafted", "drafted", lambda run, r: r.drafted),
    ("accepted", "accepted", lambda run, r: r.accepted),
    ("committed", "committed", lambda run, r: r.committed),
    *[(f"{p} ms", f"{p}_ms", (lambda p: lambda run, r: getattr(r, f"t_{p}") * 1000.0)(p)) for p in PHASES],
    ("wall ms", "wall_ms", lambda run, r: r.wall * 1000.0),
    ("tok/s", "tok_per_s", lambda run, r: r.tok_per_s),
    ("tree nodes", "tree_nodes", lambda run, r: r.tree_nodes),  # 0 outside tree verification
    ("tree depth", "tree_depth", lambda run, r: r.tree_depth),
    ("path len", "path_len", lambda run, r: r.path_len),  # tree mode: accepted path length
    ("first token", "first_token", lambda run, r: int(r.prefill)),  # 1: step 0, the prefill's pick
    ("from", "source", None),  # "chat" or "served": kept in the row
]
KEYS = [c[1] for c in COLUMNS]
SOURCE = KEYS.index("source")
NUMERIC_KEYS = [k for k in KEYS if k != "source"]
SORT_ROLE = Qt.ItemDataRole.UserRole

_OPS = {
    ">=": operator.ge,
    "<=": operator.le,
    "!=": operator.ne,
    "==": operator.eq,
    "=": operator.eq,
    ">": operator.gt,
    "<": operator.lt,
}
_COND = re.compile(r"^\s*([a-z_/ ]+?)\s*(>=|<=|!=|==|=|>|<)\s*(-?[0-9.]+)\s*$", re.I)


def parse_conditions(text: str):
    """``accepted>=3, wall_ms<10`` -> [(column index, op, value)]; None when it is not that form."""
    parts = [p for p in re.split(r",|\band\b", text) if p.strip()]
    if not parts:
        return None
    conds = []
    for part in parts:
        m = _COND.match(part)
        if not m:
            return None
        name = m.group(1).strip().lower().replace(" ", "_").replace("/", "_per_")
        if name not in NUMERIC_KEYS:
            return None
        conds.append((KEYS.index(name), _OPS[m.group(2)], float(m.group(3))))
    return conds


class StepTableModel(QAbstractTableModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows: list[tuple[int, object, str]] = []  # (run, StepRecord, "chat" | "served")

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section][0]
        return None

    def value(self, row: int, col: int):
        run, rec, source = self.rows[row]
        return source if col == SOURCE else COLUMNS[col][2](run, rec)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            v = self.value(index.row(), index.column())
            return f"{v:.3f}" if isinstance(v, float) else str(v)
        if role == SORT_ROLE:
            return self.value(index.row(), index.column())
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def add(self, run: int, records, source: str = "chat") -> None:
        if not records:
            return
        first = len(self.rows)
        self.beginInsertRows(QModelIndex(), first, first + len(records) - 1)
        self.rows.extend((run, r, source) for r in records)
        self.endInsertRows()

    def clear(self) -> None:
        self.beginResetModel()
        self.rows.clear()
        self.endResetModel()


class StepFilter(QSortFilterProxyModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)
        self._conds = None
        self._text = ""

    def set_filter(self, text: str) -> None:
        self.beginFilterChange()
        self._conds = parse_conditions(text)
        self._text = "" if self._conds is not None else text.strip().lower()
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    @property
    def numeric(self) -> bool:
        return self._conds is not None

    def filterAcceptsRow(self, row: int, parent) -> bool:  # noqa: N802
        m: StepTableModel = self.sourceModel()
        if self._conds is not None:
            return all(op(m.value(row, col), val) for col, op, val in self._conds)
        if not self._text:
            return True
        return any(self._text in m.data(m.index(row, c)).lower() for c in range(len(COLUMNS)))

    def visible_rows(self) -> list[tuple[int, object, str]]:
        m: StepTableModel = self.sourceModel()
        return [m.rows[self.mapToSource(self.index(i, 0)).row()] for i in range(self.rowCount())]


def _row_dict(run: int, rec, source: str = "chat") -> dict:
    """One exported row, in the table's units and names: times in ms (draft_ms, ..., wall_ms), as the
    table and its filter show them, not the record's seconds."""
    d = {"run": run, "source": source}
    for key, value in rec.to_dict().items():
        if key.startswith("t_"):
            d[f"{key[2:]}_ms"] = value * 1000.0
        elif key == "wall":
            d["wall_ms"] = value * 1000.0
        else:
            d[key] = value
    return d


def export_csv(rows, path: str | Path) -> int:
    dicts = [_row_dict(*row) for row in rows]
    fields = list(dicts[0]) if dicts else ["run"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(dicts)
    return len(dicts)


def export_json(rows, path: str | Path) -> int:
    dicts = [_row_dict(*row) for row in rows]
    Path(path).write_text(json.dumps(dicts, indent=1))
    return len(dicts)


class ProfilerView(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("profilerView")
        self.model = StepTableModel(self)
        self.proxy = StepFilter(self)
        self.proxy.setSourceModel(self.model)
        self.table = QTableView(self, objectName="profilerTable")
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(-1, Qt.SortOrder.AscendingOrder)  # arrival order until a header is clicked
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.setAlternatingRowColors(True)
        self.filter_edit = QLineEdit(self, objectName="profilerFilter")
        self.filter_edit.setPlaceholderText("filter: text, or conditions like accepted>=3, verify_ms>2")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.textChanged.connect(self._filter)
        self.count_label = QLabel(self, objectName="profilerCount")
        csv_button = QPushButton("Export CSV…", self, objectName="exportCsvButton")
        json_button = QPushButton("Export JSON…", self, objectName="exportJsonButton")
        clear_button = QPushButton("Clear", self, objectName="clearProfilerButton")
        csv_button.clicked.connect(lambda: self._export("csv"))
        json_button.clicked.connect(lambda: self._export("json"))
        clear_button.clicked.connect(self.clear)
        top = QHBoxLayout()
        top.addWidget(self.filter_edit, 1)
        top.addWidget(self.count_label)
        top.addWidget(csv_button)
        top.addWidget(json_button)
        top.addWidget(clear_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.table, 1)
        self.model.rowsInserted.connect(self._count)
        self.model.modelReset.connect(self._count)
        self._count()

    def add_steps(self, run: int, records, source: str = "chat") -> None:
        self.model.add(run, records, source)

    def clear(self) -> None:
        self.model.clear()

    def row_count(self) -> int:
        return self.proxy.rowCount()

    def _filter(self, text: str) -> None:
        self.proxy.set_filter(text)
        self.filter_edit.setToolTip("numeric conditions" if self.proxy.numeric else "text match")
        self._count()

    def _count(self, *args) -> None:
        self.count_label.setText(f"{self.proxy.rowCount()} / {self.model.rowCount()} steps")

    def export(self, path: str | Path) -> int:
        """Writes the visible rows; the format follows the suffix (.json, else CSV)."""
        rows = self.proxy.visible_rows()
        return export_json(rows, path) if str(path).lower().endswith(".json") else export_csv(rows, path)

    def _export(self, kind: str) -> None:
        path = ask_save_path(self, f"Export steps as {kind.upper()}", f"steps.{kind}", f"{kind.upper()} (*.{kind})")
        if path:
            if not path.lower().endswith(f".{kind}"):
                path += f".{kind}"
            self.export(path)
