"""The Runtime end to end against the embedded API server: start order, probes, metrics, leadership, stop."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from koordinator.runtime.client import Client
from koordinator.runtime.options import RuntimeOptions
from koordinator.runtime.runtime import Runtime
from koordinator.runtime.servers import probe
from tests.test_runtime_informer import pod
from tests.waiting import wait_until


def options(apiserver: Any, **overrides: Any) -> RuntimeOptions:
    base: dict[str, Any] = dict(kubeconfig=str(apiserver.kubeconfig), metrics_addr="127.0.0.1:0",
                                health_addr="127.0.0.1:0", graceful_shutdown_timeout=10.0, kube_api_qps=0)
    return RuntimeOptions.defaults("manager", **{**base, **overrides})


def test_controllers_run_after_sync_and_probes_and_metrics_are_served(apiserver, namespace):
    before = set(threading.enumerate())
    runtime = Runtime(options(apiserver))
    seen: set[str] = set()
    informer = runtime.informers.informer("Pod", namespace=namespace)
    runtime.controller("pods-seen", lambda key: seen.add(key), workers=2).watch(informer)
    ticks = threading.Event()
    runtime.add_runnable("ticker", lambda stop: (ticks.set(), stop.wait()))
    runtime.start()
    try:
        metrics_url, health_url = runtime.server_urls
        Client.from_kubeconfig(str(apiserver.kubeconfig), qps=0).create(pod("a", namespace))
        wait_until(lambda: f"{namespace}/a" in seen)
        assert ticks.wait(10)
        wait_until(lambda: probe(health_url, "/readyz")[0] == 200)
        assert probe(health_url, "/healthz") == (200, "ok")
        status, text = probe(metrics_url, "/metrics")
        assert status == 200
        assert 'workqueue_adds_total{controller="pods-seen",name="pods-seen"}' in text
        assert "rest_client_requests_total" in text
        assert runtime.is_leader()  # without --leader-elect, this process runs gated work
    finally:
        runtime.stop()
    wait_until(lambda: not [t for t in threading.enumerate() if t not in before and t.is_alive()],
               message="runtime threads alive after stop")


def test_not_ready_and_no_work_until_caches_sync(apiserver):
    # NodeMetric is not served by the session server (no CRDs): its informer can never sync.
    runtime = Runtime(options(apiserver, metrics_addr="0"))
    runtime.informers.informer("NodeMetric")
    started = threading.Event()
    runtime.add_runnable("needs-cache", lambda stop: started.set())
    runtime.start()
    try:
        (health_url,) = runtime.server_urls
        wait_until(lambda: probe(health_url, "/readyz")[0] == 500)
        status, text = probe(health_url, "/readyz?verbose")
        assert "[-]informer-sync failed: waiting for caches: nodemetrics.slo.koordinator.sh" in text
        assert probe(health_url, "/healthz")[0] == 200  # alive, just not ready
        assert not started.is_set()
    finally:
        runtime.stop(5)


def test_leader_gated_work_runs_on_exactly_one_and_moves_on_release(apiserver, namespace):
    election = dict(leader_elect=True, leader_elect_namespace=namespace, leader_elect_name="gated",
                    leader_elect_lease_duration=3.0, leader_elect_renew_deadline=2.0,
                    leader_elect_retry_period=0.3, metrics_addr="0", health_addr="0")
    running: dict[str, bool] = {}
    lock = threading.Lock()
    overlap: list[str] = []

    def work(name: str):
        def run(stop: threading.Event) -> None:
            with lock:
                if any(running.values()):
                    overlap.append(name)
                running[name] = True
            stop.wait()
            with lock:
                running[name] = False
        return run

    runtimes = {}
    for name in ("a", "b"):
        rt = Runtime(options(apiserver, leader_elect_identity=name, **election))
        rt.add_runnable("gated", work(name), leader_gated=True)
        runtimes[name] = rt
    for rt in runtimes.values():
        rt.start()
    try:
        wait_until(lambda: sum(running.values()) == 1, message="nobody leads")
        leader = next(n for n, r in running.items() if r)
        other = "b" if leader == "a" else "a"
        assert not runtimes[other].is_leader()
        runtimes[leader].stop()  # releases the Lease: the other takes over in about a second
        wait_until(lambda: running.get(other), timeout=10, message="the standby did not take over")
        assert not overlap
        lease = Client.from_kubeconfig(str(apiserver.kubeconfig)).get("Lease", "gated", namespace)
        assert lease["spec"]["holderIdentity"] == other
    finally:
        for rt in runtimes.values():
            rt.stop(5)


@pytest.mark.parametrize("flag", ["metrics_addr", "health_addr"])
def test_port_in_use_fails_start(apiserver, flag):
    first = Runtime(options(apiserver, metrics_addr="127.0.0.1:0", health_addr="0"))
    first.start()
    try:
        taken = first.server_urls[0].split("//")[1]
        second = Runtime(options(apiserver, **{"metrics_addr": "0", "health_addr": "0", flag: taken}))
        with pytest.raises(OSError):
            second.start()
        second.stop(2)
    finally:
        first.stop(2)


def test_config_file_loads_at_start_and_an_invalid_one_fails_the_start(apiserver, tmp_path):
    from koordinator.runtime.configsource import ConfigError

    config = tmp_path / "config"
    config.mkdir()
    (config / "colocation-config").write_text('{"enable": true, "cpuReclaimThresholdPercent": 60}')
    seen: list[dict] = []
    runtime = Runtime(options(apiserver, config=str(config), metrics_addr="0", health_addr="0"))
    runtime.config_file("slo-controller-config", seen.append)
    runtime.start()
    try:
        assert seen and seen[-1]["colocation-config"]["cpuReclaimThresholdPercent"] == 60
        (config / "colocation-config").write_text('{"enable": true, "cpuReclaimThresholdPercent": 70}')
        wait_until(lambda: seen[-1]["colocation-config"]["cpuReclaimThresholdPercent"] == 70)
    finally:
        runtime.stop(5)

    (config / "colocation-config").write_text('{"midCPUThresholdPercent": 120}')
    broken = Runtime(options(apiserver, config=str(config), metrics_addr="0", health_addr="0"))
    broken.config_file("slo-controller-config", seen.append)
    with pytest.raises(ConfigError, match=r"data\.colocation-config\.midCPUThresholdPercent"):
        broken.start()
    broken.stop(2)
    without = Runtime(options(apiserver, metrics_addr="0", health_addr="0"))
    with pytest.raises(ValueError, match="needs --config"):
        without.config_file("slo-controller-config", seen.append)


@pytest.mark.parametrize("freeze", [False, True])
def test_freeze_after_sync_exempts_the_synced_caches_from_the_collector(apiserver, namespace, freeze):
    import gc

    Client.from_kubeconfig(str(apiserver.kubeconfig), qps=0).create(pod("frozen", namespace))
    assert gc.get_freeze_count() == 0
    runtime = Runtime(options(apiserver, metrics_addr="0", health_addr="0"), freeze_after_sync=freeze)
    informer = runtime.informers.informer("Pod", namespace=namespace)
    started = threading.Event()
    runtime.add_runnable("after-sync", lambda stop: (started.set(), stop.wait()))
    runtime.start()
    try:
        assert started.wait(10)
        assert informer.store.get(f"{namespace}/frozen") is not None
        # The runtime froze (or not) before starting the work, so after the caches synced.
        assert (gc.get_freeze_count() > 0) is freeze
    finally:
        runtime.stop()
        gc.unfreeze()
