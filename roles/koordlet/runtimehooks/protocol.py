"""The hook protocol (reference A.8.1): what a hook plugin is given and what it answers.

The shapes follow ``runtime.v1alpha1`` (descheduler-device-proxy-apis §3.4) so that the reconciler here
and the runtime proxy's gRPC server call the same plugin functions:

- :class:`PodRequest` ~ ``PodSandboxHookRequest`` (pod metadata, labels, annotations, cgroup parent and
  the resources the runtime would give the sandbox);
- :class:`ContainerRequest` ~ ``ContainerResourceHookRequest`` (the pod's request plus the container's
  metadata and resources);
- :class:`HookResponse` ~ ``PodSandboxHookResponse`` / ``ContainerResourceHookResponse``: cgroup parent,
  :class:`Resources` (the CRI's LinuxContainerResources fields we use plus the extended ``cpu_bvt``) and
  environment variables. ``None`` in a field means "leave as it is".

In reconciler mode the requests are built from the pod objects (:func:`pod_request`,
:func:`container_requests`); the resources they carry are what the kubelet gives the cgroups from the
pod spec (kubelet formulas, reference A.3.2), so a plugin that scales them (CPUNormalization) is
idempotent when it runs every interval.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from koordinator.apis import quantity
from koordinator.apis.extension import CPU, MEMORY, kube_qos_class

CFS_BASE_PERIOD = 100_000
CFS_MIN_QUOTA = 1000
SHARES_MIN = 2
SHARES_MAX = 262_144


class HookError(ValueError):
    """A pod or container a hook cannot handle (e.g. a malformed annotation); names the pod and the cause."""

    def __init__(self, message: str, *, reason: str = "RuntimeHookFailed") -> None:
        super().__init__(message)
        self.reason = reason


def milli_cpu_to_shares(milli: int) -> int:
    """Kubelet ``MilliCPUToShares``: ≤ 0 → 2, else ``m*1024/1000`` clamped to [2, 262144]."""
    if milli <= 0:
        return SHARES_MIN
    return min(max(milli * 1024 // 1000, SHARES_MIN), SHARES_MAX)


def milli_cpu_to_quota(milli: int) -> int:
    """Kubelet ``MilliCPUToQuota``: ≤ 0 → -1 (unlimited), below the minimum → 1000."""
    quota = milli * CFS_BASE_PERIOD // 1000
    if quota <= 0:
        return -1
    return max(quota, CFS_MIN_QUOTA)


@dataclass(frozen=True)
class Resources:
    """Cgroup values of one pod or container; ``None``: not set (leave the cgroup as it is).

    ``cpuset`` ``""`` is the CRI's "no cpuset": the reconciler writes nothing for it.
    """

    cpu_shares: int | None = None
    cfs_quota: int | None = None
    cpuset: str | None = None
    memory_limit: int | None = None
    cpu_bvt: int | None = None

    def merged(self, other: "Resources") -> "Resources":
        """``self`` with the fields ``other`` sets replaced (hooks of a stage apply in order)."""
        changes = {k: v for k, v in vars(other).items() if v is not None}
        return replace(self, **changes) if changes else self

    def is_empty(self) -> bool:
        """No field set."""
        return all(v is None for v in vars(self).values())


@dataclass(frozen=True)
class PodRequest:
    """A pod sandbox hook request (``PodSandboxHookRequest``); ``cgroup_parent`` is the pod's cgroup dir,
    relative to the cgroup root, as the kubelet names it."""

    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    cgroup_parent: str
    kube_qos: str
    resources: Resources = field(default_factory=Resources)
    #: ``spec.containers`` (name → requests/limits), used to compute pod totals in reconciler mode.
    container_specs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """``namespace/name`` for logs and events."""
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class ContainerRequest:
    """A container hook request (``ContainerResourceHookRequest``); ``cgroup_dir`` is the container's cgroup."""

    pod: PodRequest
    name: str
    container_id: str
    cgroup_dir: str
    resources: Resources = field(default_factory=Resources)
    annotations: Mapping[str, str] = field(default_factory=dict)
    envs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HookResponse:
    """What a hook asks for: cgroup parent, resources and environment (``None``/empty: nothing)."""

    resources: Resources = field(default_factory=Resources)
    cgroup_parent: str | None = None
    envs: Mapping[str, str] = field(default_factory=dict)

    def merged(self, other: "HookResponse | None") -> "HookResponse":
        """This response with ``other``'s settings on top."""
        if other is None:
            return self
        return HookResponse(resources=self.resources.merged(other.resources),
                            cgroup_parent=other.cgroup_parent or self.cgroup_parent,
                            envs={**self.envs, **other.envs})


# -- requests from pod objects (reconciler mode) -----------------------------------------------------

def _milli(q: Any) -> int:
    try:
        return quantity.milli_value(q)
    except (ValueError, TypeError):
        return 0


def _value(q: Any) -> int:
    try:
        return quantity.value(q)
    except (ValueError, TypeError):
        return 0


def container_resources(spec: Mapping[str, Any]) -> Resources:
    """What the kubelet gives a container's cgroup from its spec (shares, CFS quota, memory limit)."""
    res = spec.get("resources") or {}
    requests, limits = res.get("requests") or {}, res.get("limits") or {}
    cpu_request = requests.get(CPU, limits.get(CPU))   # a limit alone defaults the request to it
    memory = _value(limits[MEMORY]) if MEMORY in limits else 0
    return Resources(cpu_shares=milli_cpu_to_shares(_milli(cpu_request) if cpu_request is not None else 0),
                     cfs_quota=milli_cpu_to_quota(_milli(limits[CPU])) if CPU in limits else -1,
                     memory_limit=memory if memory > 0 else -1)


def pod_resources(specs: list[Mapping[str, Any]]) -> Resources:
    """What the kubelet gives a pod's cgroup: summed shares; quota and memory limit only when every
    container has one (else unlimited)."""
    milli = 0
    quota_milli, quota_ok, memory, memory_ok = 0, bool(specs), 0, bool(specs)
    for spec in specs:
        res = spec.get("resources") or {}
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        cpu_request = requests.get(CPU, limits.get(CPU))
        milli += _milli(cpu_request) if cpu_request is not None else 0
        if CPU in limits and _milli(limits[CPU]) > 0:
            quota_milli += _milli(limits[CPU])
        else:
            quota_ok = False
        if MEMORY in limits and _value(limits[MEMORY]) > 0:
            memory += _value(limits[MEMORY])
        else:
            memory_ok = False
    return Resources(cpu_shares=milli_cpu_to_shares(milli),
                     cfs_quota=milli_cpu_to_quota(quota_milli) if quota_ok else -1,
                     memory_limit=memory if memory_ok else -1)


def pod_request(pod: Mapping[str, Any], cgroup_dir: str) -> PodRequest:
    """The :class:`PodRequest` of a pod object whose cgroup is ``cgroup_dir``."""
    md = pod.get("metadata") or {}
    specs = [c for c in (pod.get("spec") or {}).get("containers") or [] if isinstance(c, Mapping)]
    return PodRequest(uid=md.get("uid", ""), namespace=md.get("namespace", ""), name=md.get("name", ""),
                      labels=dict(md.get("labels") or {}), annotations=dict(md.get("annotations") or {}),
                      cgroup_parent=cgroup_dir, kube_qos=kube_qos_class(pod), resources=pod_resources(specs),
                      container_specs={c.get("name", ""): c for c in specs})


def container_requests(pod_req: PodRequest, containers: list[tuple[str, str, str]]) -> list[ContainerRequest]:
    """The :class:`ContainerRequest` of each running container ``(name, "runtime://id", cgroup dir)``."""
    out = []
    for name, cid, rel in containers:
        spec = pod_req.container_specs.get(name) or {}
        envs = {e["name"]: str(e.get("value", "")) for e in spec.get("env") or []
                if isinstance(e, Mapping) and "name" in e}
        out.append(ContainerRequest(pod=pod_req, name=name, container_id=cid, cgroup_dir=rel,
                                    resources=container_resources(spec), envs=envs))
    return out
