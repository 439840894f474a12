"""Durability across kill -9, authentication, TLS, and hostile input."""

import json
import os
import random
import socket
import ssl
import subprocess
import sys
import time

from tests.apiserver_process import ApiServerProcess


def cm(name):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}}


def test_kill9_loses_nothing_acknowledged(fresh_apiserver):
    fresh_apiserver.start()
    path = "/api/v1/namespaces/default/configmaps"
    last_rv = 0
    for i in range(200):
        _, made, _ = fresh_apiserver.request("POST", path, cm(f"d{i}"), expect=201)
        last_rv = int(made["metadata"]["resourceVersion"])
    fresh_apiserver.request("DELETE", f"{path}/d0", expect=200)
    fresh_apiserver.kill9()
    fresh_apiserver.start()
    _, listed, _ = fresh_apiserver.request("GET", path, expect=200)
    assert len(listed["items"]) == 199
    assert int(listed["metadata"]["resourceVersion"]) > last_rv
    _, made, _ = fresh_apiserver.request("POST", path, cm("after"), expect=201)
    assert int(made["metadata"]["resourceVersion"]) > int(listed["metadata"]["resourceVersion"])
    # A watch from before the restart cannot be resumed: the client must relist.
    sock = socket.create_connection(("127.0.0.1", fresh_apiserver.port), timeout=10)
    sock.sendall(f"GET {path}?watch=1&resourceVersion={last_rv - 50} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    data = b""
    while b'"code":410' not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    sock.close()
    assert b'"reason":"Expired"' in data


def test_non_loopback_requires_token(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "koordinator", "apiserver", "--data-dir", str(tmp_path),
                           "--host", "0.0.0.0", "--port", "0"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "--host 0.0.0.0: binding to a non-loopback address requires --token-file" in proc.stderr


def test_bad_flags_are_one_line_errors(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "koordinator", "apiserver", "--port", "99999"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "invalid port 99999" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_token_authentication(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("s3cret\n")
    server = ApiServerProcess(tmp_path / "auth", "--token-file", str(tokens)).start()
    try:
        status, body, _ = server.request("GET", "/api/v1/namespaces")
        assert status == 401 and body["reason"] == "Unauthorized"
        status, _, _ = server.request("GET", "/api/v1/namespaces", headers={"Authorization": "Bearer wrong"})
        assert status == 401
        server.request("GET", "/api/v1/namespaces", headers={"Authorization": "Bearer s3cret"}, expect=200)
        server.request("GET", "/healthz", expect=200)
        # The kubeconfig it writes carries the token, so kubectl just works.
        assert "default" in server.kubectl("get", "ns").stdout
    finally:
        server.stop()


def test_tls_with_generated_certificate(tmp_path):
    server = ApiServerProcess(tmp_path / "tls", "--tls").start()
    try:
        assert server.url.startswith("https://")
        ctx = ssl.create_default_context(cafile=str(tmp_path / "tls" / "apiserver.crt"))
        with socket.create_connection(("127.0.0.1", server.port)) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                reply = b""
                while chunk := s.recv(4096):
                    reply += chunk
        assert reply.startswith(b"HTTP/1.1 200") and b"gitVersion" in reply
        assert "kube-system" in server.kubectl("get", "ns").stdout
    finally:
        server.stop()


def send_raw(port, payload, timeout=5.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        data = b""
        try:
            while chunk := s.recv(65536):
                data += chunk
        except socket.timeout:
            pass
        return data


def test_oversized_and_malformed_requests(apiserver, namespace):
    # The server answers 413 from the declared length, before reading any of the body.
    reply = send_raw(apiserver.port, b"POST /api/v1/namespaces/%s/configmaps HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (namespace.encode(), 4 << 20))
    assert reply.startswith(b"HTTP/1.1 413")
    chunked = b"POST /api/v1/namespaces/%s/configmaps HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" % (
        namespace.encode()) + b"%x\r\n" % (4 << 20)
    assert send_raw(apiserver.port, chunked).startswith(b"HTTP/1.1 413")
    assert send_raw(apiserver.port, b"NONSENSE\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert send_raw(apiserver.port, b"GET / HTTP/1.1\r\nContent-Length: abc\r\n\r\n").startswith(b"HTTP/1.1 400")
    status, body, _ = apiserver.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", raw=b"{not json")
    assert status == 400 and body["kind"] == "Status"
    status, _, _ = apiserver.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", raw=b"[1,2]")
    assert status == 400
    status, _, _ = apiserver.request("PATCH", f"/api/v1/namespaces/{namespace}/configmaps/x", {"a": 1},
                                     headers={"Content-Type": "text/plain"})
    assert status == 415
    status, _, _ = apiserver.request("GET", "/api/v1/namespaces", headers={"Accept": "application/vnd.kubernetes.protobuf"})
    assert status == 406


def test_fuzzed_requests_never_crash_the_server(apiserver, namespace):
    rng = random.Random(1234)
    paths = [f"/api/v1/namespaces/{namespace}/configmaps", f"/api/v1/namespaces/{namespace}/pods/p",
             "/apis/apps/v1/namespaces/x/deployments", "/api/v1/nodes/n/status", "/apis/policy/v1",
             f"/api/v1/namespaces/{namespace}/pods/p/eviction", "/api/v1/namespaces/%00/pods"]
    content_types = ["application/json", "application/merge-patch+json", "application/json-patch+json",
                     "application/strategic-merge-patch+json", "application/apply-patch+yaml", "application/yaml"]
    fragments = [b"{", b"}", b"[", b"]", b'"metadata"', b":", b",", b"null", b"1e999", b'"name"', b'"x"',
                 b'{"metadata":{"name":', b'"spec":', b"\xff\xfe", b"true", b"-", b"$patch", b'"op":"add"']
    for _ in range(400):
        body = b"".join(rng.choice(fragments) for _ in range(rng.randint(0, 12)))
        method = rng.choice(["POST", "PUT", "PATCH", "DELETE", "GET"])
        status, reply, _ = apiserver.request(method, rng.choice(paths) + rng.choice(["", "?watch=x", "?limit=-1",
                                                                                        "?labelSelector=%21%21",
                                                                                        "?resourceVersion=abc"]),
                                             raw=body, headers={"Content-Type": rng.choice(content_types)})
        assert status < 500 or status == 504, (method, body, reply)
    apiserver.request("GET", "/healthz", expect=200)
