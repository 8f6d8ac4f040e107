"""Fixed-capacity numpy ring buffers for the live plots: memory stays bounded on long runs."""

from __future__ import annotations

import numpy as np


class RingBuffer:
    """The newest ``capacity`` rows of a series; each row holds ``width`` floats."""

    def __init__(self, capacity: int, width: int = 1):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.width = width
        self._data = np.zeros((capacity, width), dtype=np.float64)
        self._next = 0  # slot the next row goes to
        self._count = 0  # rows held (<= capacity)
        self.total = 0  # rows ever appended (x coordinates keep counting past wrap-around)

    def __len__(self) -> int:
        return self._count

    def append(self, row) -> None:
        self._data[self._next] = row
        self._next = (self._next + 1) % self.capacity
        self._count = min(self._count + 1, self.capacity)
        self.total += 1

    def extend(self, rows) -> None:
        rows = np.asarray(rows, dtype=np.float64).reshape(-1, self.width)
        if len(rows) >= self.capacity:  # only the newest rows survive
            self.total += len(rows) - self.capacity
            rows = rows[-self.capacity :]
            self._count = 0
            self._next = 0
        for row in rows:
            self.append(row)

    def values(self) -> np.ndarray:
        """Rows oldest first, shape (len, width); a copy, safe to hand to a plot."""
        if self._count < self.capacity:
            return self._data[: self._count].copy()
        return np.concatenate((self._data[self._next :], self._data[: self._next]))

    def column(self, i: int = 0) -> np.ndarray:
        return self.values()[:, i]

    def clear(self) -> None:
        self._next = self._count = self.total = 0
