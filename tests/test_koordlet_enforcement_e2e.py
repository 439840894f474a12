"""Issue 17 end to end: the koordlet's QoS enforcement on a `koordinator local` cluster.

One module-scoped cluster (one simulated node: 32 CPUs, 128Gi; `--koordlet-feature-gates MemoryEvict=true`)
and three scenarios in file order, each starting from where the previous one left the node:

(a) CPUSuppress, cpuset policy: an LS pod's usage goes up to 24 cores next to two busy BE pods → the BE
    QoS cgroup's ``cpuset.cpus`` on the node's tree shrinks to the size the reference formula gives,
    the BE pods' usage in NodeMetric drops; the LS usage falls → the cpuset grows back.
(b) MemoryEvict: node memory over ``memoryEvictThresholdPercent`` → the first BE victim in Koordinator's
    order is protected by a PodDisruptionBudget (EvictPodFail), the next one is evicted through the
    eviction API (EvictPodSuccess saying why), the rest and the LS pod are untouched.
(c) colocation off in ``slo-controller-config`` (kubectl) → the BE cpuset is back to every CPU.

The reaction times are printed (``pytest -s`` shows them). Usage is driven through the simulator's
``sim.koordinator.sh/*`` annotations, changed on running pods, so each step starts at a known moment.
"""

from __future__ import annotations

import json
import math
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from koordinator.runtime.client import Client
from koordinator.runtime.errors import NotFound
from koordinator.sim import tree
from koordinator.sim.profiles import DEFAULT_SYSTEM_CPU
from koordinator_roles.koordlet.system.cpuset import parse_cpuset
from tests.local_cluster import forbidden_lines
from tests.test_local import Cluster, LocalProcess
from tests.waiting import wait_until

NODE = "sim-node-0"
CPUS = 32
NS = "default"
THRESHOLD_PERCENT = 65          # cpuSuppressThresholdPercent of the default slo-controller-config
BE_MIN_CPUSET = 2               # Koordinator's floor for the suppressed BE cpuset (beMinCPUSetCores)
MAX_INCREASE = math.ceil(CPUS * 0.1)  # Koordinator grows the BE cpuset by at most 10% of the CPUs per round
MEMORY_EVICT_PERCENT = 70       # memoryEvictThresholdPercent of the default slo-controller-config
GI = 1 << 30

# The default resource-threshold-config of `koordinator local` (manifests/config/slo-controller-config.yaml),
# plus what MemoryEvict needs to pick victims: the priority under which pods labelled
# koordinator.sh/eviction-enabled=true may be evicted (koord-batch is 5000-5999).
THRESHOLDS = {"enable": True, "cpuSuppressThresholdPercent": THRESHOLD_PERCENT, "cpuSuppressPolicy": "cpuset",
              "memoryEvictThresholdPercent": MEMORY_EVICT_PERCENT, "cpuEvictPolicy": "evictByRealLimit",
              "evictEnabledPriorityThreshold": 5999}


def expected_be_cpus(non_be_milli: float) -> int:
    """The BE cpuset size by the reference formula (A.7.2): capacity × threshold% − non-BE pods − system,
    rounded up to whole CPUs, at least Koordinator's minimum. "System" is what the node uses outside its
    pods: the simulator's default system usage (no reserved resources on the simulated Node)."""
    budget = CPUS * 1000 * THRESHOLD_PERCENT / 100 - non_be_milli - DEFAULT_SYSTEM_CPU
    return max(math.ceil(budget / 1000), BE_MIN_CPUSET)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    """One `koordinator local` for the whole file: one node, the memory eviction gate on."""
    base = tmp_path_factory.mktemp("enforce")
    data = base / "kdata"
    started = time.monotonic()
    lp = LocalProcess(data, "--nodes", "1", "--koordlet-feature-gates", "MemoryEvict=true")
    client = None
    try:
        kubeconfig = lp.expect("export KUBECONFIG=").split("=", 1)[1]
        lp.expect("koordinator local: up")
        up_after = time.monotonic() - started
        print(f"\nkoordinator local up in {up_after:.1f}s")
        client = Client.from_kubeconfig(kubeconfig)
        yield Cluster(lp, data, kubeconfig, base / "cache", client, started, up_after)
        # Every role runs as its own ServiceAccount: none may have been refused anything.
        refused = forbidden_lines(data)
        assert not refused, "requests refused by RBAC:\n" + "\n".join(refused[:20])
    finally:
        if client is not None:
            client.close()
        if lp.proc.poll() is None:
            lp.proc.send_signal(signal.SIGTERM)
            lp.finish()
        lp.kill()


# -- helpers -----------------------------------------------------------------------------------------

def cgroup_root(cluster: Cluster) -> Path:
    return cluster.data / "nodes" / NODE / "cgroup"


def be_cpuset(cluster: Cluster) -> list[int]:
    """The BE QoS cgroup's cpuset on the node's tree (cgroup v2, systemd driver: local's defaults).

    The koordlet writes it as the kernel wants (O_TRUNC, then write); on this plain-file tree a reader can
    land between the two and see it empty, which no real cgroup shows: read again until it is not."""
    path = cgroup_root(cluster) / tree.qos_dir(tree.SYSTEMD, tree.BEST_EFFORT) / "cpuset.cpus"
    return parse_cpuset(wait_until(lambda: path.read_text().strip(), 1, f"{path} not empty", interval=0.001))


def all_cpus(cluster: Cluster) -> list[int]:
    """The default cpuset: the kubepods cgroup's effective one (its cpuset.cpus is empty on v2: inherited)."""
    text = (cgroup_root(cluster) / tree.kubepods_dir(tree.SYSTEMD) / "cpuset.cpus.effective").read_text()
    return parse_cpuset(text.strip())


def pod(name: str, *, qos: str, cpu: str, memory: str, requests: dict, labels: dict | None = None,
        priority_class: str | None = None) -> dict:
    spec: dict = {"containers": [{"name": "main", "image": "stress", "resources": {"requests": requests}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {"koordinator.sh/qosClass": qos, **(labels or {})},
                         "annotations": {"sim.koordinator.sh/cpu": cpu, "sim.koordinator.sh/memory": memory}},
            "spec": spec}


def be_pod(name: str, *, cpu: str, memory: str, labels: dict | None = None) -> dict:
    """A BE pod as Koordinator's docs write one: koord-batch, batch-cpu (milli) and batch-memory requests."""
    return pod(name, qos="BE", cpu=cpu, memory=memory, labels=labels, priority_class="koord-batch",
               requests={"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "512Mi"})


def running(client: Client, *names: str) -> bool:
    for name in names:
        p = client.get("Pod", name, NS)
        if (p.get("status") or {}).get("phase") != "Running":
            return False
    return True


def set_usage(client: Client, name: str, **figures: str) -> float:
    """Change a running pod's simulated usage (``cpu="24"``, ``memory="56Gi"``); the monotonic time of the write."""
    client.patch("Pod", name, {"metadata": {"annotations": {f"sim.koordinator.sh/{k}": v for k, v in figures.items()}}},
                 namespace=NS)
    return time.monotonic()


class CounterRate:
    """Watches a cgroup's ``cpu.stat`` ``usage_usec``; the simulator advances it once per tick, so the rate
    between two changes is the usage the kernel (and the koordlet's collector) shows for that tick."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.last: tuple[float, int] | None = None

    def rate(self) -> float | None:
        """Cores used over the last tick, when the counter moved since the previous call; else None."""
        try:
            fields = dict(line.split() for line in self.path.read_text().splitlines() if line)
        except OSError:
            return None
        now, value = time.monotonic(), int(fields["usage_usec"])
        if self.last is None or value == self.last[1]:
            if self.last is None:
                self.last = (now, value)
            return None
        rate = (value - self.last[1]) / 1e6 / (now - self.last[0])
        self.last = (now, value)
        return rate


def wait_visible_then(counter: CounterRate, visible_at: float, done, timeout: float, what: str) -> tuple[float, float]:
    """Wait until ``counter`` shows at least ``visible_at`` cores (the usage is visible on the node) and then
    ``done()`` holds; (time it became visible, time done held). ``done`` may hold before the usage shows on
    the sampled counter (the koordlet reads the node's counters on its own clock): then both are equal."""
    seen: list[float] = []

    def check() -> float | None:
        now = time.monotonic()
        r = counter.rate()
        if not seen and r is not None and r >= visible_at:
            seen.append(now)
        if done():
            seen.append(now)
            return now
        return None

    finished = wait_until(check, timeout, what)
    return seen[0], finished


def pods_metric(client: Client) -> tuple[str, dict[str, float]]:
    """NodeMetric's updateTime and the CPU cores per pod name in status.podsMetric."""
    status = client.get("NodeMetric", NODE).get("status") or {}
    out = {}
    for entry in status.get("podsMetric") or []:
        cpu = ((entry.get("podUsage") or {}).get("resources") or {}).get("cpu", "0")
        out[entry["name"]] = _cores(cpu)
    return status.get("updateTime", ""), out


def _cores(q: str) -> float:
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def events_for(client: Client, name: str, reason: str) -> list[dict]:
    return [e for e in client.list("Event", NS)["items"]
            if e.get("reason") == reason and (e.get("involvedObject") or {}).get("name") == name]


def patch_thresholds(cluster: Cluster, thresholds: dict) -> None:
    """Edit slo-controller-config's resource-threshold-config with kubectl, as a user would."""
    body = {"data": {"resource-threshold-config": json.dumps({"clusterStrategy": thresholds})}}
    proc = cluster.kubectl("-n", "koordinator-system", "patch", "configmap", "slo-controller-config",
                           "--type", "merge", "-p", json.dumps(body))
    assert proc.returncode == 0, proc.stderr


def node_slo_thresholds(client: Client) -> dict:
    return (client.get("NodeSLO", NODE).get("spec") or {}).get("resourceUsedThresholdWithBE") or {}


# -- (a) CPUSuppress -----------------------------------------------------------------------------------

LS_LOW, LS_HIGH = 2000, 24000   # milli-cores


def test_a_be_cpuset_shrinks_under_ls_load_and_grows_back(cluster):
    """An LS pod going from 2 to 24 cores squeezes two BE pods (6 cores each wanted) onto the minimum
    cpuset within 3 s of the LS usage being visible, their usage in NodeMetric drops; back at 2 cores the
    cpuset grows back, by at most 10 % of the CPUs a round, to the formula's size."""
    client = cluster.client
    client.create(pod("ls", qos="LS", cpu=f"{LS_LOW}m", memory="4Gi", requests={"cpu": "4", "memory": "8Gi"}))
    client.create(be_pod("be-cpu-0", cpu="6", memory="1Gi"))
    client.create(be_pod("be-cpu-1", cpu="6", memory="1Gi"))
    wait_until(lambda: running(client, "ls", "be-cpu-0", "be-cpu-1"), 20, "the three pods Running", interval=0.1)
    assert all_cpus(cluster) == list(range(CPUS))

    # Steady state with the LS pod at 2 cores: the formula's size (the BE pods use 12 cores of it).
    low = expected_be_cpus(LS_LOW)
    assert low == 19
    wait_until(lambda: len(be_cpuset(cluster)) == low, 15, f"BE cpuset of {low} CPUs with LS at 2 cores")

    # A first report with the BE pods at full speed (12 cores wanted, 19 CPUs to run on), before the squeeze.
    def be_reported() -> tuple[str, float] | None:
        when, usage = pods_metric(client)
        total = usage.get("be-cpu-0", 0) + usage.get("be-cpu-1", 0)
        return (when, total) if total > 8 else None

    before_time, before_total = wait_until(be_reported, 15, "the BE pods in NodeMetric", interval=0.2)

    ls = client.get("Pod", "ls", NS)
    counter = CounterRate(cgroup_root(cluster) / tree.pod_dir(tree.SYSTEMD, tree.BURSTABLE, ls["metadata"]["uid"])
                          / "cpu.stat")
    counter.rate()
    high = expected_be_cpus(LS_HIGH)
    assert high == BE_MIN_CPUSET, "24 of 32 cores for LS leaves less than nothing under 65 %: the minimum"
    patched = set_usage(client, "ls", cpu=f"{LS_HIGH}m")
    visible, shrunk = wait_visible_then(counter, 12, lambda: len(be_cpuset(cluster)) == high, 15,
                                        f"BE cpuset of {high} CPUs with LS at 24 cores")
    print(f"\n(a) BE cpuset {low} -> {high} CPUs: {shrunk - visible:.2f}s after the LS usage showed on the node "
          f"({shrunk - patched:.2f}s after the annotation changed)")
    assert shrunk - visible <= 3.0, f"BE cpuset shrunk {shrunk - visible:.2f}s after the LS usage was visible"
    assert set(be_cpuset(cluster)) <= set(range(CPUS))

    # NodeMetric: the BE pods' usage as reported drops. podsMetric is the average over the NodeMetric's
    # aggregation window (Koordinator's 300 s), which here covers the pods' whole life at 12 cores so far:
    # each report after the shrink averages in seconds at 2 cores, so it is clearly lower than the last.
    after: list[float] = []

    def be_usage_dropped() -> float | None:
        when, usage = pods_metric(client)
        total = usage.get("be-cpu-0", 99) + usage.get("be-cpu-1", 99)
        if when != before_time and total <= 0.8 * before_total:
            after.append(total)
            return time.monotonic()
        return None

    dropped = wait_until(be_usage_dropped, 20, "the BE pods' usage in NodeMetric lower", interval=0.2)
    print(f"(a) NodeMetric BE pods' usage {before_total:.2f} -> {after[0]:.2f} cores (window averages), "
          f"{dropped - shrunk:.2f}s after the cpuset shrank (report interval 5s)")

    # The LS usage falls: the budget comes back, the cpuset grows round by round to the formula's size.
    patched = set_usage(client, "ls", cpu=f"{LS_LOW}m")
    sizes = [len(be_cpuset(cluster))]

    def grown() -> bool:
        n = len(be_cpuset(cluster))
        if n != sizes[-1]:
            sizes.append(n)
        return n == low

    wait_until(grown, 20, f"BE cpuset back to {low} CPUs")
    regrown = time.monotonic()
    print(f"(a) BE cpuset {high} -> {low} CPUs in {regrown - patched:.2f}s after the LS usage fell; sizes seen {sizes}")
    # Each round grows the cpuset by at most the increase limit. A round may also shrink it: the simulated
    # node's CPU counters move in whole 1 s steps, so a collection that reads the node's counters just after a
    # step and the pods' just before it sees a second of "system" usage (the known simulator aliasing; real
    # counters move continuously), and suppression answers it as Koordinator would.
    steps = [b - a for a, b in zip(sizes, sizes[1:])]
    assert all(s <= MAX_INCREASE for s in steps), f"growth per round above {MAX_INCREASE} CPUs: {sizes}"


# -- (b) MemoryEvict ---------------------------------------------------------------------------------

def test_b_memory_evict_picks_koordinators_victim_through_the_api_and_pdb_holds(cluster):
    """Node memory to 74 %: victims in Koordinator's MemoryEvict order (eviction-enabled BE pods by
    priority, then larger usage first) are be-mem-a (20Gi), be-mem-b (12Gi), be-mem-c (4Gi). A PDB
    forbids evicting be-mem-a (EvictPodFail), so be-mem-b is evicted through the API (EvictPodSuccess,
    reason MemoryEvict); releasing it is enough, so be-mem-c, the unlabelled BE pods and the LS pod stay."""
    client = cluster.client
    patch_thresholds(cluster, THRESHOLDS)
    wait_until(lambda: node_slo_thresholds(client).get("evictEnabledPriorityThreshold") == 5999, 15,
               "NodeSLO with evictEnabledPriorityThreshold", interval=0.1)
    client.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                   "metadata": {"name": "keep-a", "namespace": NS},
                   "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "be-mem-a"}}}})
    enabled = {"koordinator.sh/eviction-enabled": "true"}
    for name in ("be-mem-a", "be-mem-b", "be-mem-c"):
        client.create(be_pod(name, cpu="100m", memory="1Gi", labels={**enabled, "app": name}))
    wait_until(lambda: running(client, "be-mem-a", "be-mem-b", "be-mem-c"), 20, "the BE memory pods Running", interval=0.1)
    uids = {n: client.get("Pod", n, NS)["metadata"]["uid"] for n in ("ls", "be-cpu-0", "be-cpu-1", "be-mem-c")}

    # 56 (LS) + 20 + 12 + 4 + 2×1 (be-cpu-*) + 1 (system) = 95Gi of 128Gi: 74 %, over 70 %; release down to
    # 68 %: 128Gi × 6 % = 7.7Gi, which be-mem-b's 12Gi covers and be-mem-c's 4Gi would not.
    set_usage(client, "be-mem-a", memory="20Gi")
    set_usage(client, "be-mem-b", memory="12Gi")
    set_usage(client, "be-mem-c", memory="4Gi")
    over = set_usage(client, "ls", memory="56Gi")

    def gone(name: str) -> bool:
        try:
            client.get("Pod", name, NS)
        except NotFound:
            return True
        return False

    wait_until(lambda: gone("be-mem-b"), 20, "be-mem-b evicted", interval=0.1)
    evicted = time.monotonic()
    print(f"\n(b) be-mem-b evicted {evicted - over:.2f}s after node memory was raised over "
          f"{MEMORY_EVICT_PERCENT}% (simulator tick, collection, memoryEvict round)")
    success = wait_until(lambda: events_for(client, "be-mem-b", "EvictPodSuccess"), 10, "EvictPodSuccess event", interval=0.1)
    assert "trigger by koordlet feature MemoryEvict" in success[0]["message"], success[0]
    assert "node memory usage 74% over threshold 70%" in success[0]["message"], success[0]
    fail = wait_until(lambda: events_for(client, "be-mem-a", "EvictPodFail"), 10, "EvictPodFail event", interval=0.1)
    assert "trigger by koordlet feature MemoryEvict" in fail[0]["message"], fail[0]
    assert not gone("be-mem-a"), "the PodDisruptionBudget forbids evicting be-mem-a"
    for name, uid in uids.items():
        p = client.get("Pod", name, NS)
        assert p["metadata"]["uid"] == uid and not p["metadata"].get("deletionTimestamp"), name
        assert not events_for(client, name, "EvictPodSuccess") and not events_for(client, name, "EvictPodFail"), name


# -- (c) colocation off --------------------------------------------------------------------------------

def test_c_colocation_disabled_restores_the_be_cpuset(cluster):
    """resource-threshold-config enable=false (kubectl): the koordlet stops suppressing and gives the BE
    QoS cgroup every CPU back (it was at the formula's 19 since (a))."""
    client = cluster.client
    assert len(be_cpuset(cluster)) < CPUS, "scenario (a) left the BE cpuset suppressed"
    patched = time.monotonic()
    patch_thresholds(cluster, {**THRESHOLDS, "enable": False})
    wait_until(lambda: be_cpuset(cluster) == all_cpus(cluster), 15, "BE cpuset restored to every CPU")
    restored = time.monotonic()
    print(f"\n(c) BE cpuset restored to {CPUS} CPUs {restored - patched:.2f}s after the ConfigMap edit "
          f"(manager -> NodeSLO -> koordlet)")
    assert node_slo_thresholds(client).get("enable") is False
