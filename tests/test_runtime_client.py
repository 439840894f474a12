"""The runtime client against the embedded API server: verbs, typed errors, retries, throttling."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from koordinator.runtime import errors
from koordinator.runtime.kubeconfig import ClusterConfig
from koordinator.runtime.client import Client, ConfigError, load_configuration
from koordinator.runtime.kinds import KindRegistry, UnknownKind
from tests.test_runtime_informer import pod

ROOT = Path(__file__).resolve().parent.parent


def test_crud_and_typed_errors(client, namespace):
    created = client.create(pod("a", namespace))
    assert created["metadata"]["uid"]
    with pytest.raises(errors.AlreadyExists):
        client.create(pod("a", namespace))
    got = client.get("Pod", "a", namespace)
    got["metadata"]["labels"] = {"x": "1"}
    updated = client.update(got)
    assert updated["metadata"]["labels"] == {"x": "1"}
    with pytest.raises(errors.Conflict) as stale:
        client.update(got)  # got still carries the old resourceVersion
    assert stale.value.status == 409 and stale.value.reason == "Conflict"
    with pytest.raises(errors.NotFound) as missing:
        client.get("Pod", "nope", namespace)
    assert 'pods "nope" not found' in missing.value.message
    bad = pod("bad", namespace)
    bad["spec"]["containers"][0]["image"] = ""
    with pytest.raises(errors.Invalid) as invalid:
        client.create(bad)
    assert any(c.get("field") == "spec.containers[0].image" for c in invalid.value.causes)
    client.delete("Pod", "a", namespace)
    with pytest.raises(errors.NotFound):
        client.get("Pod", "a", namespace)


def test_patch_types(client, namespace):
    client.create(pod("p", namespace, {"a": "1"}))
    merged = client.patch("Pod", "p", {"metadata": {"labels": {"b": "2"}}}, namespace=namespace)
    assert merged["metadata"]["labels"] == {"a": "1", "b": "2"}
    jsonp = client.patch("Pod", "p", [{"op": "remove", "path": "/metadata/labels/a"}], namespace=namespace,
                         patch_type="json")
    assert jsonp["metadata"]["labels"] == {"b": "2"}
    strategic = client.patch("Pod", "p", {"spec": {"containers": [{"name": "c", "image": "nginx"}]}},
                             namespace=namespace, patch_type="strategic")
    assert strategic["spec"]["containers"][0]["image"] == "nginx"
    applied = client.patch("ConfigMap", "cm", {"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": "cm"}, "data": {"k": "v"}},
                           namespace=namespace, patch_type="apply", field_manager="test")
    assert applied["data"] == {"k": "v"}
    with pytest.raises(ValueError, match="patch_type 'xml'"):
        client.patch("Pod", "p", {}, namespace=namespace, patch_type="xml")
    with pytest.raises(ValueError, match="field_manager"):
        client.patch("Pod", "p", {}, namespace=namespace, patch_type="apply")


def test_custom_resources_and_strategic_patch_refused_for_them(fresh_apiserver):
    server = fresh_apiserver.start("--crd-dir", str(ROOT / "manifests" / "crds"))
    c = Client.from_kubeconfig(str(server.kubeconfig), qps=0)
    try:
        c.create({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": "n1"}})
        status = c.patch("NodeMetric", "n1", {"status": {"updateTime": "2026-11-23T10:00:00Z"}},
                         subresource="status")
        assert status["status"]["updateTime"] == "2026-11-23T10:00:00Z"
        with pytest.raises(errors.UnsupportedMediaType):
            c.patch("NodeMetric", "n1", {"spec": {}}, patch_type="strategic")
    finally:
        c.close()


def test_bind_and_evict(client, namespace):
    client.create(pod("b", namespace))
    client.bind("b", namespace, "node-1")
    assert client.get("Pod", "b", namespace)["spec"]["nodeName"] == "node-1"
    with pytest.raises(errors.Conflict, match="already assigned"):
        client.bind("b", namespace, "node-2")
    client.evict("b", namespace)
    with pytest.raises(errors.NotFound):
        client.get("Pod", "b", namespace)


def test_eviction_blocked_by_a_budget_is_not_retried(client, namespace):
    client.create(pod("guarded", namespace, {"app": "db"}))
    client.patch("Pod", "guarded", {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
                 namespace=namespace, subresource="status")
    client.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                   "metadata": {"name": "db", "namespace": namespace},
                   "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}})
    started = time.monotonic()
    with pytest.raises(errors.TooManyRequests, match="disruption budget"):
        client.evict("guarded", namespace)
    assert time.monotonic() - started < 2.0, "a 429 without Retry-After must not be retried"


def test_watch_from_an_expired_version_raises_gone(fresh_apiserver):
    server = fresh_apiserver.start("--watch-history", "2")
    c = Client.from_kubeconfig(str(server.kubeconfig), qps=0)
    try:
        first = c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n0"}})
        for i in range(1, 5):
            c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"n{i}"}})
        stream = c.watch("Namespace", resource_version=first["metadata"]["resourceVersion"])
        with pytest.raises(errors.Gone) as gone:
            list(stream)
        assert gone.value.status == 410
    finally:
        c.close()


def test_watch_stream_and_close_from_another_thread(client, namespace):
    rv = client.list("Pod", namespace)["metadata"]["resourceVersion"]
    stream = client.watch("Pod", namespace, resource_version=rv)
    client.create(pod("w", namespace))
    events = iter(stream)
    kind, obj = next(events)
    assert (kind, obj["metadata"]["name"]) == ("ADDED", "w")
    timer = threading.Timer(0.2, stream.close)
    timer.start()
    assert list(events) == []  # close() ends the iteration quietly
    timer.join()
    assert stream.closed


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers from a script of (status, headers, body); for paths the embedded server cannot fail on demand."""

    script: list[tuple[int, dict[str, str], bytes]] = []
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        self._answer()

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer()

    def _answer(self) -> None:
        type(self).seen.append(f"{self.command} {self.path}")
        status, headers, body = type(self).script.pop(0) if type(self).script else (200, {}, b"{}")
        self.send_response(status)
        for k, v in {"Content-Type": "application/json", **headers}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def scripted() -> Iterator[tuple[Client, type[_Scripted]]]:
    handler = type("Handler", (_Scripted,), {"script": [], "seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    cfg = ClusterConfig(host=f"http://127.0.0.1:{server.server_address[1]}")
    c = Client(cfg, qps=0)
    try:
        yield c, handler
    finally:
        c.close()
        server.shutdown()
        server.server_close()
        thread.join(5)


STATUS_503 = b'{"kind":"Status","status":"Failure","reason":"ServiceUnavailable","code":503,"message":"busy"}'
STATUS_429 = b'{"kind":"Status","status":"Failure","reason":"TooManyRequests","code":429,"message":"slow down"}'
STATUS_500 = b'{"kind":"Status","status":"Failure","reason":"InternalError","code":500,"message":"oops"}'


def test_retries_429_with_retry_after_and_5xx(scripted):
    c, handler = scripted
    handler.script = [(429, {"Retry-After": "0"}, STATUS_429), (503, {}, STATUS_503),
                      (200, {}, b'{"kind":"Namespace","metadata":{"name":"x"}}')]
    assert c.get("Namespace", "x")["metadata"]["name"] == "x"
    assert len(handler.seen) == 3


def test_no_retry_of_a_500_for_writes_or_of_client_errors(scripted):
    c, handler = scripted
    handler.script = [(500, {}, STATUS_500), (200, {}, b"{}")]
    with pytest.raises(errors.InternalError):
        c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    assert len(handler.seen) == 1
    handler.script = [(404, {}, b'{"kind":"Status","reason":"NotFound","code":404,"message":"gone"}')]
    with pytest.raises(errors.NotFound):
        c.get("Namespace", "x")
    assert len(handler.seen) == 2


def test_connection_refused_is_retried_then_raised():

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    cfg = ClusterConfig(host=f"http://127.0.0.1:{port}")
    c = Client(cfg, qps=0, max_attempts=3)
    with pytest.raises(errors.ConnectionFailed, match="cannot connect"):
        c.get("Namespace", "x")
    assert c.metrics.registry.get_sample_value(
        "rest_client_requests_total", {"code": "<error>", "method": "GET", "host": f"127.0.0.1:{port}"}) == 3


def test_client_side_rate_limit(apiserver):
    c = Client.from_kubeconfig(str(apiserver.kubeconfig), qps=10, burst=1)
    try:
        started = time.monotonic()
        for _ in range(6):
            c.request("GET", "/version")
        assert time.monotonic() - started >= 0.45  # 5 requests beyond the burst at 10 qps
    finally:
        c.close()


def test_request_metrics(client):
    client.request("GET", "/version")
    host = client.host.split("//", 1)[1]
    assert client.metrics.registry.get_sample_value(
        "rest_client_requests_total", {"code": "200", "method": "GET", "host": host}) >= 1


def test_kind_registry():
    kinds = KindRegistry()
    assert kinds.get("Pod").path("ns", "p", "binding") == "/api/v1/namespaces/ns/pods/p/binding"
    assert kinds.get("leases.coordination.k8s.io").kind == "Lease"
    assert kinds.get("scheduling.koordinator.sh/v1alpha1/Reservation").namespaced is False
    assert kinds.get("NodeMetric").path(name="n") == "/apis/slo.koordinator.sh/v1alpha1/nodemetrics/n"
    with pytest.raises(UnknownKind, match="unknown kind 'Podd'"):
        kinds.get("Podd")
    with pytest.raises(UnknownKind, match="no apiVersion/kind"):
        kinds.for_object({"metadata": {"name": "x"}})


def test_namespaced_kind_needs_a_namespace(client):
    with pytest.raises(ValueError, match="metadata.namespace"):
        client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})


def test_configuration_errors_name_the_file(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="no such file"):
        load_configuration(str(tmp_path / "missing"))
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n")
    with pytest.raises(ConfigError, match=f"kubeconfig {broken}: no current-context"):
        load_configuration(str(broken))
