"""The upstream sigs.k8s.io/descheduler plugins, run by koord-descheduler's framework (reference §1.5, §1.9).

One module per plugin, each with ``NAME`` and ``new(args, handle)``; :data:`FACTORIES` maps the
upstream registry names to those factories for the plugin registry.
"""

from __future__ import annotations

from . import (duplicates, failedpods, highnodeutilization, interpodantiaffinity, lownodeutilization, nodeaffinity,
               nodetaints, podlifetime, topologyspread, toomanyrestarts)

FACTORIES = {
    m.NAME: m.new
    for m in (nodeaffinity, nodetaints, interpodantiaffinity, duplicates, toomanyrestarts, failedpods, podlifetime,
              topologyspread, lownodeutilization, highnodeutilization)
}
