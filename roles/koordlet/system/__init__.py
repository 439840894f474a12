"""Host access for the koordlet: configurable roots, the kubelet's cgroup layout and the file readers.

- :mod:`.paths`: :class:`HostPaths` (``--proc-root``, ``--sys-root``, ``--cgroup-root``);
- :mod:`.cgroup`: :class:`CgroupLayout` (v1/v2, systemd/cgroupfs), :func:`detect_layout`, host-application dirs;
- :mod:`.procfs`, :mod:`.sysfs`, :mod:`.cgroupfs`: readers; failures raise :class:`SystemFileError`
  naming the path.
"""

from koordinator_roles.koordlet.system.cgroup import CgroupLayout, detect_layout, host_application_dir
from koordinator_roles.koordlet.system.errors import SystemFileError
from koordinator_roles.koordlet.system.paths import HostPaths

__all__ = ["CgroupLayout", "HostPaths", "SystemFileError", "detect_layout", "host_application_dir"]
