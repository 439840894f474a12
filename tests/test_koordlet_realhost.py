"""The koordlet on this very machine: real /proc, /sys and cgroup root, for a minute."""

from __future__ import annotations

import logging
import os
import time

from koordinator.apis import quantity
from tests.koordlet_harness import InProcessKoordlet
from tests.waiting import wait_until

RUN_FOR = 60.0


def test_koordlet_on_this_machine_runs_a_minute_and_reports_plausible_usage(fresh_crd_server, scheduler_api,
                                                                             tmp_path, caplog):
    api = scheduler_api
    node = "this-machine"
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
                "status": {"capacity": {"cpu": str(os.cpu_count()), "memory": "1Ti", "pods": "110"}}})
    api.create({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": node},
                "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}}})
    koordlet = None
    with caplog.at_level(logging.WARNING, logger="koordinator"):
        started = time.monotonic()
        try:
            koordlet = InProcessKoordlet(fresh_crd_server.kubeconfig, node, None, tmp_path / "run",
                                         "--report-interval", "5s").start()
            wait_until(lambda: koordlet.parts.advisor.has_synced(), message="first collection round")
            wait_until(lambda: time.monotonic() - started >= RUN_FOR and koordlet.parts.reporter.last_reported,
                       timeout=RUN_FOR + 30, interval=0.5, message="a minute of running with reports")
            status = api.get("NodeMetric", node)["status"]
        finally:
            if koordlet is not None:
                koordlet.stop()
    problems = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not problems, problems
    resources = status["nodeMetric"]["nodeUsage"]["resources"]
    cpu, memory = quantity.milli_value(resources["cpu"]) / 1000, quantity.value(resources["memory"])
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 0 <= cpu <= os.cpu_count()
    assert 0 < memory <= total
