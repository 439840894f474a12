"""koordlet's feature gates: Koordinator's names and defaults (``pkg/features/koordlet_features.go``).

An unknown name in ``--feature-gates`` is an error naming it. Gates in :data:`UNSUPPORTED` switch on
something this build does not do yet: turning one on that is off by default is refused with the
reason; the ones Koordinator turns on by default are accepted (a DaemonSet copied from Koordinator
keeps working) and listed once at start as inactive, see :func:`inactive`.
"""

from __future__ import annotations

from collections.abc import Mapping

# name -> default
GATES: dict[str, bool] = {
    # koordlet gates
    "AuditEvents": False,
    "AuditEventsHTTPHandler": False,
    "BECPUSuppress": True,
    "BECPUManager": False,
    "BECPUEvict": False,
    "CPUEvict": False,
    "CPUAllocatableEvict": False,
    "BEMemoryEvict": False,
    "MemoryEvict": False,
    "MemoryAllocatableEvict": False,
    "CPUBurst": True,
    "SystemConfig": False,
    "RdtResctrl": True,
    "ResctrlCollector": False,
    "CgroupReconcile": False,
    "NodeTopologyReport": True,
    "Accelerators": False,
    "RDMADevices": False,
    "CPICollector": False,
    "Libpfm4": False,
    "PSICollector": False,
    "BlkIOReconcile": False,
    "ColdPageCollector": False,
    "HugePageReport": False,
    "PodResourcesProxy": False,
    "HamiCoreVGPUMonitor": False,
    "PerCPUMetric": False,
    "NodeMetricPromMetrics": False,
    # runtime-hook gates (same flag)
    "GroupIdentity": True,
    "CPUSetAllocator": True,
    "BatchResource": True,
    "GPUEnvInject": False,
    "RDMADeviceInject": False,
    "CPUNormalization": False,
    "CoreSched": False,
    "TerwayQoS": False,
    "TCNetworkQoS": False,
    "Resctrl": False,
    "OOMScoreAdj": False,
}

_QOS = "the QoS manager does not implement this strategy in this build yet"
_HOOKS = "runtime hooks are not implemented in this build yet"
UNSUPPORTED: dict[str, str] = {
    # The audit log of cgroup changes is always written (RUN_DIR/audit); these gates add the event API.
    "AuditEvents": "the audit events API is not implemented in this build",
    "AuditEventsHTTPHandler": "the audit events API is not implemented in this build",
    "BECPUManager": _QOS,
    "ResctrlCollector": "the resctrl collector is not implemented in this build",
    "RDMADevices": "RDMA device reporting is not implemented in this build",
    "CPICollector": "the CPI collector is not implemented in this build",
    "Libpfm4": "the CPI collector is not implemented in this build",
    "PSICollector": "the PSI collector is not implemented in this build",
    "ColdPageCollector": "the cold page collector is not implemented in this build",
    "PodResourcesProxy": "the pod-resources proxy is not implemented in this build",
    "HamiCoreVGPUMonitor": "HAMi vGPU monitoring is not implemented in this build",
    "PerCPUMetric": "per-CPU metrics are not implemented in this build",
    # GroupIdentity, CPUSetAllocator, BatchResource and CPUNormalization run in reconciler mode (runtimehooks/);
    # GPUEnvInject answers the hook server (proxy mode) only.
    **dict.fromkeys(("RDMADeviceInject", "CoreSched", "TerwayQoS", "TCNetworkQoS", "Resctrl",
                     "OOMScoreAdj"), _HOOKS),
}


def resolve(requested: Mapping[str, bool], source: str = "--feature-gates") -> dict[str, bool]:
    """Every gate's value after ``requested``; raises ValueError naming a bad gate and ``source``
    (where the gates came from: the flag, or the ``featureGates`` of a --config file)."""
    gates = dict(GATES)
    for name, value in requested.items():
        if name not in GATES:
            raise ValueError(f"{source}: unrecognized feature gate: {name} "
                             f"(koordlet gates: {', '.join(sorted(GATES))})")
        if value and not GATES[name] and name in UNSUPPORTED:
            raise ValueError(f"{source}: {name}=true is not supported: {UNSUPPORTED[name]}")
        gates[name] = value
    return gates


def inactive(gates: Mapping[str, bool]) -> list[str]:
    """The gates that are on but switch on nothing in this build (on by default in Koordinator)."""
    return sorted(name for name, on in gates.items() if on and name in UNSUPPORTED)
