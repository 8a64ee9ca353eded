"""One value per process, made on first use (the default-registry metrics of each part)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class ProcessWide(Generic[T]):
    """``make()``'s value, made once however many threads ask at the same moment (a second
    making would register the same metric series twice and fail in that thread)."""

    def __init__(self, make: Callable[[], T]) -> None:
        self.make = make
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        value = self._value
        if value is None:
            with self._lock:
                if self._value is None:
                    self._value = self.make()
                value = self._value
        return value
