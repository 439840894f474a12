"""noderesource calculation: batch/mid resources, normalization, amplification, prepare and sync rules.

Pure functions: every expected value is computed by hand in the comment next to it
(G = 10^9 bytes; cpu in milli-cores; "cap" = node capacity).
"""

from __future__ import annotations

import json

import pytest

from koordinator.apis import quantity
from koordinator_roles.manager.noderesource import (
    DISABLED_MESSAGE,
    PLUGINS,
    NodeResource,
    calculate,
    needs_meta_sync,
    needs_status_sync,
    prepare,
)
from koordinator_roles.manager.noderesource import batch, mid
from koordinator_roles.manager.noderesource.framework import go_float

G = 10**9
NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z
FRESH = "2023-11-14T22:12:20Z"  # one minute before NOW
BATCH_CPU, BATCH_MEM = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"
MID_CPU, MID_MEM = "kubernetes.io/mid-cpu", "kubernetes.io/mid-memory"
NORM = "node.koordinator.sh/cpu-normalization-ratio"
AMP = "node.koordinator.sh/resource-amplification-ratio"

BASE_STRATEGY = {
    "enable": True, "cpuReclaimThresholdPercent": 65, "memoryReclaimThresholdPercent": 65,
    "cpuCalculatePolicy": "usage", "memoryCalculatePolicy": "usage", "degradeTimeMinutes": 15,
    "updateTimeThresholdSeconds": 300, "resourceDiffThreshold": 0.1,
}


def make_node(cpu="100", memory="120G", alloc_cpu=None, alloc_memory=None, annotations=None, labels=None):
    return {
        "metadata": {"name": "n1", "annotations": dict(annotations or {}), "labels": dict(labels or {})},
        "status": {
            "capacity": {"cpu": cpu, "memory": memory},
            "allocatable": {"cpu": alloc_cpu or cpu, "memory": alloc_memory or memory},
        },
    }


def make_pod(name, cpu="0", memory="0", *, qos=None, priority_class=None, phase="Running", ns="default"):
    labels = {}
    if qos:
        labels["koordinator.sh/qosClass"] = qos
    if priority_class:
        labels["koordinator.sh/priority-class"] = priority_class
    return {
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
        "status": {"phase": phase},
    }


def pod_metric(name, cpu, memory, *, ns="default", priority=None):
    entry = {"namespace": ns, "name": name, "podUsage": {"resources": {"cpu": cpu, "memory": memory}}}
    if priority:
        entry["priority"] = priority
    return entry


def make_metric(system=("7", "12G"), pods=(), host_apps=(), update_time=FRESH, node_usage=None, reclaimable=None):
    status = {
        "updateTime": update_time,
        "nodeMetric": {"systemUsage": {"resources": {"cpu": system[0], "memory": system[1]}}},
        "podsMetric": list(pods),
        "hostApplicationMetric": list(host_apps),
    }
    if node_usage:
        status["nodeMetric"]["nodeUsage"] = {"resources": {"cpu": node_usage[0], "memory": node_usage[1]}}
    if reclaimable:
        status["prodReclaimableMetric"] = {"resource": {"resources": {"cpu": reclaimable[0], "memory": reclaimable[1]}}}
    return {"metadata": {"name": "n1"}, "status": status}


def run(node, pods, metric, plugins=("BatchResource",), enabled=True, normalization=None, amplification=None,
        nrt=None, device=None, now=NOW, **strategy):
    return calculate(colocation_enabled=enabled, strategy={**BASE_STRATEGY, **strategy},
                     normalization=normalization if normalization is not None else {"enable": False},
                     amplification=amplification if amplification is not None else {"enable": False},
                     node=node, pods=pods, node_metric=metric, nrt=nrt, device=device, now=now, plugins=plugins)


def worked_example():
    # B.5.2: an LS pod using 11 cores/11G and an unlabeled (Burstable → LS → prod) pod using 22/22G.
    pods = [make_pod("ls", "20", "20G", qos="LS"), make_pod("plain", "10", "10G")]
    metrics = [pod_metric("ls", "11", "11G"), pod_metric("plain", "22", "22G")]
    return make_node(), pods, make_metric(pods=metrics)


# -- BatchResource ------------------------------------------------------------------------------------

def test_worked_example_usage_policy():
    node, pods, metric = worked_example()
    nr = run(node, pods, metric)
    # margin 35% of 100 cores/120G = 35000m/42G; 100000 − 35000 − 7000 − 33000 = 25000;
    # 120G − 42G − 12G − 33G = 33G.
    assert nr.resources == {BATCH_CPU: 25000, BATCH_MEM: 33 * G}
    assert nr.resets == set()
    assert "batchAllocatable[CPU(Milli-Core)]:25000" in nr.messages[BATCH_CPU]


def test_request_and_max_usage_request_policies():
    node, pods, metric = worked_example()
    nr = run(node, pods, metric, memoryCalculatePolicy="request")
    # request: 120 − 42 − reserved 0 − HP requests (20 + 10) = 48G; cpu stays usage: 25000.
    assert nr.resources == {BATCH_CPU: 25000, BATCH_MEM: 48 * G}
    nr = run(node, pods, metric, cpuCalculatePolicy="maxUsageRequest", memoryCalculatePolicy="maxUsageRequest")
    # HPMaxUsedReq = max(20,11) + max(10,22) = 42 cores / 42G;
    # cpu 100 − 35 − 7 − 42 = 16 cores; memory 120 − 42 − 12 − 42 = 24G.
    assert nr.resources == {BATCH_CPU: 16000, BATCH_MEM: 24 * G}


def test_pod_without_metric_counts_request_as_usage_but_not_in_max_usage_request():
    node, pods, metric = worked_example()
    pods.append(make_pod("new", "5", "5G"))  # no metric yet
    nr = run(node, pods, metric)
    # usage: HPUsed = 33 + 5 = 38 → cpu 100 − 35 − 7 − 38 = 20; memory 120 − 42 − 12 − 38 = 28G.
    assert nr.resources == {BATCH_CPU: 20000, BATCH_MEM: 28 * G}
    nr = run(node, pods, metric, memoryCalculatePolicy="request")
    # request: HPRequest = 20 + 10 + 5 = 35 → 120 − 42 − 35 = 43G.
    assert nr.resources[BATCH_MEM] == 43 * G
    nr = run(node, pods, metric, cpuCalculatePolicy="maxUsageRequest", memoryCalculatePolicy="maxUsageRequest")
    # maxUsageRequest ignores the metric-less pod: still 42 → 16 cores / 24G (as above).
    assert nr.resources == {BATCH_CPU: 16000, BATCH_MEM: 24 * G}


def test_lse_pod_counts_cpu_request_and_memory_usage():
    pods = [make_pod("lse", "30", "30G", qos="LSE")]
    metric = make_metric(pods=[pod_metric("lse", "5", "6G")])
    nr = run(make_node(), pods, metric)
    # HPUsed = cpu request 30, memory usage 6G: cpu 100 − 35 − 7 − 30 = 28; mem 120 − 42 − 12 − 6 = 60G.
    assert nr.resources == {BATCH_CPU: 28000, BATCH_MEM: 60 * G}


def test_batch_and_free_pods_ignored_mid_pods_counted():
    pods = [make_pod("be", "10", "10G", qos="BE"), make_pod("free", "10", "10G", priority_class="koord-free"),
            make_pod("mid", "10", "10G", priority_class="koord-mid")]
    metric = make_metric(pods=[pod_metric("be", "10", "10G"), pod_metric("free", "10", "10G"),
                               pod_metric("mid", "4", "4G")])
    nr = run(make_node(), pods, metric)
    # only the mid pod's usage (4/4G) is HP: cpu 100 − 35 − 7 − 4 = 54; mem 120 − 42 − 12 − 4 = 62G.
    assert nr.resources == {BATCH_CPU: 54000, BATCH_MEM: 62 * G}


def test_dangling_metrics_count_unless_batch_or_free():
    pods = [make_pod("done", "10", "10G", phase="Succeeded")]
    metric = make_metric(pods=[
        pod_metric("done", "3", "3G"),  # pod no longer active: dangling, counted
        pod_metric("gone", "2", "2G"),  # pod not listed: counted
        pod_metric("gone-be", "9", "9G", priority="koord-batch"),  # skipped
        pod_metric("gone-free", "9", "9G", priority="koord-free"),  # skipped
    ])
    nr = run(make_node(), pods, metric)
    # HPUsed = 3 + 2 = 5: cpu 100 − 35 − 7 − 5 = 53; mem 120 − 42 − 12 − 5 = 61G.
    assert nr.resources == {BATCH_CPU: 53000, BATCH_MEM: 61 * G}
    nr = run(make_node(), pods, metric, cpuCalculatePolicy="maxUsageRequest")
    # dangling usage also enters HPMaxUsedReq: same 53 cores.
    assert nr.resources[BATCH_CPU] == 53000


def test_host_applications_prod_and_mid_count_batch_does_not():
    apps = [
        {"name": "prod-app", "priority": "koord-prod", "usage": {"resources": {"cpu": "2", "memory": "2G"}}},
        {"name": "mid-app", "priority": "koord-mid", "usage": {"resources": {"cpu": "1", "memory": "1G"}}},
        {"name": "yarn", "priority": "koord-batch", "usage": {"resources": {"cpu": "8", "memory": "8G"}}},
    ]
    nr = run(make_node(), [], make_metric(host_apps=apps))
    # system 7/12G + prod 2/2G + mid 1/1G = 10/15G: cpu 100 − 35 − 10 = 55; mem 120 − 42 − 15 = 63G.
    assert nr.resources == {BATCH_CPU: 55000, BATCH_MEM: 63 * G}


def test_kubelet_reservation_and_annotation_with_reserved_cpus():
    node = make_node(alloc_cpu="90", alloc_memory="100G")  # kubelet reserves 10 cores / 20G
    nr = run(node, [], make_metric())
    # sysOrRsv = max(7/12G, 10/20G) = 10/20G: cpu 100 − 35 − 10 = 55; mem 120 − 42 − 20 = 58G.
    assert nr.resources == {BATCH_CPU: 55000, BATCH_MEM: 58 * G}
    annotation = {"resources": {"cpu": "4", "memory": "30G"}, "reservedCPUs": "0-11"}
    node = make_node(alloc_cpu="90", alloc_memory="100G",
                     annotations={"node.koordinator.sh/reservation": json.dumps(annotation)})
    nr = run(node, [], make_metric())
    # reservedCPUs 0-11 = 12 CPUs replaces cpu 4: reserved = max(10, 12) = 12 cores, max(20, 30) = 30G;
    # cpu 100 − 35 − 12 = 53; mem 120 − 42 − 30 = 48G.
    assert nr.resources == {BATCH_CPU: 53000, BATCH_MEM: 48 * G}
    nr = run(node, [], make_metric(), memoryCalculatePolicy="request")
    # request policy subtracts nodeReserved (30G), not system usage: 120 − 42 − 30 − 0 = 48G.
    assert nr.resources[BATCH_MEM] == 48 * G


def test_batch_thresholds_cap_the_result():
    node, pods, metric = worked_example()
    nr = run(node, pods, metric, batchCPUThresholdPercent=20, batchMemoryThresholdPercent=50)
    # min(25000, 20% of 100 cores = 20000) = 20000; min(33G, 50% of 120G = 60G) = 33G.
    assert nr.resources == {BATCH_CPU: 20000, BATCH_MEM: 33 * G}


def test_go_float_truncation_is_reproduced():
    # 58% of 100 bytes in float64 is 57.99999999999999 → 57 (Go truncates the float product).
    nr = run(make_node(cpu="1", memory="100"), [], make_metric(system=("0", "0")),
             memoryReclaimThresholdPercent=42, cpuReclaimThresholdPercent=100)
    # margin memory = int(100 × 0.58) = 57 → 100 − 57 = 43 bytes; cpu margin 0 → 1000m.
    assert nr.resources == {BATCH_CPU: 1000, BATCH_MEM: 43}


@pytest.mark.parametrize("metric", [
    None,  # NodeMetric missing
    make_metric(update_time=None),  # never reported
    make_metric(update_time="2023-11-14T21:58:19Z"),  # 15 min 1 s old > degradeTimeMinutes 15
])
def test_abnormal_node_metric_resets(metric):
    nr = run(make_node(), [], metric, plugins=("BatchResource", "MidResource"))
    assert nr.resets == {BATCH_CPU, BATCH_MEM, MID_CPU, MID_MEM}
    assert nr.messages[BATCH_CPU] == batch.DEGRADE_MESSAGE
    assert nr.messages[MID_CPU] == mid.DEGRADE_MESSAGE


def test_metric_exactly_at_degrade_limit_is_fresh():
    nr = run(make_node(), [], make_metric(update_time="2023-11-14T21:58:20Z"))  # exactly 15 min
    assert nr.resets == set()


def test_disabled_colocation_resets_every_plugin():
    nr = run(make_node(), [], make_metric(), plugins=PLUGINS, enabled=False)
    assert nr.resets == {BATCH_CPU, BATCH_MEM, MID_CPU, MID_MEM}
    assert nr.messages[BATCH_MEM] == DISABLED_MESSAGE == "node colocation is disabled in Config, reason: DisableInConfig"
    assert nr.annotations == {AMP: None}  # amplification annotation deleted; normalization untouched
    node = make_node(annotations={AMP: '{"cpu":1.5}', NORM: "1.20"})
    node["status"]["capacity"][BATCH_CPU] = node["status"]["allocatable"][BATCH_CPU] = "5k"
    out = prepare(node, nr)
    assert BATCH_CPU not in out["status"]["allocatable"] and BATCH_CPU not in out["status"]["capacity"]
    assert AMP not in out["metadata"]["annotations"] and out["metadata"]["annotations"][NORM] == "1.20"


def test_unknown_plugin_is_rejected():
    with pytest.raises(ValueError, match="NoSuchPlugin"):
        run(make_node(), [], make_metric(), plugins=("NoSuchPlugin",))


def test_bad_quantity_skips_the_plugin_and_removes_its_resources():
    metric = make_metric(system=("seven", "12G"))
    nr = run(make_node(), [], metric)
    assert nr.resources == {BATCH_CPU: None, BATCH_MEM: None}
    assert "systemUsage" in nr.errors["BatchResource"]


# -- MidResource ---------------------------------------------------------------------------------------

def test_mid_static_mode():
    nr = run(make_node(), [], make_metric(), plugins=("MidResource",), midReclaimMode="static",
             midStaticCPUReservedPercent=30, midStaticMemoryReservedPercent=50, midMemoryThresholdPercent=40)
    # cpu min(30% of 100 cores, 100%) = 30000; memory min(50% of 120G = 60G, 40% = 48G) = 48G.
    assert nr.resources == {MID_CPU: 30000, MID_MEM: 48 * G}


def test_mid_default_mode():
    pods = [make_pod("prod", "20", "20G", qos="LS"), make_pod("b", "30", "30G", qos="BE"),
            make_pod("m", "5", "5G", priority_class="koord-mid")]
    apps = [{"name": "a", "priority": "koord-prod", "usage": {"resources": {"cpu": "1", "memory": "1G"}}},
            {"name": "b", "priority": "koord-mid", "usage": {"resources": {"cpu": "9", "memory": "9G"}}}]
    metric = make_metric(host_apps=apps, node_usage=("60", "90G"), reclaimable=("50", "50G"))
    nr = run(make_node(), pods, metric, plugins=("MidResource",), midUnallocatedPercent=10,
             midCPUThresholdPercent=100, midMemoryThresholdPercent=30)
    # systemUsed = 7/12G + prod app 1/1G (the mid app does not count) = 8/13G = nodeReserved;
    # unallocated = 100 − 8 − 20 (only the prod pod) = 72 cores; 120 − 13 − 20 = 87G;
    # unused = 100 − 60 = 40 cores; 120 − 90 = 30G;
    # cpu = max(min(50, 40), 0) + 10% × 72 = 40 + 7.2 = 47.2 cores → 47200, cap 100% → 47200;
    # mem = min(50, 30) + 8.7 = 38.7G, capped at 30% of 120G = 36G.
    assert nr.resources == {MID_CPU: 47200, MID_MEM: 36 * G}


def test_mid_without_reclaimable_or_node_usage():
    nr = run(make_node(), [], make_metric(), plugins=("MidResource",))
    # no prodReclaimableMetric → 0, no node usage → nothing unused; midUnallocatedPercent 0 → 0/0.
    assert nr.resources == {MID_CPU: 0, MID_MEM: 0}
    assert nr.resets == set()


# -- CPUNormalization / ResourceAmplification --------------------------------------------------------------

CPU_INFO = {"cpuModel": "Intel Xeon 8269", "hyperThreadEnabled": True, "turboEnabled": False}
NORMALIZATION = {"enable": True, "ratioModel": {"Intel Xeon 8269": {
    "baseRatio": 1.5, "hyperThreadEnabledRatio": 1.25, "turboEnabledRatio": 1.8, "hyperThreadTurboEnabledRatio": 2.2}}}


def nrt_with(info):
    return {"metadata": {"name": "n1", "annotations": {"node.koordinator.sh/cpu-basic-info": json.dumps(info)}}}


def test_cpu_normalization_ratio_and_batch_cpu_scaling():
    node, pods, metric = worked_example()
    nr = run(node, pods, metric, plugins=("CPUNormalization", "BatchResource"),
             normalization=NORMALIZATION, nrt=nrt_with(CPU_INFO))
    assert nr.annotations == {NORM: "1.25"}  # HT on, turbo off → hyperThreadEnabledRatio
    out = prepare(node, nr)
    # batch-cpu 25000 × 1.25 = 31250 (written as DecimalSI "31250"); memory 33G unchanged.
    assert out["status"]["allocatable"][BATCH_CPU] == "31250" == out["status"]["capacity"][BATCH_CPU]
    # BinarySI like Koordinator; 33e9 is no multiple of 1024, so Go prints the plain number.
    assert out["status"]["allocatable"][BATCH_MEM] == quantity.format_quantity(33 * G, "BinarySI") == "33000000000"
    assert out["metadata"]["annotations"][NORM] == "1.25"
    assert node["status"]["allocatable"].get(BATCH_CPU) is None  # input untouched


@pytest.mark.parametrize("info, expected", [
    ({**CPU_INFO, "turboEnabled": True}, "2.20"), ({**CPU_INFO, "hyperThreadEnabled": False}, "1.50"),
    ({"cpuModel": "Intel Xeon 8269", "turboEnabled": True}, "1.80"),
])
def test_cpu_normalization_ratio_by_state(info, expected):
    nr = run(make_node(), [], None, plugins=("CPUNormalization",), normalization=NORMALIZATION, nrt=nrt_with(info))
    assert nr.annotations == {NORM: expected}


def test_cpu_normalization_disabled_label_and_errors():
    # disabled by the node label even though the strategy enables it → "1.00"
    node = make_node(labels={"node.koordinator.sh/cpu-normalization-enabled": "false"})
    nr = run(node, [], None, plugins=("CPUNormalization",), normalization=NORMALIZATION, nrt=nrt_with(CPU_INFO))
    assert nr.annotations == {NORM: "1.00"}
    # unknown model without defaultRatio / ratio out of range / no NRT → error, no annotation
    for normalization, nrt in [
        (NORMALIZATION, nrt_with({**CPU_INFO, "cpuModel": "AMD"})),
        ({"enable": True, "ratioModel": {"Intel Xeon 8269": {"hyperThreadEnabledRatio": 5.5}}}, nrt_with(CPU_INFO)),
        (NORMALIZATION, None),
    ]:
        nr = run(make_node(), [], None, plugins=("CPUNormalization",), normalization=normalization, nrt=nrt)
        assert nr.annotations == {} and "CPUNormalization" in nr.errors
    # unknown model falls back to defaultRatio
    nr = run(make_node(), [], None, plugins=("CPUNormalization",), normalization={**NORMALIZATION, "defaultRatio": 1.1},
             nrt=nrt_with({**CPU_INFO, "cpuModel": "AMD"}))
    assert nr.annotations == {NORM: "1.10"}


def test_amplification_annotation():
    amp = {"enable": True, "resourceAmplificationRatio": {"cpu": 1.5, "memory": 2}}
    nr = run(make_node(), [], None, plugins=("ResourceAmplification",), amplification=amp)
    # no normalization annotation on the node: cpu stays 1.5; Go prints 2.0 as "2".
    assert nr.annotations == {AMP: '{"cpu":1.5,"memory":2}'}
    node = make_node(annotations={NORM: "1.20"})
    nr = run(node, [], None, plugins=("ResourceAmplification",), amplification=amp)
    # cpu = 1.5 × 1.2 = 1.7999999999999998 in float64 (Go prints it in full).
    assert nr.annotations == {AMP: '{"cpu":1.7999999999999998,"memory":2}'}
    nr = run(node, [], None, plugins=("ResourceAmplification",), amplification={"enable": False})
    # disabled but the node is normalized: cpu = 1 × 1.2 → {"cpu":1.2}
    assert nr.annotations == {AMP: '{"cpu":1.2}'}
    nr = run(make_node(), [], None, plugins=("ResourceAmplification",), amplification={"enable": False})
    assert nr.annotations == {AMP: None}  # nothing to amplify → delete
    nr = run(make_node(), [], None, plugins=("ResourceAmplification",),
             amplification={"enable": True, "resourceAmplificationRatio": {"memory": 0.5}})
    assert nr.annotations == {AMP: None} and "ResourceAmplification" in nr.errors  # ratio < 1 → error


def test_go_float_formatting():
    assert [go_float(v) for v in (1.5, 2.0, 1.25, 1e21, 1e-7)] == ["1.5", "2", "1.25", "1e+21", "1e-07"]


# -- prepare: third-party allocations ------------------------------------------------------------------------

def test_prepare_records_origin_and_subtracts_third_party_batch_allocations():
    third = {"allocations": [
        {"name": "hadoop-yarn", "priority": "koord-batch",
         "resources": {BATCH_CPU: "5000", BATCH_MEM: "10G"}},
        {"name": "other", "priority": "koord-prod", "resources": {BATCH_CPU: "99000"}},
    ]}
    node, pods, metric = worked_example()
    node["metadata"]["annotations"]["node.koordinator.sh/thirdPartyAllocations"] = json.dumps(third)
    out = prepare(node, run(node, pods, metric))
    origin = json.loads(out["metadata"]["annotations"]["node.koordinator.sh/originExtendedAllocatable"])
    assert origin == {"resources": {BATCH_CPU: "25k", BATCH_MEM: "33000000000"}}
    # kube batch = origin − yarn's koord-batch allocation: 25000 − 5000 = 20000; 33G − 10G = 23G.
    assert out["status"]["allocatable"][BATCH_CPU] == "20k" == out["status"]["capacity"][BATCH_CPU]
    assert out["status"]["allocatable"][BATCH_MEM] == "23000000000"


def test_prepare_reset_records_zero_origin():
    nr = NodeResource()
    batch.reset(nr, "x")
    out = prepare(make_node(), nr)
    origin = json.loads(out["metadata"]["annotations"]["node.koordinator.sh/originExtendedAllocatable"])
    assert origin == {"resources": {BATCH_CPU: "0", BATCH_MEM: "0"}}


# -- sync decisions ---------------------------------------------------------------------------------------

def with_alloc(**resources):
    node = make_node()
    node["status"]["allocatable"].update(resources)
    return node


def test_status_sync_diff_threshold():
    strategy = {"resourceDiffThreshold": 0.1, "updateTimeThresholdSeconds": 300}
    old = with_alloc(**{BATCH_CPU: "10000", BATCH_MEM: "10G"})

    def sync(new, **kw):
        return needs_status_sync(old, new, {**strategy, **kw}, last_update=NOW - 10, now=NOW)

    # |11000 − 10000| = 1000 is not > 10000 × 0.1 = 1000 → no sync; 11001 → sync.
    assert not sync(with_alloc(**{BATCH_CPU: "11000", BATCH_MEM: "10G"}))
    assert sync(with_alloc(**{BATCH_CPU: "11001", BATCH_MEM: "10G"}))
    assert not sync(with_alloc(**{BATCH_CPU: "9000", BATCH_MEM: "10G"}))
    assert sync(with_alloc(**{BATCH_CPU: "8999", BATCH_MEM: "10G"}))
    # present on one side only
    assert sync(with_alloc(**{BATCH_CPU: "10000"}))
    assert sync(with_alloc(**{BATCH_CPU: "10000", BATCH_MEM: "10G", MID_CPU: "0"}))
    # any change from 0 is a diff (0 × threshold = 0); a tiny threshold makes any change a diff
    zero_old = with_alloc(**{BATCH_CPU: "0"})
    assert needs_status_sync(zero_old, with_alloc(**{BATCH_CPU: "1"}), strategy, NOW - 10, NOW)
    assert sync(with_alloc(**{BATCH_CPU: "10001", BATCH_MEM: "10G"}), resourceDiffThreshold=0.00001)
    assert not sync(with_alloc(**{BATCH_CPU: "10000", BATCH_MEM: "10G"}), resourceDiffThreshold=0.00001)


def test_status_sync_time_threshold():
    same = with_alloc(**{BATCH_CPU: "10000"})
    strategy = {"updateTimeThresholdSeconds": 300}
    assert needs_status_sync(same, same, strategy, last_update=None, now=NOW)  # never synced
    assert not needs_status_sync(same, same, strategy, last_update=NOW - 300, now=NOW)  # exactly 300 s
    assert needs_status_sync(same, same, strategy, last_update=NOW - 301, now=NOW)
    # defaults apply to an empty strategy (300 s, 0.1)
    assert not needs_status_sync(same, same, {}, last_update=NOW - 1, now=NOW)


def test_meta_sync():
    plain = make_node()
    assert not needs_meta_sync(plain, make_node())
    assert needs_meta_sync(plain, make_node(annotations={NORM: "1.00"}))  # created
    assert needs_meta_sync(make_node(annotations={NORM: "1.00"}), plain)  # removed
    assert not needs_meta_sync(make_node(annotations={NORM: "1.20"}), make_node(annotations={NORM: "1.205"}))
    assert needs_meta_sync(make_node(annotations={NORM: "1.20"}), make_node(annotations={NORM: "1.25"}))
    assert needs_meta_sync(plain, make_node(annotations={AMP: '{"cpu":1.5}'}))
    assert needs_meta_sync(make_node(annotations={AMP: '{"cpu":1.5}'}), make_node(annotations={AMP: '{"cpu":2}'}))
    assert needs_meta_sync(plain, make_node(labels={"node.koordinator.sh/gpu-model": "A100"}))
    assert not needs_meta_sync(plain, make_node(labels={"node.koordinator.sh/gpu-model": "A100"}),
                               plugins=("BatchResource",))


# -- devices ------------------------------------------------------------------------------------------------

def test_gpu_and_rdma_from_device():
    device = {
        "metadata": {"name": "n1", "labels": {"node.koordinator.sh/gpu-model": "A100"}},
        "spec": {"devices": [
            {"type": "gpu", "health": True, "minor": 0, "resources": {
                "koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "80Gi",
                "koordinator.sh/gpu-memory-ratio": "100"}},
            {"type": "gpu", "health": False, "minor": 1, "resources": {"koordinator.sh/gpu-core": "100"}},
            {"type": "rdma", "health": True, "resources": {"koordinator.sh/rdma": "100"}},
        ]},
    }
    nr = run(make_node(), [], None, plugins=("GPUDeviceResource", "RDMADeviceResource"), device=device)
    # only the healthy GPU counts: gpu = Σ gpu-core = 100.
    assert nr.resources == {"koordinator.sh/gpu": 100, "koordinator.sh/gpu-core": 100,
                            "koordinator.sh/gpu-memory": 80 * 2**30, "koordinator.sh/gpu-memory-ratio": 100,
                            "koordinator.sh/rdma": 100}
    out = prepare(make_node(), nr)
    assert out["status"]["allocatable"]["koordinator.sh/gpu-memory"] == "80Gi"
    assert out["metadata"]["labels"]["node.koordinator.sh/gpu-model"] == "A100"
    nr = run(make_node(), [], None, plugins=("GPUDeviceResource",), device=None)
    assert "koordinator.sh/gpu" in nr.resets
