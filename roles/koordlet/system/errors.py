"""Errors of the host file readers."""

from __future__ import annotations


class SystemFileError(OSError):
    """A host file (proc, sysfs, cgroup) that is missing, unreadable or holds something unexpected.

    The message always names the path and the problem, so a log line is enough to find it.
    """

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem

    def __reduce__(self):  # keep pickling/copying working with the two-argument constructor
        return (type(self), (self.path, self.problem))
