"""The koordlet's resource executor (reference A.10): validated, cached, audited cgroup writes.

- :mod:`.executor`: :class:`ResourceExecutor`, :class:`CgroupUpdate`, :class:`Result`, :class:`HostFiles`;
- :mod:`.audit`: :class:`AuditLog` (JSON lines under ``<run-dir>/audit/``, rotated by size).

The v1 → v2 file registry and the value checks live in :mod:`koordinator_roles.koordlet.system.resources`.
"""

from koordinator_roles.koordlet.resourceexecutor.audit import AuditLog
from koordinator_roles.koordlet.resourceexecutor.executor import CgroupUpdate, HostFiles, ResourceExecutor, Result

__all__ = ["AuditLog", "CgroupUpdate", "HostFiles", "ResourceExecutor", "Result"]
