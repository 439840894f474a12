"""Fixtures: the embedded API server as a real subprocess, and clients talking to it over HTTP."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Iterator

import pytest
from kubernetes import client, config

from koordinator.runtime.client import Client
from tests.apiserver_process import ApiServerProcess

CRD_DIR = Path(__file__).resolve().parents[1] / "manifests" / "crds"

#: The files that take longest (end-to-end runs on `koordinator local`, minute-long measurements), slowest first.
#: They are collected first, so that with pytest-xdist's whole-file distribution no worker begins one of them
#: while the others are running out of work.
LONG_FILES = ("test_local_descheduling.py", "test_koordlet_realhost.py", "test_chaos_roles.py", "test_local.py",
              "test_local_placement.py", "test_local_quota_gang.py", "test_console.py",
              "test_koordlet_enforcement_e2e.py", "test_chaos_apiserver.py", "test_controllers_apps.py")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long files first (see :data:`LONG_FILES`); the order within a file and among the others is kept."""
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))


@pytest.fixture(scope="session")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServerProcess]:
    """One server for the session; tests isolate themselves with their own namespaces."""
    server = ApiServerProcess(tmp_path_factory.mktemp("apiserver"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fresh_apiserver(tmp_path) -> Iterator[ApiServerProcess]:
    """A server of the test's own (for restarts, flags and anything that changes global state)."""
    server = ApiServerProcess(tmp_path / "server")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def tls_apiserver(tmp_path) -> Iterator[ApiServerProcess]:
    """A server of the test's own serving HTTPS with a self-signed certificate and a bearer token."""
    server = ApiServerProcess(tmp_path / "tls", "--tls").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def crd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServerProcess]:
    """A server of the module's own with Koordinator's CRDs, for roles that act cluster-wide
    (every Node, webhook configurations): other tests never see what they do."""
    server = ApiServerProcess(tmp_path_factory.mktemp("crd-apiserver"))
    server.start("--crd-dir", str(CRD_DIR))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fresh_crd_server(tmp_path) -> Iterator[ApiServerProcess]:
    """A server of the test's own with Koordinator's CRDs, for roles that act on every Node (the scheduler)."""
    server = ApiServerProcess(tmp_path / "crd-server")
    server.start("--crd-dir", str(CRD_DIR))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def scheduler_api(fresh_crd_server: ApiServerProcess) -> Iterator[Client]:
    """A client of :func:`fresh_crd_server` with the scheduler tests' namespace created."""
    from tests.scheduler_harness import NS

    c = Client.from_kubeconfig(str(fresh_crd_server.kubeconfig), qps=0)
    c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def crd_client(crd_server: ApiServerProcess) -> Iterator[Client]:
    """The runtime's client for :func:`crd_server`, unthrottled, with namespace koordinator-system."""
    c = Client.from_kubeconfig(str(crd_server.kubeconfig), qps=0)
    try:
        c.create({"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": "koordinator-system", "labels": {"control-plane": "koordinator"}}})
        yield c
    finally:
        c.close()


@pytest.fixture
def api_client(apiserver: ApiServerProcess) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    try:
        yield api
    finally:
        api.close()


@pytest.fixture(name="client")
def runtime_client(apiserver: ApiServerProcess) -> Iterator[Client]:
    """The runtime's client for the session server, unthrottled (tests make bursts of requests)."""
    c = Client.from_kubeconfig(str(apiserver.kubeconfig), qps=0)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def namespace(apiserver: ApiServerProcess) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    apiserver.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": name}}, expect=201)
    return name
