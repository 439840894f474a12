"""List (selectors, pagination, resourceVersion) and watch semantics."""

import json
import socket
import threading
import time

from kubernetes import watch


def cm(name, labels=None):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels or {}}, "data": {}}


def names(body):
    return [i["metadata"]["name"] for i in body["items"]]


def test_label_selectors_all_operators(apiserver, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    apiserver.request("POST", path, cm("a", {"app": "web", "tier": "fe"}), expect=201)
    apiserver.request("POST", path, cm("b", {"app": "db", "koordinator.sh/qosClass": "LS"}), expect=201)
    apiserver.request("POST", path, cm("c", {}), expect=201)
    cases = {
        "app=web": ["a"], "app==web": ["a"], "app!=web": ["b", "c"], "app in (web,db)": ["a", "b"],
        "app notin (web)": ["b", "c"], "app": ["a", "b"], "!app": ["c"], "app,tier=fe": ["a"],
        "koordinator.sh/qosClass=LS": ["b"],
    }
    for selector, expected in cases.items():
        _, body, _ = apiserver.request("GET", f"{path}?labelSelector={selector.replace(' ', '%20')}", expect=200)
        assert names(body) == expected, selector
    status, body, _ = apiserver.request("GET", f"{path}?labelSelector=app%20in%20web")
    assert status == 400 and body["reason"] == "BadRequest"


def test_field_selectors(apiserver, namespace):
    pods = f"/api/v1/namespaces/{namespace}/pods"
    for name, node in (("p1", "n1"), ("p2", "n2"), ("p3", None)):
        spec = {"containers": [{"name": "c", "image": "busybox"}]}
        if node:
            spec["nodeName"] = node
        apiserver.request("POST", pods, {"metadata": {"name": name}, "spec": spec}, expect=201)
    _, body, _ = apiserver.request("GET", f"{pods}?fieldSelector=spec.nodeName%3Dn1", expect=200)
    assert names(body) == ["p1"]
    _, body, _ = apiserver.request("GET", f"{pods}?fieldSelector=spec.nodeName%3D", expect=200)
    assert names(body) == ["p3"]
    _, body, _ = apiserver.request("GET", f"{pods}?fieldSelector=status.phase!%3DSucceeded,status.phase!%3DFailed",
                                   expect=200)
    assert names(body) == ["p1", "p2", "p3"]
    _, body, _ = apiserver.request("GET", f"{pods}?fieldSelector=metadata.name%3Dp2,spec.schedulerName%3Ddefault-scheduler")
    assert names(body) == ["p2"]
    status, body, _ = apiserver.request("GET", f"{pods}?fieldSelector=spec.bogus%3Dx")
    assert status == 400 and "field label not supported: spec.bogus" in body["message"]


def test_event_and_node_field_selectors(apiserver, namespace):
    ev = {"metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "p1", "namespace": namespace},
          "reason": "Scheduled", "message": "ok", "type": "Normal"}
    apiserver.request("POST", f"/api/v1/namespaces/{namespace}/events", ev, expect=201)
    _, body, _ = apiserver.request(
        "GET", f"/api/v1/namespaces/{namespace}/events?fieldSelector=involvedObject.name%3Dp1,involvedObject.kind%3DPod")
    assert names(body) == ["e1"]
    node = {"metadata": {"name": f"cordoned-{namespace}"}, "spec": {"unschedulable": True}}
    apiserver.request("POST", "/api/v1/nodes", node, expect=201)
    _, body, _ = apiserver.request("GET", "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dtrue")
    assert f"cordoned-{namespace}" in names(body)


def test_pagination_is_consistent(apiserver, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for i in range(7):
        apiserver.request("POST", path, cm(f"page-{i}"), expect=201)
    _, first, _ = apiserver.request("GET", f"{path}?limit=3", expect=200)
    assert names(first) == ["page-0", "page-1", "page-2"]
    assert first["metadata"]["remainingItemCount"] == 4
    list_rv = first["metadata"]["resourceVersion"]
    # Changes after the first page do not show in later pages: they come from the same snapshot.
    apiserver.request("DELETE", f"{path}/page-4", expect=200)
    apiserver.request("POST", path, cm("page-9"), expect=201)
    _, second, _ = apiserver.request("GET", f"{path}?limit=3&continue={first['metadata']['continue']}", expect=200)
    assert names(second) == ["page-3", "page-4", "page-5"]
    assert second["metadata"]["resourceVersion"] == list_rv
    _, third, _ = apiserver.request("GET", f"{path}?limit=3&continue={second['metadata']['continue']}", expect=200)
    assert names(third) == ["page-6"] and "continue" not in third["metadata"]
    status, body, _ = apiserver.request("GET", f"{path}?limit=3&continue=not-a-token")
    assert status == 400


def test_list_resource_version_semantics(apiserver, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    _, made, _ = apiserver.request("POST", path, cm("rv-a"), expect=201)
    rv = made["metadata"]["resourceVersion"]
    apiserver.request("POST", path, cm("rv-b"), expect=201)
    _, exact, _ = apiserver.request("GET", f"{path}?resourceVersion={rv}&resourceVersionMatch=Exact", expect=200)
    assert names(exact) == ["rv-a"] and exact["metadata"]["resourceVersion"] == rv
    _, latest, _ = apiserver.request("GET", f"{path}?resourceVersion={rv}", expect=200)
    assert names(latest) == ["rv-a", "rv-b"]
    status, body, _ = apiserver.request("GET", f"{path}?resourceVersion=999999999")
    assert status == 504 and "Too large resource version" in body["message"]


def test_python_client_watch_from_resource_version(core, namespace):
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, cm("w1"))
    core.patch_namespaced_config_map("w1", namespace, {"data": {"x": "1"}})
    core.delete_namespaced_config_map("w1", namespace)
    seen = []
    for ev in watch.Watch().stream(core.list_namespaced_config_map, namespace, resource_version=start,
                                   timeout_seconds=2):
        seen.append((ev["type"], ev["object"].metadata.name))
    assert seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]


def test_watch_without_resource_version_starts_with_current_state(apiserver, core, namespace):
    core.create_namespaced_config_map(namespace, cm("existing"))
    events = list(watch.Watch().stream(core.list_namespaced_config_map, namespace, timeout_seconds=1))
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "existing")]


def raw_watch(apiserver, path, until, timeout=10.0):
    """Open a watch with a raw socket; return the parsed events once ``until(events)`` holds."""
    sock = socket.create_connection(("127.0.0.1", apiserver.port), timeout=timeout)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    buf = b""
    deadline = time.monotonic() + timeout
    events = []
    try:
        while time.monotonic() < deadline:
            try:
                data = sock.recv(65536)
            except socket.timeout:
                break
            if not data:
                break
            buf += data
            body = buf.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in buf else b""
            events = [json.loads(line) for line in _dechunk(body).split(b"\n") if line.strip()]
            if until(events) or buf.endswith(b"\r\n0\r\n\r\n"):
                return events, buf
    finally:
        sock.close()
    return events, buf


def _dechunk(body):
    out, pos = b"", 0
    while True:
        end = body.find(b"\r\n", pos)
        if end < 0:
            return out
        size = int(body[pos:end], 16)
        if size == 0 or len(body) < end + 2 + size:
            return out
        out += body[end + 2:end + 2 + size]
        pos = end + 2 + size + 2


def test_watch_selector_transitions_deliver_added_and_deleted(apiserver, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    _, made, _ = apiserver.request("POST", path, cm("sel", {"role": "a"}), expect=201)
    rv = made["metadata"]["resourceVersion"]
    merge = {"Content-Type": "application/merge-patch+json"}
    apiserver.request("PATCH", f"{path}/sel", {"metadata": {"labels": {"role": "b"}}}, headers=merge, expect=200)
    apiserver.request("PATCH", f"{path}/sel", {"metadata": {"labels": {"role": "a"}}}, headers=merge, expect=200)
    events, _ = raw_watch(apiserver, f"{path}?watch=true&labelSelector=role%3Da&resourceVersion={rv}",
                          lambda evs: len(evs) >= 2)
    assert [e["type"] for e in events] == ["DELETED", "ADDED"]
    assert events[0]["object"]["metadata"]["labels"] == {"role": "b"}


def test_watch_from_compacted_resource_version_gets_410(tmp_path):
    from tests.apiserver_process import ApiServerProcess

    server = ApiServerProcess(tmp_path / "small", "--watch-history", "5").start()
    try:
        path = "/api/v1/namespaces/default/configmaps"
        _, first, _ = server.request("POST", path, cm("h0"), expect=201)
        for i in range(1, 10):
            server.request("POST", path, cm(f"h{i}"), expect=201)
        events, raw = raw_watch(server, f"{path}?watch=1&resourceVersion={first['metadata']['resourceVersion']}",
                                lambda evs: len(evs) >= 1)
        assert raw.startswith(b"HTTP/1.1 200")
        assert events[0]["type"] == "ERROR"
        assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"
        assert "too old resource version" in events[0]["object"]["message"]
    finally:
        server.stop()


def test_watch_bookmarks_and_timeout(tmp_path):
    from tests.apiserver_process import ApiServerProcess

    server = ApiServerProcess(tmp_path / "bm", "--bookmark-interval", "0.3").start()
    try:
        path = "/api/v1/namespaces/default/configmaps?watch=1&allowWatchBookmarks=true&timeoutSeconds=2"
        t0 = time.monotonic()
        events, raw = raw_watch(server, path, lambda evs: False, timeout=10)
        elapsed = time.monotonic() - t0
        assert 1.5 < elapsed < 6, elapsed
        assert raw.endswith(b"0\r\n\r\n")  # the stream ended cleanly at its deadline
        bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
        assert len(bookmarks) >= 2
        assert bookmarks[0]["object"]["kind"] == "ConfigMap" and bookmarks[0]["object"]["metadata"]["resourceVersion"]
        # Without allowWatchBookmarks there are none.
        events, _ = raw_watch(server, "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1",
                              lambda evs: False, timeout=5)
        assert not [e for e in events if e["type"] == "BOOKMARK"]
    finally:
        server.stop()


def test_send_initial_events_ends_with_marked_bookmark(apiserver, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    apiserver.request("POST", path, cm("init"), expect=201)
    events, _ = raw_watch(apiserver, f"{path}?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
                                     "&resourceVersionMatch=NotOlderThan",
                          lambda evs: any(e["type"] == "BOOKMARK" for e in evs))
    assert events[0]["type"] == "ADDED"
    assert events[-1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_slow_watcher_never_blocks_writers(apiserver, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    sock = socket.create_connection(("127.0.0.1", apiserver.port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(f"GET {path}?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    big = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"blob": "x" * 500_000}}
    try:
        t0 = time.monotonic()
        # ~40 MB of events for a watcher that reads nothing: writes must still go through promptly.
        for i in range(80):
            apiserver.request("POST", path, {**big, "metadata": {"name": f"big-{i}"}}, expect=201)
        assert time.monotonic() - t0 < 60
        sock.settimeout(10)
        received = 0
        while True:
            try:
                data = sock.recv(1 << 20)
            except OSError:
                break
            if not data:
                break
            received += len(data)
        # The server cut this watcher off instead of buffering everything for it.
        assert received < 40_000_000
    finally:
        sock.close()


def test_watch_many_writers_in_order(apiserver, core, namespace):
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    path = f"/api/v1/namespaces/{namespace}/configmaps"

    def writer(w):
        for i in range(25):
            apiserver.request("POST", path, cm(f"w{w}-{i}"), expect=201)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events, _ = raw_watch(apiserver, f"{path}?watch=1&resourceVersion={start}", lambda evs: len(evs) >= 100)
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert len(events) == 100 and rvs == sorted(rvs) and len(set(rvs)) == 100
