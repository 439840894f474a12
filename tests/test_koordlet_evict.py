"""CPU and memory eviction (reference A.7.3–A.7.5): the triggers with hand-computed numbers, and the
execution against the embedded API server (PodDisruptionBudgets, events, cool-down, back-off)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from koordinator.runtime.client import Client
from koordinator.runtime.events import EventRecorder
from koordinator_roles.koordlet.metriccache import MetricCache, Sample, kinds
from koordinator_roles.koordlet.qosmanager import allocatableevict as alloc
from koordinator_roles.koordlet.qosmanager import cpuevict, memoryevict
from koordinator_roles.koordlet.qosmanager.evictor import EvictTask, Evictor, Victim
from koordinator_roles.koordlet.qosmanager.framework import QOSContext, QOSOptions
from koordinator_roles.koordlet.statesinformer.nodeslo import merge_node_slo_spec
from tests.waiting import wait_until

GiB = 1 << 30


def pod(name, *, qos="BE", priority=5500, batch_cpu=None, labels=None, annotations=None, uid=None,
        phase="Running", namespace="default", memory_request=None):
    """A plain pod dict; ``qos=None`` leaves the QoS label out, ``priority=None`` the spec priority."""
    lab = dict(labels or {})
    if qos is not None:
        lab["koordinator.sh/qosClass"] = qos
    requests = {}
    if batch_cpu is not None:
        requests["kubernetes.io/batch-cpu"] = str(batch_cpu)
    if memory_request is not None:
        requests["kubernetes.io/batch-memory"] = str(memory_request)
    spec = {"containers": [{"name": "c", "image": "i", "resources": {"requests": requests} if requests else {}}]}
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}", "labels": lab,
                         "annotations": dict(annotations or {})},
            "spec": spec, "status": {"phase": phase}}


def node(cpu="10", memory="1G", allocatable=None):
    return {"metadata": {"name": "n1"},
            "status": {"capacity": {"cpu": cpu, "memory": memory}, "allocatable": dict(allocatable or {})}}


def names(task):
    return [v.pod["metadata"]["name"] for v in task.victims]


ENABLED = {"evictEnabledPriorityThreshold": 5999, "koordinator.sh/eviction-enabled": "true"}
EVICTABLE = {"koordinator.sh/eviction-enabled": "true"}


# -- BECPUEvict --------------------------------------------------------------------------------------

BE_SLO = {"cpuEvictBESatisfactionLowerPercent": 50, "cpuEvictBESatisfactionUpperPercent": 75}


def be_pods():
    return [pod("a", batch_cpu=2000), pod("b", batch_cpu=1000), pod("c", batch_cpu=4000),
            pod("d", batch_cpu=1000, priority=5100),
            # LS uses the most and would come first by ratio: never a victim.
            pod("ls", qos="LS", batch_cpu=1000)]


BE_USED = {"uid-a": 1900, "uid-b": 200, "uid-c": 3000, "uid-d": 100, "uid-ls": 5000}


def test_be_cpu_evict_releases_to_the_upper_satisfaction_in_priority_then_ratio_order():
    # limit 4000 / request 10000 = 0.40 <= lower 0.50 -> release int(10000 * (0.75 - 0.40)) = 3500.
    # usage 3800 / limit 4000 = 95% >= default 90%: the BE tier is using what it has.
    figures = cpuevict.BECPUFigures(usage=3800, request=10000, limit=4000, count=10)
    task = cpuevict.be_cpu_evict(BE_SLO, node(), be_pods(), BE_USED, figures, figures, window=10,
                                 collect_interval=1)
    assert task.feature == "BECPUEvict" and task.target == "batch-cpu-request" and task.demand == 3500
    # d has the lower spec.priority; then used/request: a 0.95, c 0.75, b 0.2. No LS pod.
    assert names(task) == ["d", "a", "c", "b"]
    assert [v.releases["batch-cpu-request"] for v in task.victims] == [1000, 2000, 4000, 1000]


def test_be_cpu_evict_takes_the_smaller_of_average_and_current_release():
    avg = cpuevict.BECPUFigures(usage=3800, request=10000, limit=4000, count=10)
    # Now: limit 4500 / request 10000 = 0.45 -> int(10000 * (0.75 - 0.45)) = 3000 < 3500.
    cur = cpuevict.BECPUFigures(usage=4400, request=10000, limit=4500)
    task = cpuevict.be_cpu_evict(BE_SLO, node(), be_pods(), BE_USED, avg, cur, window=10, collect_interval=1)
    assert task.demand == 3000


@pytest.mark.parametrize("avg", [
    cpuevict.BECPUFigures(usage=3800, request=7000, limit=4000, count=10),   # 0.57 > lower 0.50: satisfied
    cpuevict.BECPUFigures(usage=3000, request=10000, limit=4000, count=10),  # 75% < 90%: not using its limit
    cpuevict.BECPUFigures(usage=3800, request=10000, limit=4000, count=3),   # 3 samples < 10s window / 3
])
def test_be_cpu_evict_does_nothing_when_satisfied_idle_or_without_enough_samples(avg):
    assert cpuevict.be_cpu_evict(BE_SLO, node(), be_pods(), BE_USED, avg, avg, window=10,
                                 collect_interval=1) is None


def test_be_cpu_evict_by_allocatable_uses_the_node_batch_cpu():
    # limit = allocatable batch-cpu 4000 (the real limit 9000 is ignored): same numbers as above.
    figures = cpuevict.BECPUFigures(usage=3800, request=10000, limit=9000, count=10)
    slo = {**BE_SLO, "cpuEvictPolicy": "evictByAllocatable"}
    task = cpuevict.be_cpu_evict(slo, node(allocatable={"kubernetes.io/batch-cpu": "4000"}), be_pods(), BE_USED,
                                 figures, figures, window=10, collect_interval=1)
    assert task.demand == 3500


@pytest.mark.parametrize("slo, logged", [
    ({"cpuEvictBESatisfactionLowerPercent": 80, "cpuEvictBESatisfactionUpperPercent": 90},
     "cpuEvictBESatisfactionLowerPercent=80 must be in (0, 60]"),
    ({"cpuEvictBESatisfactionLowerPercent": 50, "cpuEvictBESatisfactionUpperPercent": 40},
     "cpuEvictBESatisfactionUpperPercent=40 must be in (0, 100) and >= the lower percent 50"),
    ({"cpuEvictBESatisfactionLowerPercent": 50}, "cpuEvictBESatisfactionUpperPercent=None"),
])
def test_be_cpu_evict_out_of_range_satisfaction_is_ignored_and_logged(slo, logged):
    said = []
    figures = cpuevict.BECPUFigures(usage=3800, request=10000, limit=1000, count=10)
    assert cpuevict.be_cpu_evict(slo, node(), be_pods(), BE_USED, figures, figures, window=10,
                                 collect_interval=1, warn=said.append) is None
    assert len(said) == 1 and logged in said[0] and "BECPUEvict skipped" in said[0]


def test_be_cpu_evict_unconfigured_is_silent():
    said = []
    figures = cpuevict.BECPUFigures(usage=3800, request=10000, limit=1000, count=10)
    assert cpuevict.be_cpu_evict({}, node(), be_pods(), BE_USED, figures, figures, window=10,
                                 collect_interval=1, warn=said.append) is None
    assert said == []


# -- CPUEvict ----------------------------------------------------------------------------------------

def cpu_pods():
    return [pod("p1", labels=EVICTABLE, annotations={"koordinator.sh/eviction-priority": "1"}),
            pod("p2", labels=EVICTABLE),
            pod("p3", labels=EVICTABLE, priority=5100),
            pod("p4"),                                          # no eviction-enabled label
            pod("p5", qos="LS", labels=EVICTABLE),              # LS: never, however much it uses
            pod("p6", labels=EVICTABLE, priority=9500),         # above evictEnabledPriorityThreshold
            pod("p7", labels=EVICTABLE),                        # no metric
            pod("p8", labels=EVICTABLE, annotations={"koordinator.sh/eviction-policy": '["BECPUEvict"]'}),
            pod("sys", qos="SYSTEM", labels=EVICTABLE), pod("lse", qos="LSE", labels=EVICTABLE),
            pod("lsr", qos="LSR", labels=EVICTABLE)]


CPU_USED = {"uid-p1": 300, "uid-p2": 500, "uid-p3": 200, "uid-p4": 900, "uid-p5": 3000, "uid-p6": 800,
            "uid-p8": 700, "uid-sys": 4000, "uid-lse": 4000, "uid-lsr": 4000}
CPU_SLO = {"cpuEvictThresholdPercent": 70, "evictEnabledPriorityThreshold": 5999}


def test_cpu_evict_releases_down_to_threshold_minus_two():
    # int(7.55 cores * 1000) * 100 // 10000 = 75% >= 70%; lower = 70 - 2 = 68;
    # release = 10000 * (75 - 68) // 100 = 700m.
    task = cpuevict.cpu_evict(CPU_SLO, 10000, 7550, cpu_pods(), CPU_USED)
    assert task.feature == "CPUEvict" and task.target == "cpu-used" and task.demand == 700
    # eviction-priority 0 before 1; among 0: priority 5100 (p3) before 5500 (p2).
    assert names(task) == ["p3", "p2", "p1"]
    assert [v.releases["cpu-used"] for v in task.victims] == [200, 500, 300]


def test_cpu_evict_lower_percent_and_below_threshold():
    slo = {**CPU_SLO, "cpuEvictLowerPercent": 60}
    assert cpuevict.cpu_evict(slo, 10000, 7550, cpu_pods(), CPU_USED).demand == 1500   # 10000*(75-60)//100
    assert cpuevict.cpu_evict(CPU_SLO, 10000, 6999, cpu_pods(), CPU_USED) is None       # 69% < 70%


@pytest.mark.parametrize("slo, logged", [
    ({"cpuEvictThresholdPercent": 70, "cpuEvictLowerPercent": 75, "evictEnabledPriorityThreshold": 5999},
     "cpuEvictLowerPercent=75 must be below cpuEvictThresholdPercent=70"),
    ({"cpuEvictThresholdPercent": -1, "evictEnabledPriorityThreshold": 5999}, "cpuEvictThresholdPercent=-1"),
    ({"cpuEvictThresholdPercent": 70}, "evictEnabledPriorityThreshold=None must be set"),
])
def test_cpu_evict_bad_config_is_ignored_and_logged(slo, logged):
    said = []
    assert cpuevict.cpu_evict(slo, 10000, 9900, cpu_pods(), CPU_USED, warn=said.append) is None
    assert said and logged in said[0]


# -- CPUAllocatableEvict ------------------------------------------------------------------------------

ALLOC_SLO = {"cpuAllocatableEvictThresholdPercent": 80, "cpuAllocatableEvictLowerPercent": 60,
             "allocatableEvictPriorityThreshold": 5999}


def alloc_pods():
    return [pod("q1", batch_cpu=5000), pod("q2", batch_cpu=3000), pod("q3", batch_cpu=1000),
            pod("qls", qos="LS", batch_cpu=0)]


def cpu_alloc(slo, n, pods):
    config = alloc.allocatable_config(slo, "cpuAllocatableEvict", logging.warning)
    return alloc.allocatable_evict("CPUAllocatableEvict", alloc.CPU_RESOURCES, config, n, pods)


def test_cpu_allocatable_evict_over_threshold():
    # 9000 requested / 10000 allocatable = 90% > 80% -> release 9000 - 60% * 10000 = 3000.
    [task] = cpu_alloc(ALLOC_SLO, node(allocatable={"kubernetes.io/batch-cpu": "10000"}), alloc_pods())
    assert task.target == "kubernetes.io/batch-cpu-request" and task.demand == 3000
    assert names(task) == ["q1", "q2", "q3"]   # same priorities: larger request first


def test_cpu_allocatable_evict_without_allocatable_releases_everything_and_at_threshold_nothing():
    [task] = cpu_alloc(ALLOC_SLO, node(), alloc_pods())
    assert task.demand == 9000
    assert cpu_alloc(ALLOC_SLO, node(allocatable={"kubernetes.io/batch-cpu": "11250"}), alloc_pods()) == []  # 80%


def test_allocatable_priority_threshold_out_of_range_is_ignored_and_logged():
    said = []
    slo = {**ALLOC_SLO, "allocatableEvictPriorityThreshold": 9500}
    assert alloc.allocatable_config(slo, "cpuAllocatableEvict", said.append) is None
    assert "allocatableEvictPriorityThreshold=9500 must be set and <= 7999" in said[0]


# -- memory ----------------------------------------------------------------------------------------

def mem_pods():
    return [pod("m1"), pod("m2"), pod("m3"), pod("m4"), pod("m5", priority=5100),
            pod("mls", qos="LS"), pod("mlsr", qos="LSR"), pod("none", qos=None)]


MEM_USED = {"uid-m1": 30e6, "uid-m2": 50e6, "uid-m3": 0, "uid-m4": 0, "uid-m5": 10e6, "uid-mls": 400e6,
            "uid-mlsr": 300e6, "uid-none": 200e6}


def test_be_memory_evict_default_threshold_and_order():
    # The merged NodeSLO default threshold is 70%, lower 68%: 750e6 of 1e9 = 75% ->
    # release 1e9 * (75 - 68) // 100 = 70e6 bytes.
    threshold = merge_node_slo_spec({})["resourceUsedThresholdWithBE"]
    task = memoryevict.be_memory_evict(threshold, 10 ** 9, 750e6, mem_pods(), MEM_USED)
    assert task.feature == "BEMemoryEvict" and task.demand == 70_000_000
    # m5 lower priority; then usage desc m2, m1; then the zero ones by name descending m4, m3.
    assert names(task) == ["m5", "m2", "m1", "m4", "m3"]


def test_be_memory_evict_below_threshold_and_bad_lower():
    threshold = merge_node_slo_spec({})["resourceUsedThresholdWithBE"]
    assert memoryevict.be_memory_evict(threshold, 10 ** 9, 699_999_999, mem_pods(), MEM_USED) is None   # 69%
    said = []
    bad = {"memoryEvictThresholdPercent": 70, "memoryEvictLowerPercent": 72}
    assert memoryevict.be_memory_evict(bad, 10 ** 9, 900e6, mem_pods(), MEM_USED, warn=said.append) is None
    assert "memoryEvictLowerPercent=72 must be below memoryEvictThresholdPercent=70" in said[0]


def test_memory_evict_priority_order_and_lower_percent():
    pods = [pod("e1", labels=EVICTABLE), pod("e2", labels=EVICTABLE, priority=5200),
            pod("e3", labels={**EVICTABLE, "koordinator.sh/priority": "5"}),
            pod("e4", labels={**EVICTABLE, "koordinator.sh/priority": "1"}),
            pod("els", qos="LS", labels=EVICTABLE)]
    used = {"uid-e1": 10e6, "uid-e2": 5e6, "uid-e3": 80e6, "uid-e4": 20e6, "uid-els": 500e6}
    slo = {"memoryEvictThresholdPercent": 80, "memoryEvictLowerPercent": 50, "evictEnabledPriorityThreshold": 5999}
    # 850e6 of 1e9 = 85% >= 80% -> release 1e9 * (85 - 50) // 100 = 350e6.
    task = memoryevict.memory_evict(slo, 10 ** 9, 850e6, pods, used)
    assert task.demand == 350_000_000
    # spec.priority 5200 first; then by koordinator.sh/priority: e1 (none = 0), e4 (1), e3 (5).
    assert names(task) == ["e2", "e1", "e4", "e3"]


def test_memory_allocatable_evict():
    slo = {"memoryAllocatableEvictThresholdPercent": 80, "memoryAllocatableEvictLowerPercent": 50,
           "allocatableEvictPriorityThreshold": 5999}
    pods = [pod("b1", memory_request=6 * GiB), pod("b2", memory_request=3 * GiB)]
    n = node(allocatable={"kubernetes.io/batch-memory": str(10 * GiB)})
    config = alloc.allocatable_config(slo, "memoryAllocatableEvict", logging.warning)
    # 9Gi / 10Gi = 90% > 80% -> release (0.9 - 0.5) * 10Gi = 4Gi.
    [task] = alloc.allocatable_evict("MemoryAllocatableEvict", alloc.MEMORY_RESOURCES, config, n, pods)
    assert task.demand == 4 * GiB and names(task) == ["b1", "b2"]


# -- execution against the API server ---------------------------------------------------------------

@pytest.fixture
def recorder(client):
    rec = EventRecorder(client, "koordlet", host="n1")
    rec.start()
    yield rec
    rec.stop(5.0)


def create_pod(client: Client, namespace: str, name: str, *, qos="BE", labels=None, ready=True,
               requests=None) -> dict:
    lab = {"app": name, **(labels or {})}
    if qos:
        lab["koordinator.sh/qosClass"] = qos
    client.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": lab},
                   "spec": {"nodeName": "n1",
                            "containers": [{"name": "c", "image": "busybox",
                                            "resources": {"requests": requests} if requests else {}}]}})
    if ready:
        client.patch("Pod", name, {"status": {"phase": "Running",
                                               "conditions": [{"type": "Ready", "status": "True"}]}},
                     namespace=namespace, subresource="status")
    return client.get("Pod", name, namespace)


def exists(client, namespace, name):
    from koordinator.runtime import errors
    try:
        client.get("Pod", name, namespace)
        return True
    except errors.NotFound:
        return False


def events_for(client, namespace, name):
    return [e for e in client.list("Event", namespace)["items"] if e["involvedObject"].get("name") == name]


def test_evictor_evicts_a_be_pod_with_koordinators_event(client, namespace, recorder):
    victim = create_pod(client, namespace, "be1")
    evictor = Evictor(client, lambda: recorder)
    task = EvictTask("CPUEvict", "cpu-used", 100, [Victim(victim, {"cpu-used": 300})], "node CPU usage 75%")
    result = evictor.execute([task])
    assert result.evicted == [f"{namespace}/be1"] and result.released == {"cpu-used": 300}
    assert not exists(client, namespace, "be1")
    [event] = wait_until(lambda: events_for(client, namespace, "be1"), message="the eviction event")
    assert event["reason"] == "EvictPodSuccess" and event["type"] == "Warning"
    assert event["message"] == (f"evict Pod:{namespace}/be1, reason: trigger by koordlet feature CPUEvict, "
                                "message: node CPU usage 75%")
    # Evicted pods are remembered: the next round counts it as released without a call.
    assert evictor.execute([task]).released == {"cpu-used": 300}


def test_pdb_refusal_skips_to_the_next_victim_and_backs_off(client, namespace, recorder, caplog):
    guarded = create_pod(client, namespace, "guarded", labels={"tier": "db"})
    free = create_pod(client, namespace, "free")
    client.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                   "metadata": {"name": "db", "namespace": namespace},
                   "spec": {"minAvailable": 1, "selector": {"matchLabels": {"tier": "db"}}}})
    now = [1000.0]
    evictor = Evictor(client, lambda: recorder, clock=lambda: now[0])
    task = EvictTask("MemoryEvict", "memory-used", 50,
                     [Victim(guarded, {"memory-used": 100}), Victim(free, {"memory-used": 60})], "node memory 90%")
    with caplog.at_level(logging.WARNING, logger="koordinator.koordlet.qosmanager"):
        result = evictor.execute([task])
    assert result.failed == [f"{namespace}/guarded"] and result.evicted == [f"{namespace}/free"]
    assert exists(client, namespace, "guarded") and not exists(client, namespace, "free")
    assert any("guarded failed (a PodDisruptionBudget forbids it)" in r.getMessage() for r in caplog.records)
    [event] = wait_until(lambda: events_for(client, namespace, "guarded"), message="the failure event")
    assert event["reason"] == "EvictPodFail" and "Cannot evict pod" in event["message"]
    # Back-off: right after, the refused pod is not tried again (no call, no new failure) ...
    again = EvictTask("MemoryEvict", "memory-used", 50, [Victim(guarded, {"memory-used": 100})])
    assert evictor.execute([again]).failed == [] and evictor.backing_off(guarded["metadata"]["uid"]) == 5.0
    # ... and after 5 s it is (the budget still refuses; the next wait doubles).
    now[0] += 5
    assert evictor.execute([again]).failed == [f"{namespace}/guarded"]
    assert evictor.backing_off(guarded["metadata"]["uid"]) == 10.0


def test_evictor_never_evicts_a_protected_pod_even_when_handed_one(client, namespace, caplog):
    victims = [create_pod(client, namespace, name, qos=qos)
               for name, qos in (("ls", "LS"), ("lsr", "LSR"), ("lse", "LSE"), ("sys", "SYSTEM"))]
    # No label and Burstable: QoS with default LS. No label and BestEffort: QoS with default BE.
    victims.append(create_pod(client, namespace, "burstable", qos=None, requests={"cpu": "100m"}))
    victims.append(create_pod(client, namespace, "besteffort", qos=None))
    task = EvictTask("CPUEvict", "cpu-used", 10 ** 9, [Victim(p, {"cpu-used": 1}) for p in victims])
    with caplog.at_level(logging.ERROR, logger="koordinator.koordlet.qosmanager"):
        result = Evictor(client).execute([task])
    assert result.evicted == [f"{namespace}/besteffort"] and result.released == {"cpu-used": 1}
    assert [p["metadata"]["name"] for p in victims if exists(client, namespace, p["metadata"]["name"])] == \
        ["ls", "lsr", "lse", "sys", "burstable"]
    assert sum("not of BE class; refused" in r.getMessage() for r in caplog.records) == 5


def test_a_pod_in_two_tasks_counts_once_with_its_largest_release(client, namespace):
    p = create_pod(client, namespace, "twice")
    other = create_pod(client, namespace, "other")
    t1 = EvictTask("BECPUEvict", "cpu-used", 100, [Victim(p, {"cpu-used": 50})])
    t2 = EvictTask("CPUEvict", "cpu-used", 150, [Victim(p, {"cpu-used": 120}), Victim(other, {"cpu-used": 40})])
    result = Evictor(client).execute([t1, t2])
    # t1 evicts "twice", counted at max(50, 120) = 120 < 150: t2 goes on with "other" -> 160.
    assert result.evicted == [f"{namespace}/twice", f"{namespace}/other"] and result.released == {"cpu-used": 160}


# -- the strategies: NodeSLO switch, gates, cool-down ---------------------------------------------------

class States:
    """What the strategies read from the states informer (the informer itself is tested elsewhere)."""

    def __init__(self, node_obj, slo, pods):
        self._node, self._slo, self._pods = node_obj, merge_node_slo_spec(slo), pods

    def node(self):
        return self._node

    def node_slo(self):
        return self._slo

    def pods(self):
        return [SimpleNamespace(pod=p) for p in self._pods]


def strategy_ctx(client, states, cache, gates, now):
    return QOSContext(states=states, cache=cache, executor=None, layout=None, gates=gates, options=QOSOptions(),
                      client=client, clock=lambda: now[0])


def put_cpu(cache, t, node_cores, pods_cores):
    samples = [Sample(kinds.NODE_CPU_USAGE, node_cores, t)]
    samples += [Sample(kinds.POD_CPU_USAGE, c, t, {kinds.LABEL_POD_UID: uid}) for uid, c in pods_cores.items()]
    cache.insert(samples)


def test_cpu_evict_strategy_end_to_end_with_cool_down(client, namespace):
    pods = [create_pod(client, namespace, f"w{i}", labels=EVICTABLE) for i in range(3)]
    uids = [p["metadata"]["uid"] for p in pods]
    slo = {"resourceUsedThresholdWithBE": {"enable": True, "cpuEvictThresholdPercent": 70,
                                           "evictEnabledPriorityThreshold": 5999}}
    states = States(node(cpu="10"), slo, pods)
    now = [10_000.0]
    with MetricCache(None) as cache:
        ctx = strategy_ctx(client, states, cache, {"CPUEvict": True}, now)
        strategy = cpuevict.CPUEvict(ctx)
        assert strategy.enabled() and strategy.interval == 1.0
        # 8 cores of 10 = 80% -> release 10000 * (80 - 68) // 100 = 1200m; w0 1.0, w1 0.5, w2 0.3 cores.
        put_cpu(cache, now[0], 8.0, {uids[0]: 1.0, uids[1]: 0.5, uids[2]: 0.3})
        strategy.run_once()
        assert all(exists(client, namespace, f"w{i}") for i in range(3)), "20 s cool-down from start"
        now[0] += 20
        put_cpu(cache, now[0], 8.0, {uids[0]: 1.0, uids[1]: 0.5, uids[2]: 0.3})
        strategy.run_once()
        # Largest usage first: w0 (1000m), w1 (500m) -> 1500m >= 1200m.
        assert [exists(client, namespace, f"w{i}") for i in range(3)] == [False, False, True]
        now[0] += 10
        put_cpu(cache, now[0], 9.0, {uids[2]: 0.3})
        strategy.run_once()
        assert exists(client, namespace, "w2"), "within the cool-down after an eviction"
        now[0] += 11
        put_cpu(cache, now[0], 9.0, {uids[2]: 0.3})
        strategy.run_once()
        assert not exists(client, namespace, "w2")


def test_strategies_idle_unless_the_nodeslo_enables_thresholds_and_gates():
    pods = [pod("m1"), pod("m2")]
    now = [10_000.0]
    with MetricCache(None) as cache:
        cache.insert([Sample(kinds.NODE_MEMORY_USAGE, 0.95e9, now[0])] +
                     [Sample(kinds.POD_MEMORY_USAGE, 1e8, now[0], {kinds.LABEL_POD_UID: p["metadata"]["uid"]})
                      for p in pods])
        off = memoryevict.MemoryEvict(strategy_ctx(None, States(node(), {}, pods), cache,
                                                   {"BEMemoryEvict": True}, now))
        assert off.decide(now[0]) == []      # resourceUsedThresholdWithBE.enable defaults to false
        on_slo = {"resourceUsedThresholdWithBE": {"enable": True}}
        gated = memoryevict.MemoryEvict(strategy_ctx(None, States(node(), on_slo, pods), cache, {}, now))
        assert not gated.enabled() and gated.decide(now[0]) == []
        on = memoryevict.MemoryEvict(strategy_ctx(None, States(node(), on_slo, pods), cache,
                                                  {"BEMemoryEvict": True}, now))
        # 95% of 1e9, default 70% / lower 68% -> release 1e9 * 27 // 100 = 270e6.
        [task] = on.decide(now[0])
        assert task.feature == "BEMemoryEvict" and task.demand == 270_000_000



def test_be_cpu_evict_strategy_reads_the_be_collector_series():
    pods = [pod("a", batch_cpu=2000), pod("b", batch_cpu=1000)]
    slo = {"resourceUsedThresholdWithBE": {"enable": True, **BE_SLO, "cpuEvictTimeWindowSeconds": 4}}
    now = [10_000.0]
    with MetricCache(None) as cache:
        for i in range(4):   # 4 samples over the 4 s window: 4 * 1 s >= 4 / 3
            t = now[0] - 3 + i
            cache.insert([Sample(kinds.NODE_BE, value, t, {kinds.LABEL_BE_RESOURCE: "cpu",
                                                           kinds.LABEL_BE_ALLOCATION: alloc_name})
                          for alloc_name, value in (("usage", 1900), ("request", 3000), ("real-limit", 2000))])
        strategy = cpuevict.CPUEvict(strategy_ctx(None, States(node(), slo, pods), cache, {"BECPUEvict": True}, now))
        # 2000 / 3000 = 0.667 > lower 0.50: satisfied, nothing.
        assert strategy.decide(now[0]) == []
        now[0] += 1
        cache.insert([Sample(kinds.NODE_BE, value, now[0], {kinds.LABEL_BE_RESOURCE: "cpu",
                                                            kinds.LABEL_BE_ALLOCATION: alloc_name})
                      for alloc_name, value in (("usage", 950), ("request", 3000), ("real-limit", 1000))])
        # The window [9997, 10001] holds both ends: limit avg (2000*4 + 1000) / 5 = 1800, usage avg 1710
        # (95%) -> rate 1800/3000 = 0.6 > 0.50 -> still nothing, though the current figures alone would release.
        assert strategy.decide(now[0]) == []
        for _ in range(4):
            now[0] += 1
            cache.insert([Sample(kinds.NODE_BE, value, now[0], {kinds.LABEL_BE_RESOURCE: "cpu",
                                                                kinds.LABEL_BE_ALLOCATION: alloc_name})
                          for alloc_name, value in (("usage", 950), ("request", 3000), ("real-limit", 1000))])
        # Now every sample in the window is 1000/3000 = 0.333 -> release int(3000 * (0.75 - 0.333...)) = 1250.
        [task] = strategy.decide(now[0])
        assert task.feature == "BECPUEvict" and task.demand == 1250 and names(task) == ["a", "b"]


def test_be_cpu_evict_fires_from_the_be_resource_collectors_figures(tmp_path):
    """The real metrics advisor measures the BE tier on a cgroup tree; BECPUEvict decides from that."""
    from koordinator_roles.koordlet import features
    from tests.test_koordlet_collectors import POD_A, POD_C, POD_D, be_scene, write

    assert features.resolve({"BECPUEvict": True})["BECPUEvict"]
    scene, qos = be_scene(tmp_path, 2, "cgroupfs")
    tree = scene.tree
    be_c = pod("c", batch_cpu=1000, uid=POD_C)
    be_d = pod("d", batch_cpu=2000, uid=POD_D)
    scene.pods[POD_A].pod = pod("ls", qos="LS", batch_cpu=5000, uid=POD_A)   # not BE: neither request nor victim
    scene.pods[POD_C].pod = be_c
    scene.states.pod_list[-1].pod = be_d
    # CPU suppress left the BE tier one CPU, no quota: real limit 1000m for 3000m of batch-cpu requests.
    write(tree.file("cpuset", qos, "cpuset.cpus"), "1\n")
    write(tree.file("cpu", qos, "cpu.max"), "max 100000\n")
    d_dir = scene.states.pod_list[-1].cgroup_dir
    for i in range(7):          # one round a second; the BE tier burns 950m of its 1000m, d 900m of that
        scene.clock.now = 1000.0 + i
        tree.cgroup(qos, cpu_ns=50_000_000_000 + i * 950_000_000)
        tree.cgroup(d_dir, cpu_ns=i * 900_000_000)
        scene.advisor.collect_once()
    slo = {"resourceUsedThresholdWithBE": {"enable": True, **BE_SLO, "cpuEvictTimeWindowSeconds": 4}}
    now = [scene.clock.now]
    states = States(node(cpu="4"), slo, [be_c, scene.pods[POD_A].pod, be_d])
    strategy = cpuevict.CPUEvict(strategy_ctx(None, states, scene.cache.cache, {"BECPUEvict": True}, now))
    # usage 950 / limit 1000 = 95% >= 90%; satisfaction 1000/3000 = 0.333 <= 0.50
    # -> release int(3000 * (0.75 - 0.333...)) = 1250; d (0.45 used/requested) before c (0).
    [task] = strategy.decide(now[0])
    assert task.feature == "BECPUEvict" and task.demand == 1250 and names(task) == ["d", "c"]
    # The suppress strategy gives the tier its four CPUs back: satisfied, nothing to release.
    write(tree.file("cpuset", qos, "cpuset.cpus"), "0-3\n")
    for c in ("d1", "d2"):
        write(tree.file("cpuset", f"{d_dir}/{c * 32}", "cpuset.cpus"), "0-3\n")
    for i in range(7, 12):
        scene.clock.now = now[0] = 1000.0 + i
        tree.cgroup(qos, cpu_ns=50_000_000_000 + i * 950_000_000)
        scene.advisor.collect_once()
    assert strategy.decide(now[0]) == []
