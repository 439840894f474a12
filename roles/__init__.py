"""One package per role, and the contract between a role package and the code that runs it.

A role package (``koordinator_roles.manager``, ``koordinator_roles.scheduler`` ...) exposes:

``register(runtime, options)`` (required; the CLI calls ``check_options`` first, when there is one)
    Adds the role's controllers, webhooks and runnables to the
    :class:`koordinator.runtime.runtime.Runtime`. ``options`` is the
    :class:`~koordinator.runtime.options.RuntimeOptions` of the shared flags; the role's own flags are
    ``options.role_options``, an instance of the role's ``Options`` (None for a role without flags of
    its own), so ``register`` is typed by annotating ``options: RuntimeOptions[ManagerOptions]``.

``add_flags(group)`` and ``Options`` (together, or neither)
    ``add_flags`` adds the role's own flags to the argument parser; ``Options`` is a dataclass with one
    field per flag ``dest`` (``--webhook-port`` -> ``webhook_port``). The CLI builds it from the parsed
    flags; a flag without a field is an error. A field that no flag sets must have a default: it holds
    what ``check_options`` derives for ``register`` (the scheduler's loaded ``--config``), so that
    nothing passes from ``check_options`` to ``register`` outside ``options``.

``check_options(options)`` (optional)
    Raises ValueError, naming the flag and the value, for a bad flag or combination of flags; the CLI
    reports it as a usage error (exit 2). It may complete ``options`` (values read from ``--config``).

``local_setup(context) -> LocalSetup`` (optional)
    What the role needs to run in ``koordinator local`` (:mod:`koordinator.local`) beyond the shared
    flags, which ``local`` always passes (``--kubeconfig``, ``--metrics-addr``, ``--health-addr``,
    ``--log-level``, and to a node role ``--node-name``: the first simulated Node, unless
    :attr:`LocalSetup.node_flags` asks for an instance per Node). Called once per start, after the API
    server, the ``koordinator-system`` namespace, the default objects and the simulated Nodes exist and
    before any role starts. The hook creates or updates what the role finds in a real cluster's install
    (through ``context.client``: only the role knows what to keep of an existing object), writes the
    files it needs under ``context.data_dir``, and returns its extra flags, environment, per-node
    instances and readiness conditions as a :class:`LocalSetup`. ``local`` imports no role package
    itself: this hook is how it learns the specifics (an import-linter contract keeps it so).

A role whose package is missing is "not implemented in this build": ``koordinator --role=R`` says so
and exits 1, ``koordinator local`` shows it as ``not implemented yet``.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from koordinator.runtime.client import Client

ROLE_PACKAGES = {
    "manager": "koordinator_roles.manager",
    "scheduler": "koordinator_roles.scheduler",
    "koordlet": "koordinator_roles.koordlet",
    "descheduler": "koordinator_roles.descheduler",
    "device-daemon": "koordinator_roles.device_daemon",
    "runtime-proxy": "koordinator_roles.runtime_proxy",
}


@dataclass(frozen=True)
class SimulatedNode:
    """A Node of ``koordinator local`` and the roots of its simulated host trees (``koordinator.sim``)."""

    name: str
    proc_root: Path
    sys_root: Path
    cgroup_root: Path


@dataclass(frozen=True)
class LocalContext:
    """What ``koordinator local`` tells a role's ``local_setup`` about the cluster it is about to run it in."""

    #: A client of the API server, open while ``local`` runs (also for :attr:`LocalSetup.ready_checks`).
    client: Client
    #: The kubeconfig every child gets.
    kubeconfig: Path
    #: ``local``'s data directory; a role keeps its files under a name of its own there.
    data_dir: Path
    #: Where Koordinator runs (``koordinator-system``): its pods' ``POD_NAMESPACE``.
    namespace: str
    #: The simulated Nodes, in order (empty with ``--nodes 0``).
    nodes: tuple[SimulatedNode, ...]
    #: The roles ``local`` starts this time (a role may depend on another one running).
    roles: tuple[str, ...]
    #: A loopback TCP port nothing listens on now, for a server the role is told to bind.
    free_port: Callable[[], int]


@dataclass
class LocalSetup:
    """A role's answer to :class:`LocalContext`: how ``koordinator local`` runs it (all optional)."""

    #: Appended to the role's command line, after the shared flags.
    flags: list[str] = field(default_factory=list)
    #: Added to the role's environment (``local``'s own environment otherwise).
    env: dict[str, str] = field(default_factory=dict)
    #: None: one instance. Else one instance per Node named here, each with ``--node-name NODE`` and then
    #: these flags of its own (before :attr:`flags`).
    node_flags: dict[str, list[str]] | None = None
    #: What else ``local`` waits for before it says ``up``, once every child is ready: name -> a check
    #: returning None when met, else why not (shown as ``name (why)``). A met check is not run again.
    ready_checks: dict[str, Callable[[], str | None]] = field(default_factory=dict)
    #: Non-empty: ``local`` does not run the role, and shows this as the reason (a role that needs
    #: what a local cluster lacks, such as a container runtime).
    not_run: str = ""


def _package(role: str) -> str:
    try:
        return ROLE_PACKAGES[role]
    except KeyError:
        raise ValueError(f"unknown role {role!r} (one of {', '.join(ROLE_PACKAGES)})") from None


def is_implemented(role: str) -> bool:
    """Whether this build has the role's package (found without importing it)."""
    return importlib.util.find_spec(_package(role)) is not None


def implemented_roles() -> list[str]:
    """The roles this build has, in ``ROLE_PACKAGES`` order."""
    return [role for role in ROLE_PACKAGES if is_implemented(role)]


def load(role: str) -> ModuleType | None:
    """The role's package, or None if this build lacks it. Errors inside an existing package propagate."""
    if not is_implemented(role):
        return None
    return importlib.import_module(_package(role))
