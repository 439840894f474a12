"""Small helpers over plain-dict Kubernetes objects shared by the server's modules."""

from __future__ import annotations

import re
import secrets
import uuid
from datetime import datetime, timezone
from typing import Any

import yaml

Obj = dict[str, Any]

# Kubernetes' generateName alphabet: no vowels (no words), no confusable characters.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_uid() -> str:
    return str(uuid.uuid4())


def generate_name(prefix: str) -> str:
    return prefix[:58] + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))


def meta(obj: Obj) -> Obj:
    m = obj.get("metadata")
    if not isinstance(m, dict):
        m = {}
        obj["metadata"] = m
    return m


def without(obj: Obj, *keys: str) -> Obj:
    return {k: v for k, v in obj.items() if k not in keys}


def spec_part(obj: Obj) -> Obj:
    """Everything generation tracks: the object minus metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def condition(obj: Obj, ctype: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def set_condition(obj: Obj, cond: Obj) -> None:
    status = obj.setdefault("status", {})
    conds = status.setdefault("conditions", [])
    for i, c in enumerate(conds):
        if c.get("type") == cond["type"]:
            if c.get("status") == cond.get("status"):
                cond = {**cond, "lastTransitionTime": c.get("lastTransitionTime", cond.get("lastTransitionTime"))}
            conds[i] = {**c, **cond}
            return
    conds.append(cond)


class _StringTimestampLoader(yaml.SafeLoader):
    """YAML loader that resolves scalars as Kubernetes' YAML decoding (go-yaml) does.

    Timestamps stay strings, and so do YAML 1.1 base-60 numbers: go-yaml has no sexagesimal
    ints or floats, so a PCI bus ID such as ``0000:47:00.0`` must not become ``10020.0``.
    """


def _go_yaml_resolver(tag: str, rx: re.Pattern[str]) -> tuple[str, re.Pattern[str]]:
    if tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
        return tag, re.compile(r"(?!.*:)" + rx.pattern, rx.flags)
    return tag, rx


_StringTimestampLoader.yaml_implicit_resolvers = {
    k: [_go_yaml_resolver(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_yaml(text: str | bytes) -> Any:
    return yaml.load(text, Loader=_StringTimestampLoader)


def load_yaml_documents(text: str | bytes) -> list[Any]:
    return [d for d in yaml.load_all(text, Loader=_StringTimestampLoader) if d is not None]
