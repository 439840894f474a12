"""EventRecorder against the embedded API server: client-go tools/record semantics."""

from __future__ import annotations

import json
import re
import socket
import time
import uuid
from typing import Callable, Iterator

import pytest

from koordinator.runtime.kubeconfig import ClusterConfig
from koordinator.runtime.client import Client
from koordinator.runtime.events import COMBINED_PREFIX, EventRecorder
from koordinator.runtime.metrics import RuntimeMetrics
from tests.waiting import wait_until


@pytest.fixture
def make_recorder(client) -> Iterator[Callable[..., EventRecorder]]:
    made: list[EventRecorder] = []

    def make(**kwargs) -> EventRecorder:
        kwargs.setdefault("metrics", RuntimeMetrics())
        kwargs.setdefault("retry_interval", 0.05)
        rec = EventRecorder(kwargs.pop("client", client), kwargs.pop("component", "koord-test"), **kwargs)
        rec.start()
        made.append(rec)
        return rec

    yield make
    for rec in made:
        rec.stop(5.0)


def pod(ns: str, name: str = "web-0") -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": str(uuid.uuid4()), "resourceVersion": "42"}}


def events(client: Client, ns: str, **selector: str) -> list[dict]:
    fs = ",".join(f"{k}={v}" for k, v in selector.items()) or None
    return client.list("Event", ns, field_selector=fs)["items"]


def dropped(rec: EventRecorder, reason: str) -> float:
    return rec.metrics.registry.get_sample_value("koordinator_events_dropped_total", {"reason": reason}) or 0.0


TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\Z")


def test_event_has_the_fields_kubectl_shows(apiserver, client, namespace, make_recorder):
    rec = make_recorder(host="node-a")
    obj = pod(namespace)
    rec.event(obj, "Warning", "FailedScheduling", "0/3 nodes are available")
    [ev] = wait_until(lambda: events(client, namespace, reason="FailedScheduling"))
    assert re.fullmatch(r"web-0\.[0-9a-f]{16}", ev["metadata"]["name"])
    assert ev["metadata"]["namespace"] == namespace
    assert ev["type"] == "Warning" and ev["message"] == "0/3 nodes are available" and ev["count"] == 1
    assert ev["source"] == {"component": "koord-test", "host": "node-a"}
    assert ev["reportingComponent"] == "koord-test" and ev["reportingInstance"] == "node-a"
    assert ev["involvedObject"] == {"kind": "Pod", "namespace": namespace, "name": "web-0",
                                    "uid": obj["metadata"]["uid"], "apiVersion": "v1", "resourceVersion": "42"}
    assert TIMESTAMP.match(ev["firstTimestamp"]) and ev["lastTimestamp"] == ev["firstTimestamp"]

    # kubectl sees the same object.
    out = json.loads(apiserver.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)
    assert [e["reason"] for e in out["items"]] == ["FailedScheduling"]


def test_eventf_formats_and_reference_objects_work(client, namespace, make_recorder):
    rec = make_recorder()
    ref = {"kind": "ConfigMap", "apiVersion": "v1", "namespace": namespace, "name": "cfg"}
    rec.eventf(ref, "Normal", "Reloaded", "reloaded %d keys from %s", 3, "/etc/config")
    [ev] = wait_until(lambda: events(client, namespace, reason="Reloaded"))
    assert ev["message"] == "reloaded 3 keys from /etc/config"
    assert ev["involvedObject"] == ref


def test_identical_events_aggregate_into_one_with_a_count(client, namespace, make_recorder):
    rec = make_recorder()
    obj = pod(namespace)
    for _ in range(5):
        rec.event(obj, "Normal", "Pulled", "image pulled")
    wait_until(lambda: [e for e in events(client, namespace, reason="Pulled") if e["count"] == 5])
    [ev] = events(client, namespace, reason="Pulled")
    assert ev["message"] == "image pulled"
    assert ev["lastTimestamp"] >= ev["firstTimestamp"]


def test_similar_events_are_combined_after_similar_max(client, namespace, make_recorder):
    rec = make_recorder(similar_max=3)
    obj = pod(namespace)
    for i in range(6):
        rec.event(obj, "Warning", "BackOff", f"attempt {i} failed")

    def combined():
        found = [e for e in events(client, namespace, reason="BackOff") if e["message"].startswith(COMBINED_PREFIX)]
        return found if found and found[0]["count"] == 4 else None

    [ev] = wait_until(combined)
    assert ev["message"] == COMBINED_PREFIX + "attempt 5 failed"
    plain = sorted(e["message"] for e in events(client, namespace, reason="BackOff") if e is not ev
                   and not e["message"].startswith(COMBINED_PREFIX))
    assert plain == ["attempt 0 failed", "attempt 1 failed"]


def test_spam_filter_drops_beyond_the_burst_per_object(client, namespace, make_recorder):
    rec = make_recorder(burst=5)
    noisy, quiet = pod(namespace, "noisy"), pod(namespace, "quiet")
    for i in range(8):
        rec.event(noisy, "Normal", f"Reason{i}", "something happened")
    rec.event(quiet, "Normal", "Reason0", "something happened")
    wait_until(lambda: dropped(rec, "spam") == 3 and len(events(client, namespace)) == 6)
    assert len(events(client, namespace, **{"involvedObject.name": "noisy"})) == 5
    assert len(events(client, namespace, **{"involvedObject.name": "quiet"})) == 1


def test_cluster_scoped_object_events_go_to_default(client, make_recorder):
    rec = make_recorder()
    name = f"node-{uuid.uuid4().hex[:8]}"
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": str(uuid.uuid4())}}
    rec.event(node, "Normal", "NodeReady", "ready")
    [ev] = wait_until(lambda: events(client, "default", **{"involvedObject.name": name}))
    assert ev["metadata"]["namespace"] == "default"
    assert "namespace" not in ev["involvedObject"] and ev["involvedObject"]["kind"] == "Node"


def test_bad_input_is_refused_at_once(make_recorder, namespace):
    rec = make_recorder()
    with pytest.raises(ValueError, match="Normal, Warning"):
        rec.event(pod(namespace), "Error", "Oops", "bad type")
    with pytest.raises(ValueError, match="no name"):
        rec.event({"kind": "Pod", "metadata": {"namespace": namespace}}, "Normal", "Oops", "x")


def test_a_deleted_event_is_created_anew_on_repeat(client, namespace, make_recorder):
    rec = make_recorder()
    obj = pod(namespace)
    rec.event(obj, "Normal", "Synced", "done")
    [ev] = wait_until(lambda: events(client, namespace, reason="Synced"))
    client.delete("Event", ev["metadata"]["name"], namespace)
    rec.event(obj, "Normal", "Synced", "done")
    [again] = wait_until(lambda: events(client, namespace, reason="Synced"))
    assert again["count"] == 2 and again["message"] == "done"


def test_stop_drains_the_queue(client, namespace):
    rec = EventRecorder(client, "koord-test", metrics=RuntimeMetrics())
    for i in range(10):
        rec.event(pod(namespace, f"p{i}"), "Normal", "Created", "created")
    rec.start()
    rec.stop(20.0)
    assert len(events(client, namespace, reason="Created")) == 10
    rec.event(pod(namespace), "Normal", "Late", "after stop")  # ignored, no error
    assert rec.pending() == 0


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_unreachable_server_retries_then_drops_without_blocking_callers():
    cfg = ClusterConfig(host=f"http://127.0.0.1:{closed_port()}")
    dead = Client(cfg, max_attempts=1)
    rec = EventRecorder(dead, "koord-test", metrics=RuntimeMetrics(), retries=3, retry_interval=0.5,
                        queue_size=10)
    rec.start()
    try:
        obj = pod("default")
        started = time.monotonic()
        for i in range(200):
            rec.event(obj, "Warning", "Unreachable", f"try {i}")
        # Recording is a queue append: 200 calls while the writer is stuck take no time at all.
        assert time.monotonic() - started < 5.0
        assert dropped(rec, "queue_full") >= 180
        wait_until(lambda: dropped(rec, "retries_exhausted") >= 1)
    finally:
        rec.stop(2.0)
        dead.close()
