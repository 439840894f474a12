"""Issue 23's chaos properties for the roles, each as a test: ``scripts/chaos_roles.py``'s cases in quick mode
(the figures are the ones ``scripts/chaos.py`` prints). Each case starts its own API server and processes.

Quick mode: 3 Nodes for the manager, an 8 s API-server outage for the koordlet (30 s in the full run), a
gang of 3 with a 3 s waiting time for the scheduler.
"""

from __future__ import annotations

import pytest

from tests.script_modules import script_module


@pytest.fixture(scope="module")
def chaos():
    """scripts/chaos_roles.py, imported as the driver imports it."""
    with script_module("chaos_roles") as module:
        yield module


def test_manager_leader_kill9_other_takes_over_and_no_object_has_two_writers(chaos):
    figures = chaos.CASES["manager-leader-kill9"](quick=True)
    assert figures["ok"], figures
    # Takeover within lease duration + retry (see the case for the bound's terms).
    assert 0 < figures["takeover_s"] <= figures["bound_s"], figures
    assert figures["old_leader_writes"] > 0 and figures["new_leader_writes"] > 0, figures
    assert figures["standby_writes"] == 0 and figures["old_leader_writes_after_kill"] == 0, figures
    assert figures["objects_written_by_both"] == 0, figures
    assert figures["objects_handed_over"] >= figures["nodes"], figures


def test_koordlet_keeps_enforcing_through_an_apiserver_outage_and_reports_after(chaos):
    figures = chaos.CASES["koordlet-apiserver-outage"](quick=True)
    assert figures["ok"], figures
    assert figures["outage_s"] >= 8.0, figures
    assert figures["enforcement_writes_during_outage"] > 0 and figures["distinct_cpusets"] >= 2, figures
    assert figures["slo_kept"] is True, figures
    assert figures["report_after_recovery_s"] <= figures["report_bound_s"], figures


def test_scheduler_killed_mid_gang_leaves_no_partial_gang_bound(chaos):
    figures = chaos.CASES["scheduler-kill-mid-gang"](quick=True)
    assert figures["ok"], figures
    assert figures["bound_at_kill"] == 1, figures     # the kill did leave a partial gang behind
    assert figures["partial"] is False and figures["bound_after"] == figures["members"], figures


def test_the_tap_attributes_writes_and_holds_what_it_is_told(chaos, tmp_path):
    """The ownership check's source: acknowledged writes are told from failed ones and from reads, creates are
    named, and a held request never reaches the server."""
    from koordinator.runtime.client import Client
    from koordinator.runtime.errors import AlreadyExists
    from tests.http_tap import HttpTap

    server = chaos.start_server(tmp_path)
    tap = HttpTap(server.port, hold=lambda method, path: method == "DELETE").start()
    client = Client.from_kubeconfig(str(chaos.kubeconfig_via(server, tap.url, tmp_path / "kc")), qps=0, max_attempts=1)
    direct = Client.from_kubeconfig(str(server.kubeconfig), qps=0)
    try:
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tapped", "namespace": "default"}}
        client.create(cm)
        with pytest.raises(AlreadyExists):
            client.create(cm)
        client.get("ConfigMap", "tapped", "default")
        with pytest.raises(Exception):
            client.delete("ConfigMap", "tapped", "default", timeout=1)
        assert direct.get("ConfigMap", "tapped", "default")   # the held DELETE never arrived
        seen = [(r.method, r.object, r.status, r.ok_write, r.held) for r in tap.requests]
        path = "/api/v1/namespaces/default/configmaps"
        assert seen[:3] == [("POST", f"{path}/tapped", 201, True, False), ("POST", f"{path}/tapped", 409, False, False),
                            ("GET", f"{path}/tapped", 200, False, False)], seen
        assert seen[3][0] == "DELETE" and seen[3][2] is None and seen[3][4], seen
    finally:
        client.close()
        direct.close()
        tap.stop()
        server.stop()


def test_ownership_counts_a_second_writer(chaos):
    """The manager case's verdict is not vacuous: a standby's write, or an old leader's write after the new
    leader's first write to the same object, counts as an object written by both."""
    from tests.http_tap import Request

    def write(t: float, path: str) -> Request:
        r = Request(t, "PUT", path, False)
        r.status = 200
        return r

    slo = "/apis/slo.koordinator.sh/v1alpha1/nodeslos/n1"
    clean = chaos._ownership([write(1.0, slo)], [write(5.0, slo)], killed_at=2.0, acquired_at=4.0)
    assert (clean["objects_written_by_both"], clean["objects_handed_over"], clean["standby_writes"]) == (0, 1, 0)
    standby = chaos._ownership([write(1.0, slo)], [write(3.0, slo)], killed_at=2.0, acquired_at=4.0)
    assert (standby["objects_written_by_both"], standby["standby_writes"]) == (1, 1)
    interleaved = chaos._ownership([write(1.0, slo), write(6.0, slo)], [write(5.0, slo)], killed_at=7.0,
                                   acquired_at=4.0)
    assert interleaved["objects_written_by_both"] == 1
