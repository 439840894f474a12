"""Pod and container CPU/memory from cgroups (reference A.4.2) and CPU throttling ratios (A.4.3).

Every pod and container keeps its own baseline: the first round only records it; a counter that
went backwards (a recreated cgroup) starts a new baseline without a sample. A pod whose files are
missing or unreadable is skipped with its containers (one warning per pod, debug afterwards); a
bad container only skips itself. These loops are the hot path of a round (hundreds of cgroups a
second), hence the local-variable style.
"""

from __future__ import annotations

from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.metriccache.model import Sample
from koordinator_roles.koordlet.metricsadvisor.framework import Baselines, Collector, Round, Usage
from koordinator_roles.koordlet.system.errors import SystemFileError

_POD_KEY = "pod"
_CONTAINER_KEY = "container"


def _rate(prev, value: int, now: float) -> float | None:
    """Cores from two cumulative ns readings; None for the first reading, a reset or no time passed."""
    if prev is None:
        return None
    last_value, last_ts = prev
    elapsed = now - last_ts
    if elapsed <= 0 or value < last_value:
        return None
    return (value - last_value) / (elapsed * 1e9)


class PodResourceCollector(Collector):
    """pod_cpu_usage, pod_memory_usage (pod_uid) and container_cpu_usage, container_memory_usage
    (container_id); also the pods' sums (and NUMA memory) for the system-usage collector."""

    name = "PodResourceCollector"

    def __init__(self, baselines: Baselines) -> None:
        self.baselines = baselines

    def collect(self, ctx: Round) -> None:
        now = ctx.now
        reader = ctx.cgroups
        cpu_usage_ns = reader.cpu_usage_ns
        memory_usage = reader.memory_usage
        swap = self.baselines.swap
        append = ctx.samples.append
        problems = ctx.problems
        total_cpu = 0.0
        total_memory = 0.0
        numa_total: dict[int, float] = {}
        pods_last: dict[str, dict] = {}
        containers_last: dict[str, dict] = {}
        for pod in ctx.pods():
            uid = pod.uid
            if pod.error is not None:
                problems.report(uid, now, "pod %s skipped: %s", pod.display, pod.error)
                continue
            try:
                usage_ns = cpu_usage_ns(pod.cgroup_dir)
                memory = memory_usage(pod.cgroup_dir)[0]
            except SystemFileError as err:
                problems.report(uid, now, "pod %s skipped: %s", pod.display, err)
                continue
            cpu = _rate(swap((_POD_KEY, uid), usage_ns, now), usage_ns, now)
            if cpu is not None:
                labels = pod.labels
                append(Sample(kinds.POD_CPU_USAGE, cpu, now, labels))
                append(Sample(kinds.POD_MEMORY_USAGE, float(memory), now, labels))
                total_cpu += cpu
                total_memory += memory
                pods_last[uid] = {"cpu": cpu, "memory": memory}
                numa = self._numa(ctx, pod)
                if numa:
                    for node, value in numa.items():
                        numa_total[node] = numa_total.get(node, 0) + value
            for cname, cid, cdir, labels in pod.containers:
                try:
                    c_usage = cpu_usage_ns(cdir)
                    c_memory = memory_usage(cdir)[0]
                except SystemFileError as err:
                    problems.report(uid, now, "pod %s container %s (%s) skipped: %s", pod.display, cname, cid, err)
                    continue
                c_cpu = _rate(swap((_CONTAINER_KEY, cid), c_usage, now), c_usage, now)
                if c_cpu is None:
                    continue
                append(Sample(kinds.CONTAINER_CPU_USAGE, c_cpu, now, labels))
                append(Sample(kinds.CONTAINER_MEMORY_USAGE, float(c_memory), now, labels))
                containers_last[cid] = {"cpu": c_cpu, "memory": c_memory, "pod_uid": uid}
        ctx.state.pods = Usage(now, total_cpu, total_memory, None, numa_total)
        ctx.last["pods"] = pods_last
        ctx.last["containers"] = containers_last

    @staticmethod
    def _numa(ctx: Round, pod) -> dict[int, int] | None:
        """The pod's memory per NUMA node; a missing/bad numa_stat only loses the NUMA split
        (warned once for the whole node: kernels without it would otherwise warn per pod)."""
        try:
            return ctx.cgroups.memory_numa(pod.cgroup_dir)
        except SystemFileError as err:
            ctx.problems.report("memory.numa_stat", ctx.now, "pod NUMA memory unavailable (pod %s): %s",
                                pod.display, err)
            return None


class PodThrottledCollector(Collector):
    """pod_cpu_throttled and container_cpu_throttled: Δnr_throttled / Δnr_periods (0 when no period passed)."""

    name = "PodThrottledCollector"

    def __init__(self, baselines: Baselines) -> None:
        self.baselines = baselines

    def collect(self, ctx: Round) -> None:
        now = ctx.now
        throttling = ctx.cgroups.cpu_throttling
        swap = self.baselines.swap
        append = ctx.samples.append
        problems = ctx.problems
        ratio_of = self._ratio
        pods_last = ctx.last.setdefault("pods", {})
        containers_last = ctx.last.setdefault("containers", {})
        for pod in ctx.pods():
            uid = pod.uid
            if pod.error is not None:
                continue            # reported by the resource collector
            try:
                counters = throttling(pod.cgroup_dir)
            except SystemFileError as err:
                problems.report(uid, now, "pod %s throttling skipped: %s", pod.display, err)
                continue
            ratio = ratio_of(swap((_POD_KEY, uid), counters, now), counters)
            if ratio is not None:
                append(Sample(kinds.POD_CPU_THROTTLED, ratio, now, pod.labels))
                last = pods_last.get(uid)
                if last is not None:
                    last["throttled"] = ratio
            for cname, cid, cdir, labels in pod.containers:
                try:
                    counters = throttling(cdir)
                except SystemFileError as err:
                    problems.report(uid, now, "pod %s container %s (%s) throttling skipped: %s",
                                    pod.display, cname, cid, err)
                    continue
                ratio = ratio_of(swap((_CONTAINER_KEY, cid), counters, now), counters)
                if ratio is not None:
                    append(Sample(kinds.CONTAINER_CPU_THROTTLED, ratio, now, labels))
                    last = containers_last.get(cid)
                    if last is not None:
                        last["throttled"] = ratio

    @staticmethod
    def _ratio(prev, counters: tuple[int, int]) -> float | None:
        if prev is None:
            return None
        (last_periods, last_throttled), _ = prev
        periods, throttled = counters
        if periods < last_periods or throttled < last_throttled:
            return None          # counters reset: the new values are the baseline
        delta_periods = periods - last_periods
        if delta_periods <= 0:
            return 0.0
        return (throttled - last_throttled) / delta_periods
