"""Host (non-pod) applications of the NodeSLO (reference A.4.6): CPU and memory of their cgroups."""

from __future__ import annotations

from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.metricsadvisor.framework import Baselines, Collector, Round, Usage
from koordinator_roles.koordlet.system.cgroup import CgroupLayout, host_application_dir
from koordinator_roles.koordlet.system.errors import SystemFileError

USAGE_WITH_PAGE_CACHE = "usageWithPageCache"


def memory_collect_policy(states) -> str:
    """NodeMetric spec ``metricCollectPolicy.nodeMemoryCollectPolicy`` (default usageWithoutPageCache)."""
    spec_fn = getattr(states, "node_metric_spec", None)
    if spec_fn is None:
        return "usageWithoutPageCache"
    spec = spec_fn() or {}
    policy = (spec.get("metricCollectPolicy") or {}).get("nodeMemoryCollectPolicy")
    return policy or "usageWithoutPageCache"


class HostApplicationCollector(Collector):
    """host_application_cpu_usage, host_application_memory_usage[_with_page_cache] (host_app_name).

    CPU from the cgroup's cumulative usage (first round: baseline only), memory from memory.stat
    (without page cache) and memory.usage_in_bytes / memory.current (with). The sum handed to the
    system collector uses the NodeMetric memory policy.
    """

    name = "HostApplicationCollector"

    def __init__(self, layout: CgroupLayout, baselines: Baselines) -> None:
        self.layout = layout
        self.baselines = baselines

    def collect(self, ctx: Round) -> None:
        now = ctx.now
        reader = ctx.cgroups
        apps = ctx.states.host_applications() or []
        with_cache = memory_collect_policy(ctx.states) == USAGE_WITH_PAGE_CACHE if apps else False
        total_cpu = 0.0
        total_memory = 0.0
        last: dict[str, dict] = {}
        for app in apps:
            name = app.get("name") if isinstance(app, dict) else None
            try:
                rel_dir = host_application_dir(app, self.layout)
                usage_ns = reader.cpu_usage_ns(rel_dir)
                memory = reader.memory_usage(rel_dir)[0]
                memory_with_cache = reader.memory_current(rel_dir)
            except (SystemFileError, ValueError, AttributeError) as err:
                ctx.problems.report(("host-app", name), now, "host application %r skipped: %s", name, err)
                continue
            prev = self.baselines.swap(("host-app", name), usage_ns, now)
            if prev is None:
                continue
            elapsed_ns = (now - prev[1]) * 1e9
            if elapsed_ns <= 0 or usage_ns < prev[0]:
                ctx.problems.log.debug("host application %r CPU counter reset; new baseline", name)
                continue
            cpu = (usage_ns - prev[0]) / elapsed_ns
            labels = {kinds.LABEL_HOST_APP_NAME: name}
            ctx.add(kinds.HOST_APPLICATION_CPU_USAGE, cpu, labels)
            ctx.add(kinds.HOST_APPLICATION_MEMORY_USAGE, memory, labels)
            ctx.add(kinds.HOST_APPLICATION_MEMORY_USAGE_WITH_PAGE_CACHE, memory_with_cache, labels)
            total_cpu += cpu
            total_memory += memory_with_cache if with_cache else memory
            last[name] = {"cpu": cpu, "memory": memory, "memory_with_page_cache": memory_with_cache}
        ctx.state.host_apps = Usage(now, total_cpu, total_memory)
        ctx.last["host_applications"] = last
