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

HOOK_TYPES = ("PreRunPodSandbox", "PostStopPodSandbox", "PreCreateContainer", "PreStartContainer",
              "PostStartContainer", "PreUpdateContainerResources", "PostStopContainer", "PreRemoveRunPodSandbox")

#: Failure policies: Fail fails the CRI call when the hook server does not answer, Ignore lets it go on.
FAIL = "Fail"
IGNORE = "Ignore"

#: The keys of a registration file.
KEY_REMOTE_ENDPOINT = "remote-endpoint"
KEY_FAILURE_POLICY = "failure-policy"
KEY_RUNTIME_HOOKS = "runtime-hooks"
