"""Waiting on conditions in tests: poll a predicate until it holds or a deadline passes."""

from __future__ import annotations

import time
from typing import Callable

WAIT = 20.0


def wait_until(pred: Callable[[], object], timeout: float = WAIT, interval: float = 0.01,
               message: str = "") -> None:
    """Return once ``pred()`` is truthy; AssertionError (with ``message``) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s" + (f": {message}" if message else ""))
        time.sleep(interval)
