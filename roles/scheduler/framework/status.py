"""Status codes, Status and CycleState: what every extension point returns and shares in one cycle.

Codes and their meaning follow kube-scheduler (``framework.Code``). A ``None`` status means
Success everywhere: plugins return ``None`` on the hot path instead of building objects.
"""

from __future__ import annotations

import copy
from typing import Any

SUCCESS = 0
ERROR = 1
UNSCHEDULABLE = 2
UNSCHEDULABLE_AND_UNRESOLVABLE = 3
WAIT = 4
SKIP = 5
PENDING = 6

CODE_NAMES = {SUCCESS: "Success", ERROR: "Error", UNSCHEDULABLE: "Unschedulable",
              UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable", WAIT: "Wait", SKIP: "Skip",
              PENDING: "Pending"}


class Status:
    """A plugin's verdict: a code, the reasons (user-facing strings) and the plugin that said it."""

    __slots__ = ("code", "reasons", "plugin")

    def __init__(self, code: int = SUCCESS, *reasons: str, plugin: str = "") -> None:
        self.code = code
        self.reasons = list(reasons)
        self.plugin = plugin

    # Helpers that read like kube's framework.NewStatus(code, msg).
    @classmethod
    def error(cls, message: str, plugin: str = "") -> "Status":
        return cls(ERROR, message, plugin=plugin)

    @classmethod
    def unschedulable(cls, *reasons: str, plugin: str = "") -> "Status":
        return cls(UNSCHEDULABLE, *reasons, plugin=plugin)

    @classmethod
    def unresolvable(cls, *reasons: str, plugin: str = "") -> "Status":
        return cls(UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons, plugin=plugin)

    @classmethod
    def skip(cls) -> "Status":
        return cls(SKIP)

    def is_success(self) -> bool:
        return self.code == SUCCESS

    def is_rejected(self) -> bool:
        """Unschedulable, UnschedulableAndUnresolvable or Pending: the pod cannot go there (not an error)."""
        return self.code in (UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE, PENDING)

    def with_plugin(self, plugin: str) -> "Status":
        if not self.plugin:
            self.plugin = plugin
        return self

    def message(self) -> str:
        return ", ".join(self.reasons)

    def __repr__(self) -> str:
        who = f" plugin={self.plugin}" if self.plugin else ""
        return f"Status({CODE_NAMES.get(self.code, self.code)}{who}: {self.message()!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Status) and (self.code, self.reasons) == (other.code, other.reasons)

    __hash__ = None  # type: ignore[assignment]


def is_success(status: Status | None) -> bool:
    return status is None or status.code == SUCCESS


#: CycleState key: annotations DefaultPreBind leaves for DefaultBinder's Binding to carry (the API server
#: puts a Binding's annotations on the pod together with spec.nodeName: one write instead of two).
BINDING_ANNOTATIONS = "DefaultPreBind/bindingAnnotations"


class CycleState:
    """Per-pod scratch space for one scheduling cycle, shared by the plugins (``framework.CycleState``).

    Values written by a plugin under its own key; :meth:`clone` gives preemption a copy it may
    change (values with a ``clone()`` method are cloned, others deep-copied).
    """

    __slots__ = ("_data", "skip_filter_plugins", "skip_score_plugins", "skip_pre_bind_plugins", "record_metrics")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()
        self.skip_pre_bind_plugins: set[str] = set()
        self.record_metrics = False

    def read(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def clone(self) -> "CycleState":
        out = CycleState()
        for k, v in self._data.items():
            cloner = getattr(v, "clone", None)
            out._data[k] = cloner() if callable(cloner) else copy.deepcopy(v)
        out.skip_filter_plugins = set(self.skip_filter_plugins)
        out.skip_score_plugins = set(self.skip_score_plugins)
        out.skip_pre_bind_plugins = set(self.skip_pre_bind_plugins)
        out.record_metrics = self.record_metrics
        return out
