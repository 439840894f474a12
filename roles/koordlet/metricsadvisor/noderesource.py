"""Node CPU and memory from /proc, per-NUMA CPU and memory from /proc/stat and sysfs (reference A.4.1)."""

from __future__ import annotations

from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.metricsadvisor.framework import Baselines, Collector, Round, Usage
from koordinator_roles.koordlet.system import procfs, sysfs
from koordinator_roles.koordlet.system.errors import SystemFileError
from koordinator_roles.koordlet.system.paths import HostPaths

_NODE = "node"


class NodeResourceCollector(Collector):
    """node_cpu_usage (cores), node_memory_usage[_with_page_cache] (bytes), node_numa_{cpu,memory}_usage.

    CPU cores = Δ busy ticks / (Δt × CLK_TCK); the first round only records the baseline, and a
    counter that went backwards starts a new one without a sample.
    """

    name = "NodeResourceCollector"

    def __init__(self, paths: HostPaths, baselines: Baselines, *, clk_tck: int | None = None) -> None:
        self.paths = paths
        self.baselines = baselines
        self.clk_tck = clk_tck or procfs.clock_ticks()
        self._stat_path = paths.proc("stat")
        self._meminfo_path = paths.proc("meminfo")

    def collect(self, ctx: Round) -> None:
        now = ctx.now
        try:
            ticks = procfs.read_cpu_ticks(self.paths)
            meminfo = procfs.read_meminfo(self.paths)
            memory, memory_with_cache = procfs.node_memory_usage(meminfo, self._meminfo_path)
        except SystemFileError as err:
            ctx.problems.report(_NODE, now, "node usage skipped: %s", err)
            return
        prev = self.baselines.swap(_NODE, ticks, now)
        if prev is None:
            return
        last_ticks, last_ts = prev
        elapsed = now - last_ts
        if elapsed <= 0 or ticks.total < last_ticks.total:
            ctx.problems.log.debug("node CPU counter reset or clock not advancing (%s → %s ticks, %.3fs); "
                                   "new baseline", last_ticks.total, ticks.total, elapsed)
            return
        period_ticks = elapsed * self.clk_tck
        cpu = (ticks.total - last_ticks.total) / period_ticks
        ctx.add(kinds.NODE_CPU_USAGE, cpu)
        ctx.add(kinds.NODE_MEMORY_USAGE, memory)
        ctx.add(kinds.NODE_MEMORY_USAGE_WITH_PAGE_CACHE, memory_with_cache)
        numa_cpu = self._numa_cpu(ctx, ticks, last_ticks, period_ticks)
        numa_memory = self._numa_memory(ctx, meminfo)
        ctx.state.node = Usage(now, cpu, memory, numa_cpu, numa_memory)
        ctx.last["node"] = {"cpu": cpu, "memory": memory, "memory_with_page_cache": memory_with_cache}
        if numa_cpu or numa_memory:
            ctx.last["numa"] = {i: {"cpu": (numa_cpu or {}).get(i), "memory": (numa_memory or {}).get(i)}
                                for i in ctx.state.numa_nodes}

    def _numa_cpu(self, ctx: Round, ticks: procfs.CPUTicks, last: procfs.CPUTicks,
                  period_ticks: float) -> dict[int, float] | None:
        """Per-CPU tick deltas summed by NUMA node; None when the topology is unknown or a counter reset."""
        cpu_to_numa = ctx.state.cpu_to_numa
        if not cpu_to_numa or period_ticks <= 0:
            return None
        sums = dict.fromkeys(ctx.state.numa_nodes, 0)
        last_per_cpu = last.per_cpu
        for cpu, value in ticks.per_cpu.items():
            before = last_per_cpu.get(cpu)
            node = cpu_to_numa.get(cpu)
            if before is None or node is None:
                continue
            if value < before:
                ctx.problems.log.debug("CPU %d tick counter went backwards; NUMA CPU usage skipped", cpu)
                return None
            sums[node] = sums.get(node, 0) + (value - before)
        out = {}
        for node, delta in sums.items():
            out[node] = delta / period_ticks
            ctx.add(kinds.NODE_NUMA_CPU_USAGE, out[node], {kinds.LABEL_NUMA_NODE_ID: str(node)})
        return out

    def _numa_memory(self, ctx: Round, meminfo: dict[str, int]) -> dict[int, float] | None:
        """Used bytes per NUMA node from sysfs meminfo (the fallback node 0 uses /proc/meminfo)."""
        nodes = ctx.state.numa_nodes
        if not nodes:
            return None
        out = {}
        for node in nodes:
            try:
                if ctx.state.numa_from_sysfs:
                    used = procfs.numa_memory_usage(sysfs.numa_meminfo(self.paths, node),
                                                    self.paths.sys("devices", "system", "node", f"node{node}",
                                                                   "meminfo"))
                else:
                    used = procfs.numa_memory_usage(meminfo, self._meminfo_path)
            except SystemFileError as err:
                ctx.problems.report(("numa-memory", node), ctx.now, "NUMA node %d memory skipped: %s", node, err)
                continue
            out[node] = used
            ctx.add(kinds.NODE_NUMA_MEMORY_USAGE, used, {kinds.LABEL_NUMA_NODE_ID: str(node)})
        return out
