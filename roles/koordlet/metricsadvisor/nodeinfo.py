"""Static node facts into the metric cache's KV store: CPUs (model, topology) and NUMA nodes.

KV ``node_cpu_info``: {"model", "vendor", "cpus": [{"id", "core", "socket", "node"}], "total_cpus",
"total_cores", "total_sockets", "total_numa_nodes"}; KV ``node_numa_info``: {"nodes": [{"id", "cpus",
"mem_total", "mem_free", "hugepages_2Mi", "hugepages_1Gi"}]} (bytes, sorted by id). CPU topology
comes from sysfs, else /proc/cpuinfo, else the per-CPU lines of /proc/stat; without NUMA dirs
there is one node 0 holding every CPU and /proc/meminfo's memory.
"""

from __future__ import annotations

from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.metricsadvisor.framework import Collector, Round
from koordinator_roles.koordlet.system import procfs, sysfs
from koordinator_roles.koordlet.system.errors import SystemFileError
from koordinator_roles.koordlet.system.paths import HostPaths


class NodeInfoCollector(Collector):
    """Writes the KV facts (when they change) and the CPU→NUMA map the NUMA collectors use."""

    name = "NodeInfoCollector"

    def __init__(self, paths: HostPaths, cache, interval: float) -> None:
        self.paths = paths
        self.cache = cache
        self.interval = interval
        self._written: tuple | None = None

    def collect(self, ctx: Round) -> None:
        cpu_info, numa_info, from_sysfs = self.read(ctx)
        if cpu_info is None:
            return
        cpu_to_numa = {c["id"]: c["node"] for c in cpu_info["cpus"]}
        ctx.state.cpu_to_numa = cpu_to_numa
        ctx.state.numa_nodes = [n["id"] for n in numa_info["nodes"]]
        ctx.state.numa_from_sysfs = from_sysfs
        if self._written != (cpu_info, numa_info):
            self.cache.set_kv(kinds.KV_NODE_CPU_INFO, cpu_info)
            self.cache.set_kv(kinds.KV_NODE_NUMA_INFO, numa_info)
            self._written = (cpu_info, numa_info)

    def read(self, ctx: Round) -> tuple[dict | None, dict, bool]:
        """(cpu info, NUMA info, whether NUMA came from sysfs); cpu info None when no CPU is known."""
        problems = ctx.problems
        now = ctx.now
        try:
            cpuinfo = procfs.read_cpuinfo(self.paths)
        except SystemFileError as err:
            problems.report("cpuinfo", now, "CPU model unknown: %s", err)
            cpuinfo = {"model": "", "vendor": "", "processors": []}
        try:
            cpus = sysfs.cpu_topology(self.paths)
        except SystemFileError as err:
            problems.report("cpu-topology", now, "CPU topology from sysfs unavailable: %s", err)
            cpus = []
        if not cpus:
            cpus = [{"id": p["id"], "core": p["core"] if p["core"] is not None else p["id"],
                     "socket": p["socket"] if p["socket"] is not None else 0} for p in cpuinfo["processors"]]
        if not cpus:
            try:
                ids = sorted(procfs.read_cpu_ticks(self.paths).per_cpu)
            except SystemFileError as err:
                problems.report("cpu-list", now, "node info skipped, no CPU list: %s", err)
                return None, {}, False
            cpus = [{"id": i, "core": i, "socket": 0} for i in ids]

        nodes, from_sysfs = self._numa_nodes(ctx, [c["id"] for c in cpus])
        cpu_node = {cpu: n["id"] for n in nodes for cpu in n["cpus"]}
        cpu_list = [{"id": c["id"], "core": c["core"], "socket": c["socket"], "node": cpu_node.get(c["id"], 0)}
                    for c in sorted(cpus, key=lambda c: c["id"])]
        cpu_info = {
            "model": cpuinfo["model"], "vendor": cpuinfo["vendor"], "cpus": cpu_list,
            "total_cpus": len(cpu_list),
            "total_cores": len({(c["socket"], c["core"]) for c in cpu_list}),
            "total_sockets": len({c["socket"] for c in cpu_list}),
            "total_numa_nodes": len(nodes),
        }
        return cpu_info, {"nodes": nodes}, from_sysfs

    def _numa_nodes(self, ctx: Round, cpu_ids: list[int]) -> tuple[list[dict], bool]:
        try:
            ids = sysfs.numa_node_ids(self.paths)
            nodes = []
            for node in ids:
                mem = sysfs.numa_meminfo(self.paths, node)
                nodes.append({
                    "id": node, "cpus": sysfs.numa_cpulist(self.paths, node),
                    "mem_total": mem.get("MemTotal", 0) * 1024, "mem_free": mem.get("MemFree", 0) * 1024,
                    "hugepages_2Mi": sysfs.numa_hugepages(self.paths, node, sysfs.HUGEPAGE_2MI_KB),
                    "hugepages_1Gi": sysfs.numa_hugepages(self.paths, node, sysfs.HUGEPAGE_1GI_KB),
                })
            if nodes:
                return nodes, True
        except SystemFileError as err:
            ctx.problems.report("numa-info", ctx.now, "NUMA info from sysfs unavailable, using one node: %s", err)
        try:
            meminfo = procfs.read_meminfo(self.paths)
        except SystemFileError as err:
            ctx.problems.report("numa-meminfo", ctx.now, "node memory size unknown: %s", err)
            meminfo = {}
        return [{"id": 0, "cpus": sorted(cpu_ids), "mem_total": meminfo.get("MemTotal", 0) * 1024,
                 "mem_free": meminfo.get("MemFree", 0) * 1024, "hugepages_2Mi": 0, "hugepages_1Gi": 0}], False
