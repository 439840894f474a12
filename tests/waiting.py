"""Waiting on conditions in tests: poll a predicate until it holds or a deadline passes."""

from __future__ import annotations

import time
from typing import Any, Callable

WAIT = 20.0


def wait_until(pred: Callable[[], Any], timeout: float = WAIT, message: str = "", interval: float = 0.01) -> Any:
    """Return ``pred()``'s first truthy value; AssertionError naming ``message`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s" + (f" waiting for {message}" if message else ""))
        time.sleep(interval)
