"""Which methods the discovery and health paths take, as kube-apiserver answers them.

In kube-apiserver ``/version``, ``/api``, ``/api/v1`` and a built-in ``/apis/GROUP/VERSION`` are
GET-only go-restful routes: any other method is a 405 Status ("the server does not allow this
method on the requested resource"). The health checks, ``/apis`` and ``/apis/GROUP`` (served
by kube-aggregator) and ``/openapi/v2`` are plain handlers that never look at the method, so an
authorized write gets what a read gets. Authorization comes first either way: a non-resource
write is the verb ``post``/``put``/... on the path, which the bootstrap roles do not grant.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.apiserver_process import ApiServerProcess

CRD_DIR = Path(__file__).resolve().parents[1] / "manifests" / "crds"
WRITES = ("POST", "PUT", "PATCH", "DELETE")
METHOD_NOT_ALLOWED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": "the server does not allow this method on the requested resource",
                      "reason": "MethodNotAllowed", "code": 405}
NOT_FOUND = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
             "message": "the server could not find the requested resource", "reason": "NotFound", "code": 404}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("nonresource")
    (root / "tokens").write_text('admintoken\nalicetoken,alice,u-alice\n')
    srv = ApiServerProcess(root / "data", "--token-file", str(root / "tokens"), "--crd-dir", str(CRD_DIR)).start()
    try:
        yield srv
    finally:
        srv.stop()


def _admin(server: ApiServerProcess, method: str, path: str) -> tuple[int, object]:
    status, body, _ = server.request(method, path, {} if method != "DELETE" else None,
                                     headers={"Authorization": "Bearer admintoken"})
    return status, body


@pytest.mark.parametrize("path", ["/version", "/api", "/api/v1", "/apis/apps/v1", "/apis/apps/v1/", "/version/"])
def test_get_only_routes_answer_writes_with_405(server, path):
    assert _admin(server, "GET", path)[0] == 200
    for method in WRITES:
        assert _admin(server, method, path) == (405, METHOD_NOT_ALLOWED), (method, path)


@pytest.mark.parametrize("path,body", [("/healthz", "ok"), ("/livez", "ok"), ("/readyz", "ok"),
                                       ("/healthz/ping", "ok"), ("/readyz/informer-sync", "ok")])
def test_health_checks_take_any_method(server, path, body):
    for method in ("GET", *WRITES):
        assert _admin(server, method, path) == (200, body), (method, path)


@pytest.mark.parametrize("path", ["/apis", "/apis/apps", "/openapi/v2"])
def test_aggregator_and_openapi_handlers_take_any_method(server, path):
    expected = _admin(server, "GET", path)
    assert expected[0] == 200
    for method in WRITES:
        assert _admin(server, method, path) == expected, (method, path)


def test_crd_group_version_list_takes_any_method(server):
    # apiextensions serves a CRD group/version's list with a handler that never looks at the method.
    groups = _admin(server, "GET", "/apis")[1]["groups"]
    gv = next(g["preferredVersion"]["groupVersion"] for g in groups if g["name"].endswith("koordinator.sh"))
    listing = _admin(server, "GET", f"/apis/{gv}")
    assert listing[0] == 200 and listing[1]["kind"] == "APIResourceList"
    assert _admin(server, "POST", f"/apis/{gv}") == listing


@pytest.mark.parametrize("path", ["/healthz/x", "/livez/nope", "/readyz/etcd/x"])
def test_unknown_health_check_is_404_for_every_method(server, path):
    for method in ("GET", *WRITES):
        assert _admin(server, method, path) == (404, NOT_FOUND), (method, path)
    # Unauthenticated reads of the health paths are served too, so they get the 404 as well.
    assert server.request("GET", path)[:2] == (404, NOT_FOUND)


def test_writes_are_authorized_as_non_resource_verbs(server):
    alice = {"Authorization": "Bearer alicetoken"}
    assert server.request("GET", "/healthz", headers=alice)[:2] == (200, "ok")
    status, body, _ = server.request("POST", "/healthz", {}, headers=alice)
    assert status == 403 and body["message"] == 'forbidden: User "alice" cannot post path "/healthz"'
    status, body, _ = server.request("DELETE", "/apis", headers=alice)
    assert status == 403 and body["message"] == 'forbidden: User "alice" cannot delete path "/apis"'
    status, body, _ = server.request("PUT", "/version", {}, headers=alice)
    assert status == 403 and body["message"] == 'forbidden: User "alice" cannot put path "/version"'
    # Without credentials only reads of the health and version paths are served; a write needs a user.
    assert server.request("GET", "/version")[0] == 200
    assert server.request("POST", "/healthz", {})[0] == 401
    assert server.request("DELETE", "/version")[0] == 401


def test_open_server_answers_the_same(tmp_path):
    srv = ApiServerProcess(tmp_path / "data").start()
    try:
        assert srv.request("POST", "/version", {})[:2] == (405, METHOD_NOT_ALLOWED)
        assert srv.request("DELETE", "/apis/apps/v1")[:2] == (405, METHOD_NOT_ALLOWED)
        assert srv.request("POST", "/healthz", {})[:2] == (200, "ok")
        assert srv.request("PATCH", "/healthz/x", {})[:2] == (404, NOT_FOUND)
    finally:
        srv.stop()
