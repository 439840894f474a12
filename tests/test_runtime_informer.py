"""Informers against the embedded API server over HTTP: convergence, restarts, 410, selectors, order."""

from __future__ import annotations

import logging
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from koordinator.runtime import errors
from koordinator.runtime.client import Client
from koordinator.runtime.controller import Controller
from koordinator.runtime.informer import DeletedFinalStateUnknown, InformerFactory, SharedInformer
from tests.tcp_proxy import TcpProxy
from tests.waiting import wait_until


def pod(name: str, ns: str, labels: dict[str, str] | None = None, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
            "spec": spec}


class View:
    """What a handler saw: its own copy of the state, and every resourceVersion per object in order."""

    def __init__(self, informer: SharedInformer) -> None:
        self.lock = threading.Lock()
        self.objects: dict[str, str] = {}
        self.history: dict[str, list[int]] = {}
        self.deleted: list[Any] = []
        self.registration = informer.add_handler(self.on_add, self.on_update, self.on_delete)

    @staticmethod
    def key(obj: dict) -> str:
        return obj["metadata"]["name"]

    def _saw(self, obj: dict) -> None:
        rv = obj["metadata"]["resourceVersion"]
        self.objects[self.key(obj)] = rv
        self.history.setdefault(self.key(obj), []).append(int(rv))

    def on_add(self, obj: dict) -> None:
        with self.lock:
            self._saw(obj)

    def on_update(self, old: dict, new: dict) -> None:
        with self.lock:
            assert old["metadata"]["name"] == new["metadata"]["name"]
            self._saw(new)

    def on_delete(self, obj: Any) -> None:
        with self.lock:
            self.deleted.append(obj)
            state = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
            self.objects.pop(self.key(state), None)

    def snapshot(self) -> dict[str, str]:
        with self.lock:
            return dict(self.objects)


def server_state(client: Client, ns: str, **kw: Any) -> dict[str, str]:
    listed = client.list("Pod", ns, **kw)
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in listed["items"]}


def cache_state(informer: SharedInformer) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.store.list()}


def converged(client: Client, informer: SharedInformer, view: View, ns: str, **kw: Any) -> bool:
    want = server_state(client, ns, **kw)
    return cache_state(informer) == want and view.snapshot() == want


def mixed_writes(client: Client, ns: str, count: int, seed: int = 7) -> None:
    """``count`` creates, label patches and deletes over 60 names, from 4 threads."""
    rng = random.Random(seed)
    ops = [(rng.choice("cupd"), f"p{rng.randrange(60)}", rng.randrange(1000)) for _ in range(count)]

    def one(op: tuple[str, str, int]) -> None:
        kind, name, n = op
        try:
            if kind == "c":
                client.create(pod(name, ns, {"n": str(n)}))
            elif kind in "up":
                client.patch("Pod", name, {"metadata": {"labels": {"n": str(n)}}}, namespace=ns)
            else:
                client.delete("Pod", name, ns)
        except (errors.NotFound, errors.AlreadyExists, errors.Conflict):
            pass

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, ops))


def test_converges_after_mixed_writes_and_updates_arrive_in_order(client, namespace):
    for i in range(20):
        client.create(pod(f"p{i}", namespace))
    factory = InformerFactory(client)
    informer = factory.informer("Pod", namespace=namespace)
    assert factory.informer("pods", namespace=namespace) is informer  # one informer per view
    view = View(informer)
    factory.start()
    try:
        assert informer.wait_for_sync(10)
        wait_until(view.registration.has_synced)
        mixed_writes(client, namespace, 1000)
        wait_until(lambda: converged(client, informer, view, namespace), message="informer did not converge")
        for name, rvs in view.history.items():
            assert rvs == sorted(rvs), f"{name}: out-of-order updates {rvs}"
        # List items carry no apiVersion/kind; the cache fills them in, and drops managedFields.
        obj = informer.store.list()[0]
        assert obj["kind"] == "Pod" and obj["apiVersion"] == "v1"
        assert "managedFields" not in obj["metadata"]
    finally:
        factory.stop()


def test_late_handler_gets_the_cache_then_live_events(client, namespace):
    for i in range(5):
        client.create(pod(f"p{i}", namespace))
    factory = InformerFactory(client)
    informer = factory.informer("Pod", namespace=namespace)
    factory.start()
    try:
        assert factory.wait_for_sync(10)
        view = View(informer)
        wait_until(view.registration.has_synced)
        assert set(view.snapshot()) == {f"p{i}" for i in range(5)}
        client.create(pod("late", namespace))
        wait_until(lambda: "late" in view.snapshot())
    finally:
        factory.stop()


def test_indexes_by_namespace_and_node(client, namespace):
    client.create(pod("a", namespace, node="n1"))
    client.create(pod("b", namespace, node="n2"))
    client.create(pod("c", namespace))
    factory = InformerFactory(client)
    informer = factory.informer("Pod", namespace=namespace)
    informer.add_indexer("app", lambda o: [(o["metadata"].get("labels") or {}).get("app", "")])
    factory.start()
    try:
        assert informer.wait_for_sync(10)
        assert [o["metadata"]["name"] for o in informer.store.by_index("spec.nodeName", "n1")] == ["a"]
        assert len(informer.store.by_index("namespace", namespace)) == 3
        client.patch("Pod", "c", {"metadata": {"labels": {"app": "web"}}}, namespace=namespace)
        wait_until(lambda: [o["metadata"]["name"] for o in informer.store.by_index("app", "web")] == ["c"])
        with pytest.raises(KeyError, match="no index named 'nope'"):
            informer.store.by_index("nope", "x")
    finally:
        factory.stop()


def test_label_selector_change_delivers_delete_and_add(client, namespace):
    client.create(pod("web", namespace, {"tier": "web"}))
    factory = InformerFactory(client)
    informer = factory.informer("Pod", namespace=namespace, label_selector="tier=web")
    view = View(informer)
    factory.start()
    try:
        assert informer.wait_for_sync(10)
        wait_until(lambda: "web" in view.snapshot())
        client.patch("Pod", "web", {"metadata": {"labels": {"tier": "batch"}}}, namespace=namespace)
        wait_until(lambda: "web" not in view.snapshot(), message="no DELETED for a pod that stopped matching")
        assert informer.store.get(f"{namespace}/web") is None
        client.patch("Pod", "web", {"metadata": {"labels": {"tier": "web"}}}, namespace=namespace)
        wait_until(lambda: "web" in view.snapshot(), message="no ADDED for a pod that matches again")
    finally:
        factory.stop()


def own_server(fresh_apiserver, ns: str, pods: int, *flags: str) -> tuple[Any, Client, SharedInformer, View]:
    """A server of the test's own with ``pods`` pods in ``ns``, and a started, synced informer on them."""
    server = fresh_apiserver.start(*flags)
    c = Client.from_kubeconfig(str(server.kubeconfig), qps=0)
    server.request("POST", "/api/v1/namespaces", {"metadata": {"name": ns}}, expect=201)
    for i in range(pods):
        c.create(pod(f"p{i}", ns))
    informer = SharedInformer(c, "Pod", namespace=ns)
    view = View(informer)
    informer.start()
    assert informer.wait_for_sync(10)
    wait_until(view.registration.has_synced)
    return server, c, informer, view


def test_survives_server_restart(fresh_apiserver):
    server, c, informer, view = own_server(fresh_apiserver, "restart", 10)
    try:
        mixed_writes(c, "restart", 100, seed=1)
        port = server.port
        server.stop()
        server.start(port=port)
        mixed_writes(c, "restart", 100, seed=2)
        wait_until(lambda: converged(c, informer, view, "restart"), timeout=30,
                   message="no convergence after restart")
    finally:
        informer.stop()
        c.close()


def test_relists_after_410_and_reports_missed_deletes_as_tombstones(fresh_apiserver):
    # A history of 5 events: a watcher that falls further behind than that must relist.
    ns = "gone"
    _, c, informer, view = own_server(fresh_apiserver, ns, 5, "--watch-history", "5")
    try:
        # Hold the informer's delivery (as a stalled consumer would) while the server moves on past
        # its history, then cut the stream: the reflector resumes from a resourceVersion it no
        # longer has and gets 410.
        with informer._lock:
            c.delete("Pod", "p0", ns)
            for i in range(5, 20):
                c.create(pod(f"p{i}", ns))
            c.delete("Pod", "p1", ns)
            informer.reflector.interrupt()
        wait_until(lambda: converged(c, informer, view, ns), message="no convergence after 410")
        tombstones = [d for d in view.deleted if isinstance(d, DeletedFinalStateUnknown)]
        assert {t.key for t in tombstones} <= {f"{ns}/p0", f"{ns}/p1"}
        assert f"{ns}/p1" in {t.key for t in tombstones}, "a delete missed while behind must reach handlers"
    finally:
        informer.stop()
        c.close()


def test_controller_watch_reconciles_each_key(client, namespace):
    factory = InformerFactory(client)
    informer = factory.informer("Pod", namespace=namespace)
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def reconcile(key: str) -> None:
        with lock:
            seen[key] = seen.get(key, 0) + 1

    controller = Controller("pods", reconcile, workers=2)
    controller.watch(informer)
    factory.start()
    controller.start()
    try:
        for i in range(10):
            client.create(pod(f"p{i}", namespace))
        client.delete("Pod", "p3", namespace)
        wait_until(lambda: set(seen) == {f"{namespace}/p{i}" for i in range(10)})
    finally:
        controller.stop(5)
        factory.stop()


def test_stop_ends_every_thread(client, namespace):
    before = set(threading.enumerate())
    factory = InformerFactory(client)
    informer = factory.informer("Pod", namespace=namespace)
    View(informer)
    factory.start()
    assert factory.wait_for_sync(10)
    factory.stop(5)
    wait_until(lambda: not [t for t in threading.enumerate() if t not in before and t.is_alive()],
               message="informer threads still alive after stop")


def test_resync_replays_the_cache_to_handlers_that_ask(client, namespace):
    client.create(pod("r", namespace))
    informer = SharedInformer(client, "Pod", namespace=namespace)
    replays: list[tuple[str, str]] = []
    informer.add_handler(on_update=lambda old, new: replays.append((old["metadata"]["resourceVersion"],
                                                                    new["metadata"]["resourceVersion"])),
                         resync=1.0)
    quiet = View(informer)  # no resync: sees no updates at all
    informer.start()
    try:
        wait_until(lambda: len(replays) >= 2, timeout=10, message="no periodic resync")
        assert all(old == new for old, new in replays)  # a resync is an update with old == new
        assert quiet.history == {"r": [quiet.history["r"][0]]}
        with pytest.raises(ValueError, match="at least 1 second"):
            informer.add_handler(on_add=print, resync=0.5)
    finally:
        informer.stop()


# -- watch deadlines: quiet watches are healthy, silent dead connections are not ----------------

class WatchSpy:
    """The runtime client, recording ``(timeout_seconds, read_timeout)`` of every watch it opens."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._watches: list[tuple[int, float]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self._watches.append((kwargs["timeout_seconds"], kwargs["read_timeout"]))
        return self._client.watch(*args, **kwargs)

    def watches(self) -> list[tuple[int, float]]:
        with self._lock:
            return list(self._watches)


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


def reflector_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name.startswith("koordinator.runtime") and r.levelno >= logging.WARNING]


def test_watch_read_timeout_outlasts_the_watchs_own_server_timeout(client, namespace):
    """The default watch (server timeout 5-10 min) waits past its server-side deadline before it
    calls the connection dead: a read timeout shorter than that cut every quiet watch with a warning."""
    spy = WatchSpy(client)
    informer = SharedInformer(spy, "ConfigMap", namespace=namespace)
    informer.start()
    try:
        wait_until(spy.watches, message="the first watch")
        ((server_timeout, read_timeout),) = spy.watches()[:1]
        assert 300 <= server_timeout <= 600
        assert read_timeout > server_timeout
    finally:
        informer.stop()


def test_quiet_watch_ends_at_its_server_timeout_and_rewatches_without_warning(client, namespace, caplog):
    caplog.set_level(logging.DEBUG, logger="koordinator.runtime")
    spy = WatchSpy(client)
    # Server-side timeouts of 2-3 s: nothing happens in the namespace, so each watch is silent until
    # the server closes it.
    informer = SharedInformer(spy, "ConfigMap", namespace=namespace, min_watch_timeout=2)
    informer.start()
    try:
        assert informer.wait_for_sync(10)
        wait_until(lambda: len(spy.watches()) >= 3, message="two quiet watches ended by the server")
        assert all(read > server for server, read in spy.watches())
        assert reflector_warnings(caplog) == []
        # The re-watches are live: a change made now arrives.
        client.create(configmap("after-quiet"), namespace=namespace)
        wait_until(lambda: informer.store.get(f"{namespace}/after-quiet"), message="the change after quiet watches")
        assert reflector_warnings(caplog) == []
    finally:
        informer.stop()


def test_silent_dead_connection_is_given_up_and_rewatched(apiserver, client, namespace, tmp_path, caplog):
    """A partition (no bytes, no close) past the watch's deadline + margin counts as a dead connection:
    warned once, re-watched from the last resourceVersion once the network is back."""
    caplog.set_level(logging.DEBUG, logger="koordinator.runtime")
    proxy = TcpProxy(apiserver.port).start()
    kubeconfig = tmp_path / "kubeconfig-proxied"
    kubeconfig.write_text(apiserver.kubeconfig.read_text().replace(apiserver.url, proxy.url))
    proxied = Client.from_kubeconfig(str(kubeconfig), qps=0)
    informer = SharedInformer(proxied, "ConfigMap", namespace=namespace, min_watch_timeout=1,
                              read_timeout_margin=1.0)
    informer.start()
    try:
        assert informer.wait_for_sync(10)
        proxy.block()
        client.create(configmap("during-partition"), namespace=namespace)
        wait_until(lambda: [m for m in reflector_warnings(caplog) if "watch configmaps" in m and "failed" in m],
                   message="the dead watch connection to be given up")
        assert informer.store.get(f"{namespace}/during-partition") is None
        proxy.unblock()
        wait_until(lambda: informer.store.get(f"{namespace}/during-partition"), timeout=40,
                   message="the change made during the partition, after it")
    finally:
        informer.stop()
        proxied.close()
        proxy.stop()
