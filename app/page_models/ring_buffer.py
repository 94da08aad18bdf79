"""Fixed-size time series for live charts: preallocated, no copies on read."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


class RingBuffer:
    """``capacity`` samples of ``n_series`` values plus a timestamp.

    Every sample is written twice (at ``i`` and ``i + capacity``), so the last
    ``n`` samples are always one contiguous slice: reading is a view, not a copy.
    """

    def __init__(self, capacity: int, n_series: int) -> None:
        if capacity < 1 or n_series < 1:
            raise ValueError("capacity and n_series must be positive")
        self.capacity = capacity
        self._t = np.zeros(2 * capacity, dtype=np.float64)
        self._v = np.full((n_series, 2 * capacity), np.nan, dtype=np.float64)
        self._next = 0
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def append(self, t: float, values: npt.ArrayLike) -> None:
        i = self._next
        row = np.asarray(values, dtype=np.float64)
        self._t[i] = self._t[i + self.capacity] = t
        self._v[:, i] = self._v[:, i + self.capacity] = row
        self._next = (i + 1) % self.capacity
        self._count = min(self._count + 1, self.capacity)

    def _window(self) -> slice:
        end = self._next + self.capacity if self._count == self.capacity else self._next
        return slice(end - self._count, end)

    def times(self) -> npt.NDArray[np.float64]:
        return self._t[self._window()]

    def series(self, index: int) -> npt.NDArray[np.float64]:
        return self._v[index, self._window()]

    def last(self, index: int) -> float:
        if not self._count:
            return float("nan")
        return float(self._v[index, (self._next - 1) % self.capacity])

    def clear(self) -> None:
        self._next = self._count = 0
        self._v.fill(np.nan)
