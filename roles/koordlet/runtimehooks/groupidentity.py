"""GroupIdentity (gate ``GroupIdentity``, on; reference A.8.2): ``cpu.bvt_warp_ns`` per QoS class.

Anolis kernels' group identity lets latency-sensitive cgroups (bvt 2) preempt best-effort ones (bvt -1).
The values come from the merged NodeSLO ``resourceQOSStrategy`` (:func:`parse_rule`); a pod gets its
QoS label's value, a pod without one its Kubernetes QoS dir's, and an LS pod may override it with the
``koordinator.sh/cpuQOS`` annotation. Kernels without the file are skipped with one log line.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from koordinator.apis.extension import (KUBE_BEST_EFFORT, KUBE_BURSTABLE, KUBE_GUARANTEED, LABEL_POD_QOS, QOS_BE,
                                        QOS_LS, QOS_LSE, QOS_LSR)
from koordinator_roles.koordlet.runtimehooks.facts import NodeFacts
from koordinator_roles.koordlet.runtimehooks.hooks import PRE_RUN_POD_SANDBOX, HookPlugin, HostContext
from koordinator_roles.koordlet.runtimehooks.protocol import ContainerRequest, HookResponse, PodRequest, Resources

log = logging.getLogger("koordinator.koordlet.runtimehooks.groupidentity")

BVT_FILE = "cpu.bvt_warp_ns"
ANNOTATION_CPU_QOS = "koordinator.sh/cpuQOS"
SYSCTL_GROUP_IDENTITY = "sys/kernel/sched_group_identity_enabled"
SYSCTL_CORE_SCHED = "sys/kernel/sched_core"
POLICY_GROUP_IDENTITY = "groupIdentity"


@dataclass(frozen=True)
class BvtRule:
    """The parsed rule: per Koordinator QoS, per Kube-QoS dir, and per Kube QoS for unlabeled pods."""

    enable: bool = False
    pod_qos: Mapping[str, int] = field(default_factory=dict)
    kube_qos_dir: Mapping[str, int] = field(default_factory=dict)
    kube_qos_pod: Mapping[str, int] = field(default_factory=dict)


def _class_value(strategy: Mapping[str, Any], key: str, policy_on: bool) -> tuple[bool, int]:
    cpu_qos = ((strategy.get(key) or {}).get("cpuQOS") or {}) if isinstance(strategy.get(key), Mapping) else {}
    enabled = policy_on and cpu_qos.get("enable") is True
    value = cpu_qos.get("groupIdentity")
    return enabled, (int(value) if enabled and isinstance(value, int) else 0)


def parse_rule(node_slo: Mapping[str, Any]) -> BvtRule:
    """The :class:`BvtRule` of a merged NodeSLO spec (reference A.8.2 GroupIdentity)."""
    strategy = node_slo.get("resourceQOSStrategy") or {}
    policy = ((strategy.get("policies") or {}).get("cpuPolicy") or "") if isinstance(strategy, Mapping) else ""
    policy_on = policy in ("", POLICY_GROUP_IDENTITY)
    lsr_on, lsr = _class_value(strategy, "lsrClass", policy_on)
    ls_on, ls = _class_value(strategy, "lsClass", policy_on)
    be_on, be = _class_value(strategy, "beClass", policy_on)
    guaranteed_pod = lsr if lsr_on else ls if ls_on else 0
    return BvtRule(enable=lsr_on or ls_on or be_on,
                   pod_qos={QOS_LSE: lsr, QOS_LSR: lsr, QOS_LS: ls, QOS_BE: be},
                   # The Guaranteed dir is the kubepods root: it holds every class, so it stays neutral.
                   kube_qos_dir={KUBE_GUARANTEED: 0, KUBE_BURSTABLE: ls, KUBE_BEST_EFFORT: be},
                   kube_qos_pod={KUBE_GUARANTEED: guaranteed_pod, KUBE_BURSTABLE: ls, KUBE_BEST_EFFORT: be})


def pod_bvt(rule: BvtRule, labels: Mapping[str, str], annotations: Mapping[str, str], kube_qos: str) -> int:
    """A pod's bvt: its QoS label's value, else its Kube QoS's, else 0; LS pods honour ``koordinator.sh/cpuQOS``."""
    qos = labels.get(LABEL_POD_QOS, "")
    if qos in rule.pod_qos:
        value = rule.pod_qos[qos]
    else:
        value = rule.kube_qos_pod.get(kube_qos, 0)
    if qos == QOS_LS and annotations.get(ANNOTATION_CPU_QOS):
        value = _annotation_override(annotations[ANNOTATION_CPU_QOS], value)
    return value


def _annotation_override(raw: str, value: int) -> int:
    try:
        cfg = json.loads(raw)
    except ValueError:
        log.debug("annotation %s is not JSON: %r; ignored", ANNOTATION_CPU_QOS, raw)
        return value
    if not isinstance(cfg, dict):
        return value
    if cfg.get("enable") is not True:
        return 0
    gi = cfg.get("groupIdentity")
    if isinstance(gi, int) and not isinstance(gi, bool) and -1 <= gi <= 2:
        return gi
    return value


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


class GroupIdentity(HookPlugin):
    """The GroupIdentity plugin (see the module docstring)."""

    name = "GroupIdentity"
    gate = "GroupIdentity"
    stages = (PRE_RUN_POD_SANDBOX,)

    def __init__(self) -> None:
        self._sysctl_enabled = False
        # Once a rule was on in this process, a later "off" must write the zeros (clear the values).
        self._was_enabled = False

    def _bvt(self, facts: NodeFacts) -> BvtRule | None:
        rule = parse_rule(facts.node_slo)
        # Disabled and never switched on by us: leave the kernel's values alone (Koordinator does the same).
        if not rule.enable and not self._sysctl_enabled and not self._was_enabled:
            return None
        return rule

    def pod_hook(self, req: PodRequest, facts: NodeFacts) -> HookResponse | None:
        rule = self._bvt(facts)
        if rule is None:
            return None
        return HookResponse(Resources(cpu_bvt=pod_bvt(rule, req.labels, req.annotations, req.kube_qos)))

    def container_hook(self, req: ContainerRequest, facts: NodeFacts) -> HookResponse | None:
        # Containers carry the pod's value: a child created while the pod had another value keeps it.
        return self.pod_hook(req.pod, facts)

    def kube_qos_hook(self, kube_qos: str, facts: NodeFacts) -> Resources | None:
        rule = self._bvt(facts)
        return None if rule is None else Resources(cpu_bvt=rule.kube_qos_dir.get(kube_qos, 0))

    def host_app_hook(self, app: Mapping[str, Any], facts: NodeFacts) -> Resources | None:
        """A host application's bvt: its ``qos`` class's value, else 0."""
        rule = self._bvt(facts)
        return None if rule is None else Resources(cpu_bvt=rule.pod_qos.get(app.get("qos") or "", 0))

    def dangling_pod_hook(self, kube_qos: str, facts: NodeFacts) -> Resources | None:
        return self.kube_qos_hook(kube_qos, facts)

    def system_problem(self, host: HostContext) -> str | None:
        executor = host.executor
        bvt = executor.path(BVT_FILE, executor.layout.qos_dir(KUBE_GUARANTEED))
        if os.path.exists(bvt) or os.path.exists(os.path.join(host.proc_root, SYSCTL_GROUP_IDENTITY)):
            return None
        return f"the kernel has no group identity ({bvt} and /proc/{SYSCTL_GROUP_IDENTITY} missing)"

    def prepare(self, host: HostContext, facts: NodeFacts) -> None:
        """Switch the group identity sysctl on (core scheduling off: they exclude each other) when the rule is on."""
        gi = os.path.join(host.proc_root, SYSCTL_GROUP_IDENTITY)
        current = _read_int(gi)
        self._sysctl_enabled = current == 1
        enable = parse_rule(facts.node_slo).enable
        self._was_enabled = self._was_enabled or enable
        if not enable or current is None or current == 1:
            return
        core = os.path.join(host.proc_root, SYSCTL_CORE_SCHED)
        if _read_int(core) not in (None, 0):
            _write_sysctl(host, core, 0, "group identity on: core scheduling off")
        if _write_sysctl(host, gi, 1, "group identity on"):
            self._sysctl_enabled = True


def _write_sysctl(host: HostContext, path: str, value: int, reason: str) -> bool:
    old = _read_int(path)
    try:
        with open(path, "w", encoding="ascii") as f:
            f.write(str(value))
    except OSError as err:
        log.warning("group identity: cannot write %s=%d: %s", path, value, err)
        return False
    audit = getattr(host.executor, "audit", None)
    if audit is not None:
        audit.record(path, None if old is None else str(old), str(value), GroupIdentity.name, reason)
    log.info("group identity: %s %s -> %d", path, old, value)
    return True
