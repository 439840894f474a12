"""Koordinator's built-in NodeSLO and NodeMetric defaults (``pkg/util/sloconfig``), shared by roles.

The manager starts its ``slo-controller-config`` strategies from the threshold, CPU burst and
system defaults (reference B.2.3, B.2.5, B.2.6) and writes ``resourceQOSStrategy: {}`` (pitfall 9);
the koordlet merges every NodeSLO it receives onto :func:`default_node_slo_spec`, which also
carries the full per-class resource QoS defaults (B.2.4 and the A.7.10 table). The NodeMetric
collect-policy defaults (B.4, A.6.3) live here too: the manager writes them into NodeMetric specs
and the koordlet falls back on them for fields a spec lacks.

Every ``default_*`` function returns a fresh object the caller may modify.
"""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]

# -- NodeMetric collect policy (B.4 / A.6.3) ----------------------------------------------------

DEFAULT_METRIC_DURATIONS = ("5m0s", "10m0s", "30m0s")
DEFAULT_METRIC_AGGREGATE_DURATION_SECONDS = 300
DEFAULT_METRIC_REPORT_INTERVAL_SECONDS = 60
# The koordlet never aggregates over less than a minute nor reports more often than every 30 s.
MIN_METRIC_AGGREGATE_DURATION_SECONDS = 60
MIN_METRIC_REPORT_INTERVAL_SECONDS = 30
MEMORY_POLICY_WITHOUT_PAGE_CACHE = "usageWithoutPageCache"
MEMORY_POLICY_WITH_PAGE_CACHE = "usageWithPageCache"
MEMORY_POLICY_WITH_HOT_PAGE_CACHE = "usageWithHotPageCache"
DEFAULT_METRIC_MEMORY_COLLECT_POLICY = MEMORY_POLICY_WITHOUT_PAGE_CACHE


def default_metric_collect_policy() -> Obj:
    """NodeMetric ``spec.metricCollectPolicy`` without any colocation-config: 300 s, 60 s, 5m/10m/30m."""
    return {
        "aggregateDurationSeconds": DEFAULT_METRIC_AGGREGATE_DURATION_SECONDS,
        "reportIntervalSeconds": DEFAULT_METRIC_REPORT_INTERVAL_SECONDS,
        "nodeAggregatePolicy": {"durations": list(DEFAULT_METRIC_DURATIONS)},
        "nodeMemoryCollectPolicy": DEFAULT_METRIC_MEMORY_COLLECT_POLICY,
    }


# -- NodeSLO strategies (B.2.3, B.2.5, B.2.6) -----------------------------------------------------

DEFAULT_RESOURCE_THRESHOLD_STRATEGY: Obj = {
    "enable": False,
    "cpuSuppressThresholdPercent": 65,
    "cpuSuppressPolicy": "cpuset",
    "memoryEvictThresholdPercent": 70,
    "cpuEvictPolicy": "evictByRealLimit",
}
DEFAULT_CPU_BURST_STRATEGY: Obj = {
    "policy": "none",
    "cpuBurstPercent": 1000,
    "cfsQuotaBurstPercent": 300,
    "cfsQuotaBurstPeriodSeconds": -1,
    "sharePoolThresholdPercent": 50,
}
# sysctl values are applied only when present (A.7.9): nothing but the bandwidth is defaulted.
DEFAULT_SYSTEM_STRATEGY: Obj = {"totalNetworkBandwidth": "0"}

# -- resource QoS per class (B.2.4, A.6.2, A.7.10) ------------------------------------------------

QOS_CLASS_FIELDS = {"LSR": "lsrClass", "LS": "lsClass", "BE": "beClass", "SYSTEM": "systemClass"}

_CPU_QOS = {
    "LSR": {"groupIdentity": 2, "schedIdle": 0, "coreExpeller": True},
    "LS": {"groupIdentity": 2, "schedIdle": 0, "coreExpeller": True},
    "BE": {"groupIdentity": -1, "schedIdle": 0, "coreExpeller": False},
    "SYSTEM": {"groupIdentity": 0, "schedIdle": 0, "coreExpeller": False},
}
_NONE_CPU_QOS = {"groupIdentity": 0, "schedIdle": 0, "coreExpeller": False}

_RESCTRL_QOS = {
    "LSR": {"catRangeStartPercent": 0, "catRangeEndPercent": 100, "mbaPercent": 100},
    "LS": {"catRangeStartPercent": 0, "catRangeEndPercent": 100, "mbaPercent": 100},
    "BE": {"catRangeStartPercent": 0, "catRangeEndPercent": 30, "mbaPercent": 100},
    "SYSTEM": {"catRangeStartPercent": 0, "catRangeEndPercent": 100, "mbaPercent": 100},
}
_NONE_RESCTRL_QOS = {"catRangeStartPercent": 0, "catRangeEndPercent": 100, "mbaPercent": 100}


def _memory_qos(wmark_ratio: int, wmark_scale_permill: int, wmark_min_adj: int) -> Obj:
    return {"minLimitPercent": 0, "lowLimitPercent": 0, "throttlingPercent": 0, "wmarkRatio": wmark_ratio,
            "wmarkScalePermill": wmark_scale_permill, "wmarkMinAdj": wmark_min_adj, "priorityEnable": 0,
            "priority": 0, "oomKillGroup": 0}


_MEMORY_QOS = {
    "LSR": _memory_qos(95, 20, -25),
    "LS": _memory_qos(95, 20, -25),
    "BE": _memory_qos(95, 20, 50),
    "SYSTEM": _memory_qos(0, 50, 0),
}
_NONE_MEMORY_QOS = _memory_qos(0, 50, 0)
_NETWORK_QOS = {"ingressRequest": 0, "ingressLimit": 0, "egressRequest": 0, "egressLimit": 0}

DEFAULT_RESOURCE_QOS_POLICIES: Obj = {"cpuPolicy": "groupIdentity", "netQOSPolicy": "tc"}


def default_cpu_qos(qos: str) -> Obj | None:
    """CPU QoS values of a QoS class (LSR, LS, BE, SYSTEM); None for any other class."""
    return copy.deepcopy(_CPU_QOS.get(qos))


def default_resctrl_qos(qos: str) -> Obj | None:
    """Resctrl (L3 CAT / MBA) values of a QoS class; None for any other class."""
    return copy.deepcopy(_RESCTRL_QOS.get(qos))


def default_memory_qos(qos: str) -> Obj | None:
    """Memory QoS values of a QoS class (the A.7.10 table); None for any other class."""
    return copy.deepcopy(_MEMORY_QOS.get(qos))


def none_cpu_qos() -> Obj:
    """CPU QoS "off": group identity 0, not sched-idle, no core expeller."""
    return dict(_NONE_CPU_QOS)


def none_resctrl_qos() -> Obj:
    """Resctrl "off": the whole L3 cache (0-100 %) and full memory bandwidth."""
    return dict(_NONE_RESCTRL_QOS)


def none_memory_qos() -> Obj:
    """Memory QoS "off": no protection, no throttling, kernel-default watermarks."""
    return dict(_NONE_MEMORY_QOS)


def default_resource_qos(qos: str) -> Obj:
    """The ``ResourceQOS`` of one class, every feature disabled (``enable: false``)."""
    return {
        "cpuQOS": {"enable": False, **_CPU_QOS[qos]},
        "resctrlQOS": {"enable": False, **_RESCTRL_QOS[qos]},
        "memoryQOS": {"enable": False, **_MEMORY_QOS[qos]},
        "blkioQOS": {"enable": False},
        "networkQOS": {"enable": False, **_NETWORK_QOS},
    }


def default_resource_qos_strategy() -> Obj:
    """The koordlet's full ``resourceQOSStrategy`` defaults (``sloconfig.DefaultResourceQOSStrategy``)."""
    strategy: Obj = {"policies": dict(DEFAULT_RESOURCE_QOS_POLICIES)}
    for qos, name in QOS_CLASS_FIELDS.items():
        strategy[name] = default_resource_qos(qos)
    strategy["cgroupRoot"] = {"blkioQOS": {"enable": False}}
    return strategy


def default_node_slo_spec() -> Obj:
    """The koordlet's NodeSLO spec defaults (``sloconfig.DefaultNodeSLOSpecConfig``)."""
    return {
        "resourceUsedThresholdWithBE": copy.deepcopy(DEFAULT_RESOURCE_THRESHOLD_STRATEGY),
        "resourceQOSStrategy": default_resource_qos_strategy(),
        "cpuBurstStrategy": copy.deepcopy(DEFAULT_CPU_BURST_STRATEGY),
        "systemStrategy": copy.deepcopy(DEFAULT_SYSTEM_STRATEGY),
        "extensions": {},
    }
