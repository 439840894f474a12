"""NodeNUMAResource (reference §2.2): cpusets for LSE/LSR prod pods, NUMA topology policies, NUMA-aware scores."""

from koordinator_roles.scheduler.plugins.nodenumaresource.plugin import NAME, NodeNUMAResource, new

__all__ = ["NAME", "NodeNUMAResource", "new"]
