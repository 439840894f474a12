"""NodeResourceTopology reporting (reference A.6.4; gate ``NodeTopologyReport``).

Every ``node-topology-sync-interval`` (3 s) the reporter builds, from the KV node info the node-info
collector keeps in the metric cache, the Node and its pods:

- ``zones``: one ``Node`` zone ``node-<i>`` per NUMA node with ``cpu`` (its logical CPUs), ``memory``
  (MemTotal minus huge pages) and, with ``HugePageReport``, ``hugepages-2Mi``/``hugepages-1Gi``;
  allocatable = available = capacity, less an equal share of the kubelet reservation (capacity −
  allocatable, rounded up per zone) when the node is labelled
  ``node.koordinator.sh/enable-numa-reservation=true``;
- annotations ``node.koordinator.sh/cpu-basic-info``, ``cpu-topology``, ``cpu-shared-pools`` (all CPUs
  minus the cpusets of pods' ``scheduling.koordinator.sh/resource-status``), ``be-cpu-shared-pools``
  (minus LSE pods' cpusets only), both also minus the node's reserved CPUs
  (``node.koordinator.sh/reservation``) and exclusive system-QoS CPUs
  (``node.koordinator.sh/system-qos-resource``); those two node annotations are copied
  (the reservation normalised to ``{"reservedCPUs": ...}``), and the node label
  ``node.koordinator.sh/enable-numa-reservation`` mirrored;
- with a kubelet address: ``topologyPolicies`` from the kubelet's topology manager policy and scope,
  and ``kubelet.koordinator.sh/cpu-manager-policy``; without one ``topologyPolicies`` is ``["None"]``
  and that annotation is not written.

The object (named after the node, owned by the Node) is created when missing and updated only when
something it reports changed. Zone resources other than cpu, memory, GPUs and huge pages (the
manager's NUMA-level batch resources) are preserved.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import threading
from decimal import Decimal
from typing import Any

from koordinator.apis import quantity
from koordinator.apis.extension import ANNOTATION_RESOURCE_STATUS, QOS_LSE, qos_class
from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.system.cpuset import format_cpuset, parse_cpuset, take_by_topology
from koordinator_roles.koordlet.statesinformer.kubelet import KubeletClient, KubeletError
from koordinator_roles.koordlet.statesinformer.nodeobject import owner_reference, sync_node_object
from koordinator_roles.koordlet.statesinformer.problems import TaskProblem

log = logging.getLogger("koordinator.koordlet.statesinformer.nrt")

Obj = dict[str, Any]

ANNOTATION_CPU_BASIC_INFO = "node.koordinator.sh/cpu-basic-info"
ANNOTATION_CPU_TOPOLOGY = "node.koordinator.sh/cpu-topology"
ANNOTATION_CPU_SHARED_POOLS = "node.koordinator.sh/cpu-shared-pools"
ANNOTATION_BE_CPU_SHARED_POOLS = "node.koordinator.sh/be-cpu-shared-pools"
ANNOTATION_KUBELET_CPU_MANAGER_POLICY = "kubelet.koordinator.sh/cpu-manager-policy"
ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
ANNOTATION_SYSTEM_QOS_RESOURCE = "node.koordinator.sh/system-qos-resource"
LABEL_NUMA_RESERVATION = "node.koordinator.sh/enable-numa-reservation"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "Koordinator"

ZONE_TYPE_NODE = "Node"
POLICY_NONE = "None"
_POLICY_NAMES = {"single-numa-node": "SingleNUMANode", "restricted": "Restricted", "best-effort": "BestEffort"}

_HUGEPAGE_SIZES = (("hugepages-2Mi", "hugepages_2Mi", 2 << 20), ("hugepages-1Gi", "hugepages_1Gi", 1 << 30))
_OWN_ANNOTATIONS = (ANNOTATION_CPU_BASIC_INFO, ANNOTATION_CPU_TOPOLOGY, ANNOTATION_CPU_SHARED_POOLS,
                    ANNOTATION_BE_CPU_SHARED_POOLS, ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
                    ANNOTATION_NODE_RESERVATION, ANNOTATION_SYSTEM_QOS_RESOURCE)


def zone_name(numa_id: int) -> str:
    return f"node-{numa_id}"


def is_reported_resource(name: str) -> bool:
    """Zone resources the koordlet owns: cpu, memory, huge pages and GPUs (everything else is kept)."""
    return name in ("cpu", "memory") or name.startswith("hugepages-") or "gpu" in name


def _dumps(value: Any) -> str:
    """Go's compact ``json.Marshal`` layout (fields in the order given)."""
    return json.dumps(value, separators=(",", ":"))


def topology_policies(kubelet_config: Obj | None) -> list[str]:
    """``[<policy><scope>Level]`` from the kubelet's topology manager settings; ``["None"]`` without."""
    cfg = kubelet_config or {}
    name = _POLICY_NAMES.get(cfg.get("topologyManagerPolicy") or "")
    if name is None:
        return [POLICY_NONE]
    scope = "Pod" if cfg.get("topologyManagerScope") == "pod" else "Container"
    return [f"{name}{scope}Level"]


def cpu_basic_info(cpu_info: Obj) -> Obj:
    """The ``cpu-basic-info`` document (empty values left out, as Go's ``omitempty`` does)."""
    out: Obj = {}
    if cpu_info.get("model"):
        out["cpuModel"] = cpu_info["model"]
    if (cpu_info.get("total_cpus") or 0) > (cpu_info.get("total_cores") or 0) > 0:
        out["hyperThreadEnabled"] = True
    if cpu_info.get("turbo_enabled"):
        out["turboEnabled"] = True
    if cpu_info.get("cat_l3_cbm_mask"):
        out["catL3CbmMask"] = cpu_info["cat_l3_cbm_mask"]
    if cpu_info.get("vendor"):
        out["vendorID"] = cpu_info["vendor"]
    return out


def shared_pools(cpus: list[Obj], usable: set[int]) -> list[Obj]:
    """``[{"socket", "node", "cpuset"}]`` of the usable CPUs grouped by (socket, NUMA node), sorted."""
    groups: dict[tuple[int, int], list[int]] = {}
    for c in cpus:
        if c["id"] in usable:
            groups.setdefault((c["socket"], c["node"]), []).append(c["id"])
    return [{"socket": s, "node": n, "cpuset": format_cpuset(ids)} for (s, n), ids in sorted(groups.items())]


def _pod_cpuset(pod: Obj, what: str) -> list[int]:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_RESOURCE_STATUS)
    if not raw:
        return []
    try:
        status = json.loads(raw)
    except ValueError:
        raise ValueError(f"{what}: annotation {ANNOTATION_RESOURCE_STATUS} is not JSON: {raw!r}") from None
    cpuset = status.get("cpuset") if isinstance(status, dict) else None
    return parse_cpuset(cpuset, f"{what}: annotation {ANNOTATION_RESOURCE_STATUS} cpuset") if cpuset else []


class NodeTopologyReporter:
    """Creates and updates this node's NodeResourceTopology (see the module docstring).

    ``states`` is the :class:`~.states.StatesInformer`, ``cache`` the metric cache (KV node info),
    ``kubelet`` an optional :class:`~.kubelet.KubeletClient` for ``/configz``; ``hugepages`` is the
    ``HugePageReport`` gate. :meth:`run` is the loop, :meth:`sync_once` one round.
    """

    def __init__(self, client: Any, states: Any, cache: Any, *, kubelet: KubeletClient | None = None,
                 interval: float = 3.0, hugepages: bool = False) -> None:
        self.client = client
        self.states = states
        self.cache = cache
        self.kubelet = kubelet
        self.interval = interval
        self.hugepages = hugepages
        self.kind = client.kinds.get("NodeResourceTopology")
        self._problems = TaskProblem(log, "NodeResourceTopology report")
        self._input_problems: set[str] = set()

    def run(self, stop: threading.Event) -> None:
        """Report at once, then every ``interval`` until ``stop``."""
        while not stop.is_set():
            try:
                self.sync_once()
            except Exception:  # the next round may succeed; never end the loop
                log.exception("NodeResourceTopology report failed")
            stop.wait(self.interval)

    # -- one round ---------------------------------------------------------------------------------

    def sync_once(self) -> bool:
        """Create or update the NodeResourceTopology if needed; True when something was written."""
        node = self.states.node()
        cpu_info = self.cache.get_kv(kinds.KV_NODE_CPU_INFO)
        numa_info = self.cache.get_kv(kinds.KV_NODE_NUMA_INFO)
        if node is None or not cpu_info or not numa_info:
            log.debug("NodeResourceTopology not reported yet: node=%s cpu info=%s NUMA info=%s",
                      node is not None, bool(cpu_info), bool(numa_info))
            return False
        desired = self.build(node, cpu_info, numa_info)
        return sync_node_object(self.client, self.kind, self.states.node_name,
                                new=lambda: self._new(node, desired), merge=lambda current: self.merge(current, desired),
                                problems=self._problems, what="NodeResourceTopology", log=log)

    def _new(self, node: Obj, desired: Obj) -> Obj:
        return {
            "apiVersion": self.kind.api_version, "kind": self.kind.kind,
            "metadata": {
                "name": self.states.node_name,
                "labels": {LABEL_MANAGED_BY: MANAGED_BY,
                           **{k: v for k, v in desired["labels"].items() if v is not None}},
                "annotations": {k: v for k, v in desired["annotations"].items() if v is not None},
                "ownerReferences": [owner_reference(node)],
            },
            "topologyPolicies": desired["topologyPolicies"],
            "zones": desired["zones"],
        }

    # -- the desired content -----------------------------------------------------------------------

    def build(self, node: Obj, cpu_info: Obj, numa_info: Obj) -> Obj:
        """``{"annotations", "labels", "zones", "topologyPolicies"}`` as this round would report them.

        ``annotations``/``labels`` map the keys this reporter owns to their value, None to remove.
        """
        md = node.get("metadata") or {}
        node_annotations = md.get("annotations") or {}
        node_labels = md.get("labels") or {}
        cpus = sorted((c for c in cpu_info.get("cpus") or [] if isinstance(c, dict) and "id" in c),
                      key=lambda c: c["id"])
        all_cpus = {c["id"] for c in cpus}
        annotations: dict[str, str | None] = dict.fromkeys(_OWN_ANNOTATIONS)
        annotations[ANNOTATION_CPU_BASIC_INFO] = _dumps(cpu_basic_info(cpu_info))
        annotations[ANNOTATION_CPU_TOPOLOGY] = _dumps({"detail": [
            {"id": c["id"], "core": c["core"], "socket": c["socket"], "node": c["node"]} for c in cpus]})

        kubelet_config = self._kubelet_config()
        if kubelet_config is not None:
            annotations[ANNOTATION_KUBELET_CPU_MANAGER_POLICY] = _dumps(
                self._cpu_manager_policy(kubelet_config, cpus, all_cpus))

        reserved = self._node_reserved_cpus(node_annotations, cpus, all_cpus)
        if reserved is not None:
            annotations[ANNOTATION_NODE_RESERVATION] = _dumps({"reservedCPUs": format_cpuset(reserved)}
                                                              if reserved else {})
        system_qos = self._system_qos_cpus(node_annotations)
        if ANNOTATION_SYSTEM_QOS_RESOURCE in node_annotations:
            annotations[ANNOTATION_SYSTEM_QOS_RESOURCE] = node_annotations[ANNOTATION_SYSTEM_QOS_RESOURCE]

        taken_ls, taken_be = self._pod_cpusets()
        unusable = set(reserved or ()) | system_qos
        annotations[ANNOTATION_CPU_SHARED_POOLS] = _dumps(shared_pools(cpus, all_cpus - taken_ls - unusable))
        annotations[ANNOTATION_BE_CPU_SHARED_POOLS] = _dumps(shared_pools(cpus, all_cpus - taken_be - unusable))

        labels: dict[str, str | None] = {LABEL_NUMA_RESERVATION: node_labels.get(LABEL_NUMA_RESERVATION)}
        return {
            "annotations": annotations,
            "labels": labels,
            "zones": self._zones(node, numa_info),
            "topologyPolicies": topology_policies(kubelet_config),
        }

    def _zones(self, node: Obj, numa_info: Obj) -> list[Obj]:
        nodes = sorted((n for n in numa_info.get("nodes") or [] if isinstance(n, dict) and "id" in n),
                       key=lambda n: n["id"])
        reserve = ((node.get("metadata") or {}).get("labels") or {}).get(LABEL_NUMA_RESERVATION) == "true"
        cpu_reserved = mem_reserved = 0
        if reserve and nodes:
            status = node.get("status") or {}
            capacity, allocatable = status.get("capacity") or {}, status.get("allocatable") or {}
            cpu_reserved = _ceil_div(max(_milli(capacity.get("cpu")) - _milli(allocatable.get("cpu")), 0), len(nodes))
            mem_reserved = _ceil_div(max(_value(capacity.get("memory")) - _value(allocatable.get("memory")), 0),
                                     len(nodes))
        zones = []
        for n in nodes:
            hugepage_bytes = sum(int(n.get(key) or 0) * size for _, key, size in _HUGEPAGE_SIZES)
            cpu_milli = len(n.get("cpus") or []) * 1000
            memory = max(int(n.get("mem_total") or 0) - hugepage_bytes, 0)
            resources = [
                _resource("cpu", _cpu_text(cpu_milli), _cpu_text(max(cpu_milli - cpu_reserved, 0))),
                _resource("memory", _mem_text(memory), _mem_text(max(memory - mem_reserved, 0))),
            ]
            if self.hugepages:
                for name, key, size in _HUGEPAGE_SIZES:
                    amount = _mem_text(int(n.get(key) or 0) * size)
                    resources.append(_resource(name, amount, amount))
            resources.sort(key=lambda r: r["name"])
            zones.append({"name": zone_name(n["id"]), "type": ZONE_TYPE_NODE, "resources": resources})
        return zones

    def _kubelet_config(self) -> Obj | None:
        if self.kubelet is None:
            return None
        try:
            return self.kubelet.configz()
        except KubeletError as err:
            self._input_problem(f"kubelet configuration unavailable, cpu-manager-policy not reported: {err}")
            return None

    def _cpu_manager_policy(self, cfg: Obj, cpus: list[Obj], all_cpus: set[int]) -> Obj:
        policy = cfg.get("cpuManagerPolicy") or "none"
        out: Obj = {"policy": policy}
        if cfg.get("cpuManagerPolicyOptions"):
            out["options"] = cfg["cpuManagerPolicyOptions"]
        if policy != "static":
            return out
        reserved: list[int] = []
        text = cfg.get("reservedSystemCPUs")
        try:
            if text:
                reserved = parse_cpuset(text, "kubelet reservedSystemCPUs")
            else:
                milli = sum(_milli(((cfg.get(k) or {}).get("cpu"))) for k in ("kubeReserved", "systemReserved"))
                reserved = take_by_topology(cpus, all_cpus, math.ceil(milli / 1000))
        except ValueError as err:
            self._input_problem(f"kubelet reserved CPUs: {err}")
        if reserved:
            out["reservedCPUs"] = format_cpuset(reserved)
        return out

    def _node_reserved_cpus(self, annotations: Obj, cpus: list[Obj], all_cpus: set[int]) -> list[int] | None:
        """CPUs the node reservation annotation holds back; None without the annotation."""
        raw = annotations.get(ANNOTATION_NODE_RESERVATION)
        if raw is None:
            return None
        what = f"node annotation {ANNOTATION_NODE_RESERVATION}"
        try:
            reservation = json.loads(raw)
            if not isinstance(reservation, dict):
                raise ValueError(f"{what}: expected a JSON object, got {raw!r}")
            if reservation.get("reservedCPUs"):
                return [c for c in parse_cpuset(reservation["reservedCPUs"], f"{what} reservedCPUs") if c in all_cpus]
            cpu = (reservation.get("resources") or {}).get("cpu")
            if cpu is not None:
                count = math.ceil(_milli(cpu) / 1000)
                return take_by_topology(cpus, all_cpus, min(count, len(all_cpus)))
        except ValueError as err:
            self._input_problem(str(err) if str(err).startswith(what) else f"{what}: {err}")
        return []

    def _system_qos_cpus(self, annotations: Obj) -> set[int]:
        raw = annotations.get(ANNOTATION_SYSTEM_QOS_RESOURCE)
        if raw is None:
            return set()
        what = f"node annotation {ANNOTATION_SYSTEM_QOS_RESOURCE}"
        try:
            res = json.loads(raw)
            if not isinstance(res, dict):
                raise ValueError(f"{what}: expected a JSON object, got {raw!r}")
            # cpusetExclusive defaults to true: system-QoS CPUs are taken out of the shared pools.
            if res.get("cpusetExclusive") is False or not res.get("cpuset"):
                return set()
            return set(parse_cpuset(res["cpuset"], f"{what} cpuset"))
        except ValueError as err:
            self._input_problem(str(err) if str(err).startswith(what) else f"{what}: {err}")
            return set()

    def _pod_cpusets(self) -> tuple[set[int], set[int]]:
        """(CPUs bound by any pod, CPUs bound by LSE pods) from the pods' resource-status annotation."""
        every: set[int] = set()
        lse: set[int] = set()
        for meta in self.states.pods():
            try:
                cpus = _pod_cpuset(meta.pod, f"pod {meta.namespace}/{meta.name}")
            except ValueError as err:
                self._input_problem(str(err))
                continue
            every.update(cpus)
            if qos_class(meta.pod) == QOS_LSE:
                lse.update(cpus)
        return every, lse

    def _input_problem(self, message: str) -> None:
        # Bad annotations stay bad until someone fixes them: say so once, not every 3 s.
        if message not in self._input_problems and len(self._input_problems) < 1000:
            self._input_problems.add(message)
            log.warning("NodeResourceTopology: %s", message)

    # -- merging into the stored object --------------------------------------------------------------

    @staticmethod
    def merge(current: Obj, desired: Obj) -> Obj:
        """``current`` with what this reporter owns replaced by ``desired`` (the rest kept)."""
        updated = copy.deepcopy(current)
        md = updated.setdefault("metadata", {})
        for field in ("annotations", "labels"):
            values = dict(md.get(field) or {})
            for key, value in desired[field].items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
            if values or md.get(field) is not None:
                md[field] = values
        updated["topologyPolicies"] = list(desired["topologyPolicies"])
        old_zones = {z.get("name"): z for z in current.get("zones") or [] if isinstance(z, dict)}
        zones = []
        for zone in desired["zones"]:
            old = old_zones.get(zone["name"])
            if old is None:
                zones.append(copy.deepcopy(zone))
                continue
            merged = copy.deepcopy(old)
            merged["type"] = zone["type"]
            old_resources = [r for r in old.get("resources") or [] if isinstance(r, dict)]
            ours = {r.get("name"): r for r in old_resources if is_reported_resource(r.get("name", ""))}
            if ours != {r["name"]: r for r in zone["resources"]}:
                # Only what we report is compared: the order others left the list in is not a change.
                kept = [r for r in old_resources if not is_reported_resource(r.get("name", ""))]
                merged["resources"] = sorted(kept + copy.deepcopy(zone["resources"]),
                                             key=lambda r: r.get("name", ""))
            zones.append(merged)
        updated["zones"] = zones
        return updated


def _resource(name: str, capacity: str, allocatable: str) -> Obj:
    return {"name": name, "capacity": capacity, "allocatable": allocatable, "available": allocatable}


def _cpu_text(milli: int) -> str:
    return quantity.format_quantity(Decimal(milli) / 1000)


def _mem_text(size: int) -> str:
    return quantity.format_quantity(size, quantity.BINARY_SI)


def _milli(raw: Any) -> int:
    if raw is None:
        return 0
    try:
        return quantity.milli_value(raw)
    except (quantity.QuantityError, TypeError, ValueError):
        return 0


def _value(raw: Any) -> int:
    if raw is None:
        return 0
    try:
        return quantity.value(raw)
    except (quantity.QuantityError, TypeError, ValueError):
        return 0


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)
