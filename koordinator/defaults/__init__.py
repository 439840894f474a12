"""The defaults a cluster install puts in place, shipped with the package for ``koordinator local``.

``kubectl apply -k manifests`` installs the default ConfigMaps its kustomization lists from
``manifests/config/`` (into ``koordinator-system``) and the ``koord-prod/mid/batch/free``
PriorityClasses of ``manifests/priorityclasses.yaml``. ``koordinator local`` installs the same
objects, also from an installed package, which has no ``manifests/``: so the files live here as package
data, byte for byte those files of ``manifests/`` (``config/NAME.yaml`` and ``priorityclasses.yaml``;
tests/test_local.py fails on any difference, or when the kustomization lists another one, so edit both
or copy one onto the other).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

# Paths relative to this package and to manifests/, in the order local installs them.
CONFIG_DIR = "config"
PRIORITY_CLASSES = "priorityclasses.yaml"


def files() -> dict[str, str]:
    """Relative path (as under ``manifests/``) -> text of every default manifest shipped here."""
    root = resources.files(__name__)
    out: dict[str, str] = {}
    for entry in sorted(root.joinpath(CONFIG_DIR).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            out[f"{CONFIG_DIR}/{entry.name}"] = entry.read_text(encoding="utf-8")
    out[PRIORITY_CLASSES] = root.joinpath(PRIORITY_CLASSES).read_text(encoding="utf-8")
    return out


def objects() -> list[dict[str, Any]]:
    """Every default object (the ConfigMaps first, then the PriorityClasses), parsed."""
    import yaml

    out: list[dict[str, Any]] = []
    for text in files().values():
        out += [doc for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]
    return out
