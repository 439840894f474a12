"""Metric kind names, their property labels, and the KV keys of the metric cache.

The names and label sets follow Koordinator's koordlet metric cache (reference A.5): a sample
must carry exactly the property labels of its kind; a query may select on any subset of them.
"""

from __future__ import annotations

# Node level.
NODE_CPU_USAGE = "node_cpu_usage"
NODE_MEMORY_USAGE = "node_memory_usage"
NODE_MEMORY_USAGE_WITH_PAGE_CACHE = "node_memory_usage_with_page_cache"
NODE_MEMORY_WITH_HOT_PAGE_USAGE = "node_memory_with_hot_page_usage"
NODE_MEMORY_COLD_PAGE_SIZE = "node_memory_cold_page_size"
NODE_NUMA_CPU_USAGE = "node_numa_cpu_usage"
NODE_NUMA_MEMORY_USAGE = "node_numa_memory_usage"
NODE_GPU_CORE_USAGE = "node_gpu_core_usage"
NODE_GPU_MEMORY_USAGE = "node_gpu_memory_usage"
NODE_GPU_MEMORY_TOTAL = "node_gpu_memory_total"
NODE_BE = "node_be"

# System (node minus pods minus host applications).
SYS_CPU_USAGE = "sys_cpu_usage"
SYS_MEMORY_USAGE = "sys_memory_usage"
SYS_NUMA_CPU_USAGE = "sys_numa_cpu_usage"
SYS_NUMA_MEMORY_USAGE = "sys_numa_memory_usage"

# Pod level.
POD_CPU_USAGE = "pod_cpu_usage"
POD_MEMORY_USAGE = "pod_memory_usage"
POD_MEMORY_USAGE_WITH_PAGE_CACHE = "pod_memory_usage_with_page_cache"
POD_MEMORY_WITH_HOT_PAGE_USAGE = "pod_memory_with_hot_page_usage"
POD_MEMORY_COLD_PAGE_SIZE = "pod_memory_cold_page_size"
POD_CPU_THROTTLED = "pod_cpu_throttled"
POD_GPU_CORE_USAGE = "pod_gpu_core_usage"
POD_GPU_MEMORY_USAGE = "pod_gpu_memory_usage"
POD_GPU_MEMORY_TOTAL = "pod_gpu_memory_total"
POD_PSI = "pod_psi"
POD_PSI_CPU_FULL_SUPPORTED = "pod_psi_cpu_full_supported"

# Container level.
CONTAINER_CPU_USAGE = "container_cpu_usage"
CONTAINER_MEMORY_USAGE = "container_memory_usage"
CONTAINER_MEMORY_USAGE_WITH_PAGE_CACHE = "container_memory_usage_with_page_cache"
CONTAINER_MEMORY_WITH_HOT_PAGE_USAGE = "container_memory_with_hot_page_usage"
CONTAINER_MEMORY_COLD_PAGE_SIZE = "container_memory_cold_page_size"
CONTAINER_CPU_THROTTLED = "container_cpu_throttled"
CONTAINER_GPU_CORE_USAGE = "container_gpu_core_usage"
CONTAINER_GPU_MEMORY_USAGE = "container_gpu_memory_usage"
CONTAINER_GPU_MEMORY_TOTAL = "container_gpu_memory_total"
CONTAINER_CPI = "container_cpi"
CONTAINER_PSI = "container_psi"
CONTAINER_PSI_CPU_FULL_SUPPORTED = "container_psi_cpu_full_supported"

# Host applications (NodeSLO hostApplications).
HOST_APPLICATION_CPU_USAGE = "host_application_cpu_usage"
HOST_APPLICATION_MEMORY_USAGE = "host_application_memory_usage"
HOST_APPLICATION_MEMORY_USAGE_WITH_PAGE_CACHE = "host_application_memory_usage_with_page_cache"
HOST_APPLICATION_MEMORY_WITH_HOT_PAGE_USAGE = "host_application_memory_with_hot_page_usage"
HOST_APPLICATION_MEMORY_COLD_PAGE_SIZE = "host_application_memory_cold_page_size"

# Resctrl (RDT).
RESCTRL_RESOURCE_LLC = "resctrl_resource_llc"
RESCTRL_RESOURCE_MB = "resctrl_resource_mb"

# Property label names.
LABEL_NUMA_NODE_ID = "numa_node_id"
LABEL_POD_UID = "pod_uid"
LABEL_CONTAINER_ID = "container_id"
LABEL_HOST_APP_NAME = "host_app_name"
LABEL_GPU_MINOR = "gpu_minor"
LABEL_GPU_DEVICE_UUID = "gpu_device_uuid"
LABEL_BE_RESOURCE = "be_resource"
LABEL_BE_ALLOCATION = "be_allocation"
LABEL_CPI_RESOURCE = "cpi_resource"
LABEL_PSI_RESOURCE = "psi_resource"
LABEL_PSI_PRECISION = "psi_precision"
LABEL_PSI_DEGREE = "psi_degree"
LABEL_QOS = "qos"
LABEL_CACHE_ID = "cache_id"
LABEL_RESCTRL_TYPE = "resctrl_type"
LABEL_RESCTRL_MB_TYPE = "resctrl_mb_type"

# node_be label values: the BE resource collector writes them, BECPUEvict reads them (milli-cores).
BE_RESOURCE_CPU = "cpu"
BE_ALLOCATION_USAGE = "usage"
BE_ALLOCATION_REQUEST = "request"
BE_ALLOCATION_REAL_LIMIT = "real-limit"

_NUMA = (LABEL_NUMA_NODE_ID,)
_POD = (LABEL_POD_UID,)
_CONTAINER = (LABEL_CONTAINER_ID,)
_HOST_APP = (LABEL_HOST_APP_NAME,)
_GPU = (LABEL_GPU_MINOR, LABEL_GPU_DEVICE_UUID)
_PSI = (LABEL_PSI_RESOURCE, LABEL_PSI_PRECISION, LABEL_PSI_DEGREE)

#: kind -> its property label names; a sample must carry exactly these labels.
LABELS: dict[str, tuple[str, ...]] = {
    NODE_CPU_USAGE: (),
    NODE_MEMORY_USAGE: (),
    NODE_MEMORY_USAGE_WITH_PAGE_CACHE: (),
    NODE_MEMORY_WITH_HOT_PAGE_USAGE: (),
    NODE_MEMORY_COLD_PAGE_SIZE: (),
    NODE_NUMA_CPU_USAGE: _NUMA,
    NODE_NUMA_MEMORY_USAGE: _NUMA,
    NODE_GPU_CORE_USAGE: _GPU,
    NODE_GPU_MEMORY_USAGE: _GPU,
    NODE_GPU_MEMORY_TOTAL: _GPU,
    NODE_BE: (LABEL_BE_RESOURCE, LABEL_BE_ALLOCATION),
    SYS_CPU_USAGE: (),
    SYS_MEMORY_USAGE: (),
    SYS_NUMA_CPU_USAGE: _NUMA,
    SYS_NUMA_MEMORY_USAGE: _NUMA,
    POD_CPU_USAGE: _POD,
    POD_MEMORY_USAGE: _POD,
    POD_MEMORY_USAGE_WITH_PAGE_CACHE: _POD,
    POD_MEMORY_WITH_HOT_PAGE_USAGE: _POD,
    POD_MEMORY_COLD_PAGE_SIZE: _POD,
    POD_CPU_THROTTLED: _POD,
    POD_GPU_CORE_USAGE: _POD + _GPU,
    POD_GPU_MEMORY_USAGE: _POD + _GPU,
    POD_GPU_MEMORY_TOTAL: _POD + _GPU,
    POD_PSI: _POD + _PSI,
    POD_PSI_CPU_FULL_SUPPORTED: _POD,
    CONTAINER_CPU_USAGE: _CONTAINER,
    CONTAINER_MEMORY_USAGE: _CONTAINER,
    CONTAINER_MEMORY_USAGE_WITH_PAGE_CACHE: _CONTAINER,
    CONTAINER_MEMORY_WITH_HOT_PAGE_USAGE: _CONTAINER,
    CONTAINER_MEMORY_COLD_PAGE_SIZE: _CONTAINER,
    CONTAINER_CPU_THROTTLED: _CONTAINER,
    CONTAINER_GPU_CORE_USAGE: _CONTAINER + _GPU,
    CONTAINER_GPU_MEMORY_USAGE: _CONTAINER + _GPU,
    CONTAINER_GPU_MEMORY_TOTAL: _CONTAINER + _GPU,
    CONTAINER_CPI: (LABEL_POD_UID, LABEL_CONTAINER_ID, LABEL_CPI_RESOURCE),
    CONTAINER_PSI: (LABEL_POD_UID, LABEL_CONTAINER_ID) + _PSI,
    CONTAINER_PSI_CPU_FULL_SUPPORTED: (LABEL_POD_UID, LABEL_CONTAINER_ID),
    HOST_APPLICATION_CPU_USAGE: _HOST_APP,
    HOST_APPLICATION_MEMORY_USAGE: _HOST_APP,
    HOST_APPLICATION_MEMORY_USAGE_WITH_PAGE_CACHE: _HOST_APP,
    HOST_APPLICATION_MEMORY_WITH_HOT_PAGE_USAGE: _HOST_APP,
    HOST_APPLICATION_MEMORY_COLD_PAGE_SIZE: _HOST_APP,
    RESCTRL_RESOURCE_LLC: (LABEL_QOS, LABEL_CACHE_ID),
    RESCTRL_RESOURCE_MB: (LABEL_QOS, LABEL_CACHE_ID, LABEL_RESCTRL_TYPE, LABEL_RESCTRL_MB_TYPE),
}

# KV store keys (static node information written by the node-info collector).
KV_NODE_CPU_INFO = "node_cpu_info"
KV_NODE_NUMA_INFO = "node_numa_info"
KV_NODE_LOCAL_STORAGE_INFO = "node_local_storage_info"
KV_GPU_DEVICES = "gpu_devices"
KV_RDMA_DEVICES = "rdma_devices"
