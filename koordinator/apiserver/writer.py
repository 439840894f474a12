"""What the server's parts may do with stored objects: the ``ObjectWriter`` interface, and write steps.

Helpers that act on objects on the server's behalf (server-side apply, pod binding and eviction,
the namespace stand-in controllers, the verb handlers) depend on this interface only, never on
the server itself (``app.ApiServer`` implements it), so no helper imports the routing core.

A write runs in steps (``Steps``): a generator that yields the admission webhook calls it needs
(``webhooks.Call``), is sent back their outcome (the mutated object, or None), and returns the
write's result. Writes of the server's own (``admit=False``) never yield (see ``run_steps``).
"""

from __future__ import annotations

from typing import Any, Callable, Generator, Protocol

from koordinator.apiserver import errors
from koordinator.apiserver.options import Options
from koordinator.apiserver.resources import Registry, ResourceType
from koordinator.apiserver.store import Entry, Store
from koordinator.apiserver.webhooks import Call

Obj = dict[str, Any]
Steps = Generator[Call, Any, Any]
# (HTTP status, the stored Entry or a plain object, warnings)
WriteResult = tuple[int, Any, list[str]]

# A write that saw its object change while webhooks were called starts over (GuaranteedUpdate's retry).
MAX_WRITE_ATTEMPTS = 5


class ObjectWriter(Protocol):
    """The server as its helpers see it: the store, the kinds it serves, and its write paths.

    ``*_steps`` methods are write steps that call admission webhooks when ``admit`` is true (a
    client's request); the others write as the server itself.
    """

    store: Store
    registry: Registry
    options: Options

    def get(self, rt: ResourceType, key: str, name: str) -> Entry:
        """The stored entry of ``key``; a 404 naming ``name`` when there is none."""

    def put(self, rt: ResourceType, obj: Obj) -> Entry:
        """Store ``obj`` (already validated) and run the server's derived-state hooks."""

    def remove(self, rt: ResourceType, key: str) -> Entry:
        """Remove ``key`` from the store and run the server's derived-state hooks."""

    def create_steps(self, rt: ResourceType, namespace: str | None, obj: Any, query: dict[str, str],
                     admit: bool = False) -> Steps:
        """Steps of creating ``obj`` in ``namespace``."""

    def check_escalation(self, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        """Forbidden when the client writing a role or binding would grant more than it holds."""

    def update_steps(self, rt: ResourceType, entry: Entry, old: Obj, obj: Obj, sub: str | None,
                     query: dict[str, str], admit: bool = False) -> Steps:
        """Steps of replacing ``entry`` (served as ``old``) by ``obj``; ``sub`` is the subresource written."""

    def delete_object(self, rt: ResourceType, key: str, name: str, options: Any,
                      query: dict[str, str]) -> WriteResult:
        """Delete an object as the server itself (no admission webhooks)."""

    def after_writes(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` before the current batch of writes commits (once per batch)."""


class Stale(Exception):
    """The object changed while the write waited for webhooks: the write starts over."""

    def __init__(self, rt: ResourceType, name: str) -> None:
        super().__init__(name)
        self.rt = rt
        self.name = name


def run_steps(steps: Steps) -> Any:
    """The result of a write that calls no webhooks (``admit=False``)."""
    try:
        next(steps)
    except StopIteration as done:
        return done.value
    steps.close()
    raise RuntimeError("a write of the server's own asked for admission webhooks")


def retrying(attempt: Callable[[], Steps]) -> Steps:
    """Steps of ``attempt()``, started over while the object changes under a webhook call."""
    for n in range(MAX_WRITE_ATTEMPTS):
        try:
            return (yield from attempt())
        except Stale as stale:
            if n == MAX_WRITE_ATTEMPTS - 1:
                raise errors.conflict(stale.rt.plural, stale.name, errors.STALE_OBJECT, stale.rt.group) from None
    raise AssertionError("unreachable")
