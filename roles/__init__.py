"""One package per role; each exposes ``register(runtime, options)`` and optionally ``add_flags(parser)``
and ``check_options(options)``.

``register`` adds the role's controllers, webhooks and runnables to the
:class:`koordinator.runtime.runtime.Runtime`; ``add_flags`` adds the role's own flags to the
argument parser (their values reach ``register`` in ``options.extra``); ``check_options`` raises
ValueError for a bad combination of flags, which the CLI reports as a usage error (exit 2). A role whose package is
missing is "not implemented in this build": ``koordinator --role=R`` says so and exits 1.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

ROLE_PACKAGES = {
    "manager": "roles.manager",
    "scheduler": "roles.scheduler",
    "koordlet": "roles.koordlet",
    "descheduler": "roles.descheduler",
    "device-daemon": "roles.device_daemon",
    "runtime-proxy": "roles.runtime_proxy",
}


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
