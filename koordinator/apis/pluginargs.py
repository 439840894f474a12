"""Reading plugin args (the scheduler's and the descheduler's ``<Plugin>Args``) with kube's error wording."""

from __future__ import annotations

from typing import Any, Mapping


def bool_arg(args: Mapping[str, Any], key: str, default: bool = False) -> bool:
    """``args[key]`` as a boolean (``default`` when absent or null); ValueError naming the field otherwise."""
    v = args.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise ValueError(f"{key}: Invalid value: {v!r}: must be a boolean")
    return v
