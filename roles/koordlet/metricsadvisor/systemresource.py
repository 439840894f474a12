"""System usage: node minus pods minus host applications (reference A.4.5)."""

from __future__ import annotations

from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.metricsadvisor.framework import Collector, Round


class SystemResourceCollector(Collector):
    """sys_cpu_usage, sys_memory_usage and their NUMA splits, from this process's latest node, pods
    and host-application usage; nothing when any of them is missing or older than ``outdated`` seconds."""

    name = "SystemResourceCollector"

    def __init__(self, outdated: float) -> None:
        self.outdated = outdated

    def collect(self, ctx: Round) -> None:
        now = ctx.now
        state = ctx.state
        node, pods, apps = state.node, state.pods, state.host_apps
        # A missing host-application figure is not zero: counting it as zero would report the host
        # applications' usage as system usage (Koordinator skips the round too).
        if node is None or pods is None or apps is None:
            ctx.problems.log.debug("system usage skipped: node, pod or host-application usage not collected yet")
            return
        oldest = min(node.timestamp, pods.timestamp, apps.timestamp)
        if now - oldest > self.outdated:
            ctx.problems.log.debug("system usage skipped: inputs older than %.0fs", self.outdated)
            return
        sys_cpu = max(node.cpu - pods.cpu - apps.cpu, 0.0)
        sys_memory = max(node.memory - pods.memory - apps.memory, 0.0)
        ctx.add(kinds.SYS_CPU_USAGE, sys_cpu)
        ctx.add(kinds.SYS_MEMORY_USAGE, sys_memory)
        last = {"cpu": sys_cpu, "memory": sys_memory}
        numa_last: dict[int, dict] = {}
        # NUMA memory: host applications are not subtracted (they have no NUMA split).
        pods_numa = pods.numa_memory or {}
        for node_id, used in sorted((node.numa_memory or {}).items()):
            value = max(used - pods_numa.get(node_id, 0), 0.0)
            ctx.add(kinds.SYS_NUMA_MEMORY_USAGE, value, {kinds.LABEL_NUMA_NODE_ID: str(node_id)})
            numa_last.setdefault(node_id, {})["memory"] = value
        # NUMA CPU: the system CPU split in proportion to each NUMA node's share of node CPU; the
        # NUMA CPU values carry the node sample's time, so the outdated check above covers them.
        numa_cpu = node.numa_cpu or {}
        if numa_cpu:
            total = sum(numa_cpu.values())
            for node_id, used in sorted(numa_cpu.items()):
                value = sys_cpu * used / total if total > 0 else 0.0
                ctx.add(kinds.SYS_NUMA_CPU_USAGE, value, {kinds.LABEL_NUMA_NODE_ID: str(node_id)})
                numa_last.setdefault(node_id, {})["cpu"] = value
        ctx.last["system"] = last
        if numa_last:
            ctx.last["system_numa"] = numa_last
