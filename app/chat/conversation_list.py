"""The stored conversations, newest first; picking one opens it, the context menu deletes it."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QListWidget, QListWidgetItem, QMenu

from .conversations import Conversation

ID_ROLE = Qt.ItemDataRole.UserRole


class ConversationList(QListWidget):
    conversationChosen = Signal(int)
    deleteRequested = Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("conversationList")
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setTextElideMode(Qt.TextElideMode.ElideRight)  # long titles end in "…"; the tooltip has all
        self.setMinimumWidth(120)
        self.customContextMenuRequested.connect(self._menu)
        self.itemClicked.connect(self._clicked)
        self._filling = False

    def set_conversations(self, conversations: list[Conversation], current: int | None) -> None:
        self._filling = True
        self.clear()
        for c in conversations:
            item = QListWidgetItem(c.title)
            item.setData(ID_ROLE, c.id)
            item.setToolTip(f"{c.title}\nlast change {time.strftime('%Y-%m-%d %H:%M', time.localtime(c.updated))}")
            self.addItem(item)
            if c.id == current:
                self.setCurrentItem(item)
        self._filling = False

    def ids(self) -> list[int]:
        return [self.item(i).data(ID_ROLE) for i in range(self.count())]

    def _clicked(self, item: QListWidgetItem) -> None:
        if not self._filling:
            self.conversationChosen.emit(int(item.data(ID_ROLE)))

    def _menu(self, pos) -> None:
        item = self.itemAt(pos)
        if item is None:
            return
        menu = QMenu(self)
        delete = menu.addAction("Delete conversation")
        if menu.exec(self.viewport().mapToGlobal(pos)) is delete:
            self.deleteRequested.emit(int(item.data(ID_ROLE)))
