"""What the koordlet knows about its node and what it reports about it (reference A.6).

- :class:`StatesInformer` (:mod:`.states`): the Node, its pods (kubelet ``/pods/`` or the API),
  NodeSLO and NodeMetric specs merged with the koordlet defaults, change callbacks;
- :class:`NodeMetricReporter`: the NodeMetric status;
- :class:`NodeTopologyReporter`: the NodeResourceTopology (gate ``NodeTopologyReport``);
- :class:`DeviceReporter`: the Device with the device daemon's accelerators, else the GPUs NVML finds
  (gate ``Accelerators``).
"""

from koordinator_roles.koordlet.statesinformer.device_reporter import DeviceReporter
from koordinator_roles.koordlet.statesinformer.kubelet import KubeletClient, KubeletError, parse_kubelet_addr
from koordinator_roles.koordlet.statesinformer.nodemetric_reporter import NodeMetricReporter
from koordinator_roles.koordlet.statesinformer.nrt_reporter import NodeTopologyReporter
from koordinator_roles.koordlet.statesinformer.states import PodMeta, StatesInformer

__all__ = ["DeviceReporter", "KubeletClient", "KubeletError", "NodeMetricReporter", "NodeTopologyReporter",
           "PodMeta", "StatesInformer", "parse_kubelet_addr"]
