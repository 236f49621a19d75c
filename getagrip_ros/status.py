"""Outcome codes shared by every stage (mirrors getagrip_interfaces/msg/Status) and a stage timer."""

from __future__ import annotations

import time
from contextlib import contextmanager
from enum import IntEnum
from typing import Iterator


class StatusCode(IntEnum):
    """Why a stage ended; the values equal the constants of getagrip_interfaces/msg/Status."""

    SUCCEEDED = 0
    INVALID_GOAL = 1
    CANCELED = 2
    TIMEOUT = 3
    NO_RESULT = 4
    HARDWARE_ERROR = 5
    INTERNAL_ERROR = 6
    NOT_IMPLEMENTED = 7
    BUSY = 8


class StageError(Exception):
    """Ends a stage early with a status code and a human-readable reason."""

    def __init__(self, code: StatusCode, reason: str) -> None:
        super().__init__(f"{code.name}: {reason}")
        self.code, self.reason = code, reason


class StageTimer:
    """Wall-clock seconds per named stage, in the order the stages ran."""

    def __init__(self) -> None:
        self.durations_s: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.durations_s[name] = self.durations_s.get(name, 0.0) + time.perf_counter() - start
