"""Logging a recurring problem once: a warning when it starts or changes, an info line when it is over."""

from __future__ import annotations

import logging


class TaskProblem:
    """The current problem of one periodic task (a reporter's round), logged only when it changes."""

    def __init__(self, log: logging.Logger, what: str) -> None:
        self.log = log
        self.what = what
        self.current: str | None = None

    def problem(self, message: str) -> None:
        if message != self.current:
            self.log.warning("%s: %s", self.what, message)
            self.current = message

    def ok(self) -> None:
        if self.current is not None:
            self.log.info("%s works again", self.what)
            self.current = None
