"""Parsing the upstream plugins' args (``descheduler/v1alpha2 <Name>Args``) into typed values.

Every upstream plugin validates its args the way sigs.k8s.io/descheduler does (at most one of
``namespaces.include``/``namespaces.exclude``, a valid ``labelSelector`` ...). Our errors are
``ValueError`` texts that start with the plugin and the field so a bad configuration is easy to find,
and keep upstream's wording after it (e.g. ``RemovePodsHavingTooManyRestarts args: podRestartThreshold:
invalid PodsHavingTooManyRestarts threshold 0 (must be at least 1)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from koordinator.apis.selectors import LabelSelector, SelectorError, label_selector_from_dict


class ArgsReader:
    """Reads one plugin's raw args dict field by field, raising ``ValueError`` naming the field.

    ``known`` lists the fields the plugin accepts; :meth:`finish` rejects any other key (a typo in a
    config should not silently change behaviour).
    """

    def __init__(self, plugin: str, raw: Mapping[str, Any] | None, known: Iterable[str], prefix: str = "") -> None:
        if raw is not None and not isinstance(raw, Mapping):
            raise ValueError(f"{plugin} args: must be an object, got {type(raw).__name__}")
        self.plugin = plugin
        self.prefix = prefix
        self.raw: Mapping[str, Any] = raw or {}
        self.known = set(known)

    def error(self, field: str, message: str) -> ValueError:
        """A ValueError ``<plugin> args: <field>: <message>``."""
        return ValueError(f"{self.plugin} args: {self.prefix}{field}: {message}")

    def finish(self) -> None:
        """Reject fields the plugin does not know (``apiVersion``/``kind`` of an embedded args object are fine)."""
        unknown = sorted(set(self.raw) - self.known - {"apiVersion", "kind"})
        if unknown:
            raise ValueError(f"{self.plugin} args: unknown field {unknown[0]!r}")

    def bool(self, field: str, default: bool = False) -> bool:
        """A boolean (None stays ``default``)."""
        value = self.raw.get(field)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(field, f"must be a boolean, got {value!r}")
        return value

    def int(self, field: str, default: int | None = None, *, minimum: int | None = None) -> int | None:
        """An integer (None stays ``default``); ``minimum`` mirrors Go's unsigned fields (uint → 0)."""
        value = self.raw.get(field)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(field, f"must be an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(field, f"must be at least {minimum}, got {value}")
        return value

    def strings(self, field: str) -> tuple[str, ...]:
        """A list of strings (absent/null: empty)."""
        value = self.raw.get(field)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(field, f"must be a list of strings, got {value!r}")
        return tuple(value)

    def ints(self, field: str) -> tuple[int, ...]:
        """A list of integers (absent/null: empty)."""
        value = self.raw.get(field)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise self.error(field, f"must be a list of integers, got {value!r}")
        return tuple(value)

    def one_of(self, field: str, values: tuple[str, ...], allowed: Iterable[str], what: str = "states") -> None:
        """Every entry of ``values`` is in ``allowed`` (upstream: ``<what> must be one of [...]``)."""
        allowed = sorted(set(allowed))
        bad = [v for v in values if v not in allowed]
        if bad:
            raise self.error(field, f"{bad[0]!r}: {what} must be one of [{' '.join(allowed)}]")

    def namespaces(self, field: str = "namespaces") -> "Namespaces":
        """``namespaces``-style include/exclude lists; at most one of them may be set."""
        value = self.raw.get(field)
        if value is None:
            return Namespaces()
        if not isinstance(value, Mapping):
            raise self.error(field, f"must be an object with include/exclude, got {value!r}")
        unknown = sorted(set(value) - {"include", "exclude"})
        if unknown:
            raise self.error(field, f"unknown field {unknown[0]!r}")
        sub = ArgsReader(self.plugin, value, ("include", "exclude"), prefix=f"{self.prefix}{field}.")
        include = sub.strings("include")
        exclude = sub.strings("exclude")
        if include and exclude:
            raise self.error(field, "only one of Include/Exclude namespaces can be set")
        return Namespaces(frozenset(include), frozenset(exclude))

    def label_selector(self, field: str = "labelSelector") -> LabelSelector | None:
        """``metav1.LabelSelector`` or None (absent: no label filtering)."""
        value = self.raw.get(field)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self.error(field, f"must be a LabelSelector object, got {value!r}")
        try:
            return label_selector_from_dict(value)
        except SelectorError as e:
            raise self.error(field, f"failed to get label selectors from strategy's params: {e}") from None


@dataclass(frozen=True)
class Namespaces:
    """``namespaces.include`` / ``namespaces.exclude`` (at most one is non-empty)."""

    include: frozenset[str] = frozenset()
    exclude: frozenset[str] = frozenset()

    def allows(self, namespace: str) -> bool:
        """Whether a pod in ``namespace`` is in scope."""
        if self.include:
            return namespace in self.include
        return namespace not in self.exclude
