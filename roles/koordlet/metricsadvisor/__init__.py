"""The koordlet's metrics advisor (reference A.4): collectors of node, NUMA, pod, container,
host-application, BE-tier and system usage, and of static node facts, feeding the metric cache.

More collectors (CPI, PSI, page cache, resctrl, cold pages, devices) plug in as
:class:`~koordinator_roles.koordlet.metricsadvisor.framework.Collector` subclasses.
"""

from koordinator_roles.koordlet.metricsadvisor.advisor import MetricsAdvisor
from koordinator_roles.koordlet.metricsadvisor.framework import Collector, Round, SharedState

__all__ = ["Collector", "MetricsAdvisor", "Round", "SharedState"]
