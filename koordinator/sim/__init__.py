"""Simulated nodes: fake kernel trees and a stand-in kubelet, for ``koordinator local`` and tests.

There is no kubelet on a developer machine, and a koordlet needs a node to measure. The
simulator (``koordinator simulate-nodes``, :class:`koordinator.sim.simulator.NodeSimulator`) keeps,
for every simulated node, a directory the koordlet reads exactly as it reads a real host —
only the roots differ (``--proc-root``, ``--sys-root``, ``--cgroup-root``)::

    <root>/<node>/.koordinator-sim           marker: the tree is the simulator's (wiped on its restart)
    <root>/<node>/proc/stat                  cpu and cpuN lines in USER_HZ (100) ticks, btime, ...
    <root>/<node>/proc/meminfo               MemTotal, MemFree, MemAvailable, Cached, ... in kB
    <root>/<node>/proc/cpuinfo               one block per logical CPU (model name, vendor_id, ...)
    <root>/<node>/sys/devices/system/cpu/cpuN/topology/{core_id,physical_package_id,thread_siblings_list,...}
    <root>/<node>/sys/devices/system/cpu/cpuN/cache/indexK/{level,type,size,shared_cpu_list}
    <root>/<node>/sys/devices/system/node/nodeN/{cpulist,meminfo,hugepages/hugepages-*kB/nr_hugepages}
    <root>/<node>/cgroup/...                 cgroup v2 (default) or v1 (cpu/, cpuacct/, cpuset/, memory/)

With GPUs (``--gpus-per-node N`` or the Node annotation ``sim.koordinator.sh/gpus: "N"``; see
:mod:`koordinator.sim.gpus`) the tree also holds what an NVIDIA host shows, and the simulator keeps the
node's ``Device`` object, its GPU labels and ``nvidia.com/gpu``::

    <root>/<node>/sys/bus/pci/devices/<busID>  -> the device dir: vendor 0x10de, class 0x030200, numa_node, ...
    <root>/<node>/proc/driver/nvidia/gpus/<busID>/information   Model, GPU UUID, Bus Location, Device Minor
    <root>/<node>/dev/nvidia<minor>

With a hook-server registration directory (``--hook-server-config-dir``, ``{node}`` for the node name;
``koordinator local`` passes each koordlet's) the stand-in runtime calls the registered hook servers'
``PreRunPodSandbox`` and ``PreCreateContainer`` before it creates a pod's cgroups, as koord-runtime-proxy
would, and applies their answers (see :mod:`koordinator.sim.hooks`); each container's environment is in::

    <root>/<node>/containers/<container id>/environ     KEY=VALUE entries ended by NUL, as /proc/<pid>/environ

The cgroup hierarchy is the kubelet's: ``kubepods.slice`` (systemd driver, default) or
``kubepods`` (cgroupfs), QoS directories for Burstable and BestEffort, a directory per pod and one
per container (``cri-containerd-<id>.scope`` / ``<id>``), with ``cpu.stat``, ``memory.current``,
``memory.stat``, ``memory.max``, ``cpu.max``, ... on v2 and ``cpuacct.usage``, ``cpu.stat``,
``memory.usage_in_bytes``, ``memory.limit_in_bytes``, ``memory.stat`` (``total_*`` keys), ... on v1.

The CPUs and memory are the Node's ``status.capacity`` (2 sockets / 2 NUMA nodes from 8 CPUs on when
they divide evenly, hyper-threaded when even). Usage follows annotations (see
:mod:`koordinator.sim.profiles` for the grammar)::

    sim.koordinator.sh/cpu: "500m"                         steady, or sine(...), ramp(...), square(...)
    sim.koordinator.sh/memory: "1Gi"
    sim.koordinator.sh/page-cache: "256Mi"                 default 0
    sim.koordinator.sh/duration: "5m"                      the pod then Succeeds
    sim.koordinator.sh/exit-code: "1"                      ... or, not 0, Fails with that exit code (reason Error)
    sim.koordinator.sh/system-usage: "cpu=500m,memory=2Gi" on the Node; default cpu=250m,memory=1Gi

without them a pod uses half of its requests, never more than its limits. A bad annotation gives
the default and a Warning event ``InvalidSimulationProfile`` naming the annotation and value.

Modules: :mod:`~koordinator.sim.tree` (the file formats and atomic writes),
:mod:`~koordinator.sim.profiles` (annotations → usage), :mod:`~koordinator.sim.simulator` (the
kubelet and the counters), :mod:`~koordinator.sim.gpus` (simulated GPUs), :mod:`~koordinator.sim.hooks`
(the runtime's hook calls), :mod:`~koordinator.sim.command` (the subcommand). This package imports
no role.
"""
