"""The defaults a cluster install puts in place, shipped with the package for ``koordinator local``.

``kubectl apply -k manifests`` installs the default ConfigMaps its kustomization lists from
``manifests/config/`` (into ``koordinator-system``) and the ``koord-prod/mid/batch/free``
PriorityClasses of ``manifests/priorityclasses.yaml``. ``koordinator local`` installs the same
objects, also from an installed package, which has no ``manifests/``: so the files live here as package
data, byte for byte those files of ``manifests/`` (``config/NAME.yaml`` and ``priorityclasses.yaml``;
tests/test_local.py fails on any difference, or when the kustomization lists another one, so edit both
or copy one onto the other).

``rbac/NAME.yaml`` are, byte for byte, ``manifests/rbac/NAME.yaml`` (the roles' ServiceAccounts,
ClusterRoles and bindings): ``koordinator local`` applies them and runs each role as its own
ServiceAccount, so that a role lacking a permission fails locally (tests/test_local_rbac.py pins them equal).

``local/kube-stand-ins.yaml`` (no counterpart in ``manifests/``: a cluster has its own) gives the
identities of what ``koordinator local`` runs in place of Kubernetes' components: the workload
controllers and the node simulator.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

# Paths relative to this package and to manifests/, in the order local installs them.
CONFIG_DIR = "config"
PRIORITY_CLASSES = "priorityclasses.yaml"
RBAC_DIR = "rbac"
LOCAL_STAND_INS = "local/kube-stand-ins.yaml"


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


def rbac_files() -> dict[str, str]:
    """Relative path (as under ``manifests/``, ``rbac/NAME.yaml``) -> text of every RBAC manifest shipped here."""
    root = resources.files(__name__).joinpath(RBAC_DIR)
    return {f"{RBAC_DIR}/{e.name}": e.read_text(encoding="utf-8")
            for e in sorted(root.iterdir(), key=lambda e: e.name) if e.name.endswith(".yaml")}


def rbac_objects() -> list[dict[str, Any]]:
    """Every RBAC object of the roles (ServiceAccounts, (Cluster)Roles, bindings), parsed, in file order."""
    import yaml

    out: list[dict[str, Any]] = []
    for text in rbac_files().values():
        out += [doc for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]
    return out


def local_stand_in_objects() -> list[dict[str, Any]]:
    """The ServiceAccounts, ClusterRoles and bindings of local's controllers and node simulator, parsed."""
    import yaml

    text = resources.files(__name__).joinpath(LOCAL_STAND_INS).read_text(encoding="utf-8")
    return [doc for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]
