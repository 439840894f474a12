"""Koordinator's runtime-hook vocabulary, shared by the koordlet's hook server and koord-runtime-proxy.

Hook types, in Koordinator's order (the order of a registration file's list), and the CRI call that
fires each: PreRunPodSandbox (RunPodSandbox), PostStopPodSandbox (StopPodSandbox), PreCreateContainer
(CreateContainer), PreStartContainer / PostStartContainer (StartContainer), PreUpdateContainerResources
(UpdateContainerResources), PostStopContainer (StopContainer); PreRemoveRunPodSandbox exists in the API
but no CRI call fires it (the koordlet's NRI mode uses it).

A hook server registers with one JSON file in the proxy's config directory::

    {"remote-endpoint": "/var/run/koordlet/koordlet.sock", "failure-policy": "Ignore",
     "runtime-hooks": ["PreRunPodSandbox", "PreCreateContainer", "PreUpdateContainerResources"]}
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

HOOK_TYPES = ("PreRunPodSandbox", "PostStopPodSandbox", "PreCreateContainer", "PreStartContainer",
              "PostStartContainer", "PreUpdateContainerResources", "PostStopContainer", "PreRemoveRunPodSandbox")

#: Failure policies: Fail fails the CRI call when the hook server does not answer, Ignore lets it go on.
FAIL = "Fail"
IGNORE = "Ignore"

#: The keys of a registration file.
KEY_REMOTE_ENDPOINT = "remote-endpoint"
KEY_FAILURE_POLICY = "failure-policy"
KEY_RUNTIME_HOOKS = "runtime-hooks"


# -- registration files (read by koord-runtime-proxy and by the node simulator's stand-in runtime) --------

_KEYS = (KEY_REMOTE_ENDPOINT, KEY_FAILURE_POLICY, KEY_RUNTIME_HOOKS)
#: Accepted ``failure-policy`` values ("" means Ignore).
POLICIES = (FAIL, IGNORE, "")


class RegistrationError(ValueError):
    """A registration file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class HookServer:
    """One registered hook server (one registration file)."""

    #: The registration file's name (``koordlet.json``): names the hook server in logs, errors and metrics.
    name: str
    #: The unix socket path the hook server listens on.
    endpoint: str
    #: ``Fail`` or ``Ignore``.
    failure_policy: str
    hooks: frozenset[str]
    #: Keys of the file this build does not know (Koordinator ignores them; callers warn once).
    unknown_keys: tuple[str, ...] = ()

    @property
    def fails_closed(self) -> bool:
        """Whether a failed Pre hook fails the CRI call."""
        return self.failure_policy == FAIL


def parse_registration(name: str, text: str) -> HookServer:
    """The :class:`HookServer` of registration file ``name`` holding ``text``; RegistrationError naming the field."""
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise RegistrationError(f"{name}: not JSON: {err}") from None
    if not isinstance(doc, dict):
        raise RegistrationError(f"{name}: want a JSON object, got {type(doc).__name__}")
    endpoint = doc.get(KEY_REMOTE_ENDPOINT)
    if not isinstance(endpoint, str) or not endpoint.strip():
        raise RegistrationError(f"{name}: remote-endpoint: {endpoint!r}: want the hook server's unix socket path")
    endpoint = endpoint.strip()
    if endpoint.startswith("unix://"):
        endpoint = endpoint[len("unix://"):]
    if not endpoint.startswith("/"):
        raise RegistrationError(f"{name}: remote-endpoint: {endpoint!r}: want an absolute unix socket path")
    policy = doc.get(KEY_FAILURE_POLICY, "")
    if policy not in POLICIES:
        raise RegistrationError(f"{name}: failure-policy: {policy!r}: want Fail or Ignore")
    hooks = doc.get(KEY_RUNTIME_HOOKS)
    if not isinstance(hooks, list) or not all(isinstance(h, str) for h in hooks):
        raise RegistrationError(f"{name}: runtime-hooks: {hooks!r}: want a list of hook types")
    for index, hook in enumerate(hooks):
        if hook not in HOOK_TYPES:
            raise RegistrationError(f"{name}: runtime-hooks[{index}]: unknown hook type {hook!r} "
                                    f"(known: {', '.join(HOOK_TYPES)})")
    return HookServer(name=name, endpoint=endpoint, failure_policy=policy or IGNORE, hooks=frozenset(hooks),
                      unknown_keys=tuple(sorted(set(doc) - set(_KEYS))))


def registration_files(directory: str) -> list[str]:
    """The registration files of ``directory`` by name: only names ending in ``json`` count, as in
    Koordinator (``koordlet.json.tmp`` is a file being written). OSError when it cannot be listed."""
    return sorted(e.name for e in os.scandir(directory) if e.name.endswith("json") and e.is_file())
