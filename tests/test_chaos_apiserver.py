"""Issue 23's chaos properties of the API server, each through its case in scripts/chaos_apiserver.py
(quick sizes: 3 writers for 1.5 s; 30 watch cuts instead of 100; 1,000 fuzzed requests instead of
10,000), plus the driver scripts/chaos.py. The figures asserted are the ones the script prints.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.script_modules import script_module

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def chaos():
    """scripts/chaos_apiserver.py, imported as the driver imports it."""
    with script_module("chaos_apiserver") as module:
        yield module


def test_kill9_under_writes_loses_no_acknowledged_write(chaos):
    figures = chaos.kill9_under_writes(quick=True)
    assert figures["acknowledged_writes"] > 0 and figures["creates"] > 0 and figures["updates"] > 0, figures
    assert figures["lost"] == 0, figures["lost_examples"]
    assert figures["writer_errors"] == [], figures["writer_errors"]
    assert figures["restart_seconds"] > 0 and figures["writes_per_second_before_kill"] > 0
    assert figures["ok"] is True


def test_watch_disconnects_leave_every_cache_equal_to_a_fresh_list(chaos):
    figures = chaos.watch_disconnects(quick=True)
    assert figures["disconnects"] == figures["disconnects_requested"] == 30, figures
    # Every cut ended three watches (one per informer) and each came back.
    assert figures["rewatches"] >= 30 * 3, figures
    assert figures["mutations"].get("create", 0) > 0 and figures["mutations"].get("delete", 0) > 0, figures
    assert figures["mismatches"] == 0, figures["mismatch_examples"]
    assert figures["ok"] is True, figures


@pytest.fixture(scope="module")
def fuzzed(chaos):
    """One quick fuzz run (1,000 requests), shared by the tests on its figures."""
    return chaos.fuzz_requests(quick=True)


def test_fuzzed_requests_get_no_5xx_and_the_server_survives(fuzzed):
    assert fuzzed["requests"] == 1000
    assert fuzzed["5xx"] == 0, fuzzed["5xx_examples"]
    assert fuzzed["crashes"] == 0 and fuzzed["healthy_after"] is True
    # The hostile requests were refused, not waved through: most answers are 4xx.
    refused = sum(n for code, n in fuzzed["status_histogram"].items() if code.startswith("4"))
    assert refused > 0.7 * fuzzed["requests"], fuzzed["status_histogram"]
    assert set(fuzzed["by_category"]["huge-body"]) == {"413"}, fuzzed["by_category"]["huge-body"]


def test_fuzzed_requests_change_no_stored_object(fuzzed):
    assert fuzzed["objects_checked"] == 10
    assert fuzzed["objects_changed"] == 0, fuzzed["changed"]
    assert fuzzed["ok"] is True


def test_fuzz_rejects_what_the_server_used_to_store_or_500(chaos, tmp_path):
    """The fixes the fuzzing found: each request is refused with a 4xx Status naming the problem."""
    from tests.apiserver_process import ApiServerProcess

    server = ApiServerProcess(tmp_path).start()
    try:
        cms = "/api/v1/namespaces/default/configmaps"
        server.request("POST", cms, {"metadata": {"name": "a"}, "data": {"k": "v"}}, expect=201)
        _, before, _ = server.request("GET", f"{cms}/a", expect=200)
        cases = [
            ("PATCH", f"{cms}/a?fieldManager=f", b"a: &x [*x]\n", "application/apply-patch+yaml"),
            ("PATCH", f"{cms}/a?fieldManager=f", b"apiVersion: v1\nkind: ConfigMap\nmetadata: 5\n",
             "application/apply-patch+yaml"),
            ("PATCH", f"{cms}/a?fieldManager=f", b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n",
             "application/apply-patch+yaml"),
            ("PATCH", f"{cms}/a", b'[{"op":"replace","path":"/metadata","value":"x"}]', "application/json-patch+json"),
            ("PATCH", f"{cms}/a", b'{"data":{"k":5}}', "application/merge-patch+json"),
            ("PUT", f"{cms}/a", b'{"metadata":{"name":"a","ownerReferences":"x"}}', "application/json"),
            ("PUT", f"{cms}/a", b'{"metadata":{"name":"a","generation":"one"}}', "application/json"),
            ("DELETE", f"{cms}/a", b'{"dryRun":"x"}', "application/json"),
            ("DELETE", f"{cms}/a", b'{"gracePeriodSeconds":"soon"}', "application/json"),
            ("DELETE", f"{cms}/a", b'{"kind":"Pod"}', "application/json"),
        ]
        for method, path, body, ctype in cases:
            status, reply, _ = server.request(method, path, raw=body, headers={"Content-Type": ctype})
            assert 400 <= status < 500 and reply["kind"] == "Status" and reply["message"], (method, body, reply)
        # An unknown top-level field is dropped (kube's decoder does), not stored.
        status, reply, _ = server.request("PATCH", f"{cms}/a", raw=b'{"spec":{"replicas":2}}',
                                          headers={"Content-Type": "application/merge-patch+json"})
        assert status == 200 and "spec" not in reply
        _, after, _ = server.request("GET", f"{cms}/a", expect=200)
        assert after == before
    finally:
        server.stop()


def test_driver_lists_the_cases_and_rejects_an_unknown_one():
    listed = subprocess.run([sys.executable, str(ROOT / "scripts" / "chaos.py"), "--list"], capture_output=True, text=True,
                            timeout=60, cwd=ROOT)
    assert listed.returncode == 0, listed.stderr
    names = listed.stdout.split()
    assert {"apiserver-kill9-under-writes", "watch-disconnects", "fuzz-requests"} <= set(names)
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "chaos.py"), "--case", "nope"], capture_output=True,
                         text=True, timeout=60, cwd=ROOT)
    assert bad.returncode == 2 and "--case: Unsupported value: 'nope'" in bad.stderr


def test_driver_prints_one_json_document_and_reports_a_failing_case(monkeypatch, capsys):
    def broken(*, quick: bool) -> dict:
        raise RuntimeError("boom")

    with script_module("chaos") as driver:
        monkeypatch.setattr(driver, "collect", lambda: {"passes": lambda *, quick: {"n": 1, "ok": quick},
                                                         "breaks": broken})
        assert driver.main(["--quick"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False
    assert doc["cases"]["passes"]["ok"] is True and doc["cases"]["passes"]["n"] == 1
    assert doc["cases"]["breaks"]["ok"] is False and doc["cases"]["breaks"]["error"] == "RuntimeError: boom"
