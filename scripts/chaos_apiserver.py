"""Chaos cases for the embedded API server (issue 23): kill -9 under writes, watch disconnects, fuzzing.

Each case starts its own ``koordinator apiserver`` (a child process on 127.0.0.1, in a temporary
directory), stops everything on every way out, and returns its figures with ``ok``. ``quick=True``
shrinks the sizes for the test suite (tests/test_chaos_apiserver.py): 3 writers for 1.5 s instead of 8
for 5 s, 30 cuts instead of 100, 1,000 requests instead of 10,000; the properties checked are the same.
``scripts/chaos.py`` runs them and prints the JSON.

- ``apiserver-kill9-under-writes``: writer threads create and update ConfigMaps and remember every
  write the server acknowledged (2xx, with its resourceVersion and a per-object sequence number in
  the data); the server is killed with SIGKILL while they write, restarted on the same data dir and
  port, and every acknowledged write must be there: same resourceVersion and content, or a newer
  resourceVersion whose sequence number is not older (a write in flight at the kill may have landed).
- ``watch-disconnects``: informers (koordinator.runtime) on ConfigMaps, Secrets and Nodes talk to the
  server through a TCP proxy; objects change all the time while the proxy cuts every connection 100
  times (each cut waits until every informer has its watch open again, so each one lands). Then each
  cache must equal a fresh LIST (names and resourceVersions).
- ``fuzz-requests``: 10,000 hostile requests (bad JSON, wrong types, bodies over the size limit, bad
  selectors and query parameters, bad JSON/merge/strategic/apply patches, unknown resources and verbs,
  raw malformed HTTP). No answer may be a 5xx, the server must stay up, and every object that existed
  before must read back byte for byte the same (the malformed writes aim at them too).
"""

from __future__ import annotations

import dataclasses
import http.client
import random
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import orjson

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from koordinator.runtime.client import Client  # noqa: E402
from koordinator.runtime.informer import SharedInformer  # noqa: E402
from koordinator.runtime.kubeconfig import load as load_configuration  # noqa: E402
from koordinator.runtime.reflector import Backoff  # noqa: E402
from tests.apiserver_process import ApiServerProcess  # noqa: E402
from tests.tcp_proxy import TcpProxy  # noqa: E402

CM_PATH = "/api/v1/namespaces/{ns}/configmaps"


def free_port() -> int:
    """A port nothing listens on now (the restarted server must come back on the same address)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Http:
    """One keep-alive HTTP/1.1 connection that reconnects after a failure; answers (status, body bytes)."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.port = port
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        if self._conn is None:
            self._conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            self._conn.request(method, path, body=body, headers=headers or {})
            resp = self._conn.getresponse()
            data = resp.read()
            if resp.getheader("connection", "").lower() == "close":
                self.close()
            return resp.status, data
        except BaseException:
            self.close()
            raise

    def json(self, method: str, path: str, obj: Any = None) -> tuple[int, Any]:
        status, data = self.request(method, path, None if obj is None else orjson.dumps(obj),
                                    {"Content-Type": "application/json"})
        return status, orjson.loads(data) if data else None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _seq(obj: dict) -> int:
    return int((obj.get("data") or {}).get("seq", "-1"))


# -- 1. kill -9 under write load ---------------------------------------------------------------------------------

def kill9_under_writes(*, quick: bool = False) -> dict:
    """SIGKILL the server while writers run; every acknowledged write must survive the restart."""
    writers, load_seconds = (3, 1.5) if quick else (8, 5.0)
    ns = "default"
    with tempfile.TemporaryDirectory(prefix="chaos-kill9-") as tmp:
        port = free_port()
        server = ApiServerProcess(Path(tmp))
        acked: dict[str, tuple[int, int, dict]] = {}  # name -> (rv, seq, data) of the last acknowledged write
        lock = threading.Lock()
        errors: list[str] = []
        killed = threading.Event()
        counts = Counter()

        def writer(index: int) -> None:
            # Each writer owns its names, so its acknowledgements for one name arrive in order.
            conn = Http(port, timeout=10)
            rng = random.Random(index)
            mine: list[str] = []
            seq = 0
            try:
                while not killed.is_set():
                    seq += 1
                    data = {"seq": str(seq), "writer": str(index), "blob": "x" * rng.randint(0, 512)}
                    if mine and rng.random() < 0.5:
                        name = rng.choice(mine)
                        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
                        method, path, ok_codes = "PUT", CM_PATH.format(ns=ns) + "/" + name, (200,)
                    else:
                        name = f"w{index}-{seq}"
                        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
                        method, path, ok_codes = "POST", CM_PATH.format(ns=ns), (201,)
                    try:
                        status, reply = conn.json(method, path, body)
                    except (OSError, http.client.HTTPException):
                        if killed.is_set():
                            return  # the write in flight at the kill: not acknowledged, may or may not land
                        raise
                    if status not in ok_codes:
                        errors.append(f"{method} {name}: {status} {reply}")
                        continue
                    rv = int(reply["metadata"]["resourceVersion"])
                    with lock:
                        acked[name] = (rv, seq, data)
                        counts[method] += 1
                    if method == "POST":
                        mine.append(name)
            except Exception as err:  # reported as evidence, not swallowed
                errors.append(f"writer {index}: {err!r}")
            finally:
                conn.close()

        threads = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(writers)]
        try:
            server.start(port=port)
            started = time.monotonic()
            for t in threads:
                t.start()
            time.sleep(load_seconds)  # the load window itself, not synchronisation
            with lock:
                acked_at_kill = len(acked)
                writes_at_kill = sum(counts.values())
            elapsed = time.monotonic() - started
            killed.set()
            server.kill9()
            for t in threads:
                t.join(15)
            restart_began = time.monotonic()
            server.start(port=port)
            restart_seconds = time.monotonic() - restart_began
            lost: list[str] = []
            conn = Http(port)
            status, listed = conn.json("GET", CM_PATH.format(ns=ns))
            conn.close()
            stored = {o["metadata"]["name"]: o for o in listed.get("items", [])} if status == 200 else {}
            for name, (rv, seq, data) in sorted(acked.items()):
                obj = stored.get(name)
                if obj is None:
                    lost.append(f"{name}: missing (acknowledged rv {rv})")
                    continue
                got_rv = int(obj["metadata"]["resourceVersion"])
                if got_rv < rv or (got_rv == rv and obj.get("data") != data) or _seq(obj) < seq:
                    lost.append(f"{name}: acknowledged rv {rv} seq {seq}, found rv {got_rv} seq {_seq(obj)}")
            return {
                "writers": writers,
                "acknowledged_writes": sum(counts.values()),
                "acknowledged_objects": len(acked),
                "creates": counts["POST"], "updates": counts["PUT"],
                "writes_per_second_before_kill": round(writes_at_kill / elapsed, 1) if elapsed else 0.0,
                "objects_at_kill": acked_at_kill,
                "restart_seconds": round(restart_seconds, 3),
                "list_status_after_restart": status,
                "lost": len(lost), "lost_examples": lost[:10],
                "writer_errors": errors[:10],
                "ok": status == 200 and not lost and not errors and sum(counts.values()) > 0,
            }
        finally:
            killed.set()
            server.stop()


# -- 2. forced watch disconnects -----------------------------------------------------------------------------------

class CuttingProxy(TcpProxy):
    """The test TCP proxy plus :meth:`cut`: close every connection it carries (the clients see a reset/EOF).

    It reads TcpProxy's own bookkeeping (``_lock``, ``_sockets``): the connections it tracks are
    exactly the ones to cut, and the serving threads end on their own once their sockets shut.
    """

    def connections(self) -> int:
        with self._lock:
            return len(self._sockets)

    def cut(self) -> int:
        """Close every proxied connection now; new connections are still accepted. Returns how many."""
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return len(sockets)


class CountingClient(Client):
    """A runtime Client that counts LISTs and WATCHes per resource (the relists/rewatches figure)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: Counter = Counter()
        self._calls_lock = threading.Lock()

    def list(self, kind, *args: Any, **kwargs: Any):  # noqa: A003 - the Client's verb
        with self._calls_lock:
            self.calls["list"] += 1
        return super().list(kind, *args, **kwargs)

    def watch(self, kind, *args: Any, **kwargs: Any):
        with self._calls_lock:
            self.calls["watch"] += 1
            self.calls["watch " + self.kinds.get(kind).plural] += 1
        return super().watch(kind, *args, **kwargs)


WATCHED = (("ConfigMap", "configmaps", True), ("Secret", "secrets", True), ("Node", "nodes", False))


def _object(kind: str, name: str, value: str) -> dict:
    meta = {"name": name, "labels": {"chaos": "watch", "v": value}}
    if kind == "ConfigMap":
        return {"apiVersion": "v1", "kind": kind, "metadata": meta, "data": {"v": value}}
    if kind == "Secret":
        return {"apiVersion": "v1", "kind": kind, "metadata": meta, "stringData": {"v": value}}
    return {"apiVersion": "v1", "kind": kind, "metadata": meta, "spec": {}}


def _collection(plural: str, namespaced: bool, ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/{plural}" if namespaced else f"/api/v1/{plural}"


def watch_disconnects(*, quick: bool = False, disconnects: int | None = None) -> dict:
    """Cut every informer connection ``disconnects`` times while objects change; caches must equal a LIST."""
    disconnects = disconnects if disconnects is not None else (30 if quick else 100)
    ns = "chaos-watch"
    with tempfile.TemporaryDirectory(prefix="chaos-watch-") as tmp:
        server = ApiServerProcess(Path(tmp))
        proxy: CuttingProxy | None = None
        informers: list[SharedInformer] = []
        stop = threading.Event()
        mutations = Counter()
        mutator_errors: list[str] = []
        try:
            server.start()
            server.request("POST", "/api/v1/namespaces", {"metadata": {"name": ns}}, expect=201)
            proxy = CuttingProxy(server.port).start()
            cfg = dataclasses.replace(load_configuration(str(server.kubeconfig)), host=proxy.url)
            client = CountingClient(cfg, qps=10000, burst=10000)
            for kind, _, namespaced in WATCHED:
                inf = SharedInformer(client, kind, namespace=ns if namespaced else None,
                                     label_selector="chaos=watch")
                # client-go's backoff (0.8 s doubling) would make 100 cuts take minutes; the property
                # (the cache converges) does not depend on the delay, so retry quickly here.
                inf.reflector.backoff = Backoff(initial=0.01, factor=2.0, cap=0.1, jitter=0.5)
                informers.append(inf)
                inf.start()
            for inf in informers:
                if not inf.wait_for_sync(20):
                    raise RuntimeError(f"informer {inf.kind.plural} did not sync")

            def mutate() -> None:
                conn = Http(server.port)  # straight to the server: writes never fail with the cuts
                rng = random.Random(7)
                live: dict[str, list[str]] = {plural: [] for _, plural, _ in WATCHED}
                i = 0
                while not stop.is_set():
                    i += 1
                    kind, plural, namespaced = rng.choice(WATCHED)
                    path = _collection(plural, namespaced, ns)
                    names = live[plural]
                    roll = rng.random()
                    try:
                        if names and roll < 0.2:
                            name = names.pop(rng.randrange(len(names)))
                            status, _ = conn.json("DELETE", f"{path}/{name}")
                            mutations["delete"] += status == 200
                        elif names and roll < 0.6:
                            name = rng.choice(names)
                            status, _ = conn.request("PATCH", f"{path}/{name}",
                                                     orjson.dumps({"metadata": {"labels": {"v": str(i)}}}),
                                                     {"Content-Type": "application/merge-patch+json"})
                            mutations["update"] += status == 200
                        else:
                            name = f"o{i}"
                            status, _ = conn.json("POST", path, _object(kind, name, str(i)))
                            if status == 201:
                                names.append(name)
                                mutations["create"] += 1
                        if status >= 300:
                            mutator_errors.append(f"{plural}/{name}: {status}")
                    except (OSError, http.client.HTTPException) as err:
                        mutator_errors.append(repr(err))
                    time.sleep(0.002)  # pacing: a steady stream, not a flood that starves the informers
                conn.close()

            mutator = threading.Thread(target=mutate, daemon=True)
            mutator.start()
            landed = 0
            began = time.monotonic()
            seen = {inf.kind.plural: 0 for inf in informers}

            def rewatched() -> bool:
                # Each reflector started a watch since the last cut and holds its stream (set only once
                # the response headers came back through the proxy): the next cut interrupts them all.
                return all(client.calls["watch " + inf.kind.plural] > seen[inf.kind.plural]
                           and inf.reflector._stream is not None for inf in informers)

            for _ in range(disconnects):
                deadline = time.monotonic() + 20
                while not rewatched() and time.monotonic() < deadline:
                    time.sleep(0.005)
                if not rewatched():
                    break  # a reflector never came back: the figures show it
                seen = {inf.kind.plural: client.calls["watch " + inf.kind.plural] for inf in informers}
                if proxy.cut() > 0:
                    landed += 1
            cut_seconds = time.monotonic() - began
            # Keep writing until the watches are back after the last cut, so its gap holds changes too.
            deadline = time.monotonic() + 20
            while not rewatched() and time.monotonic() < deadline:
                time.sleep(0.005)
            stop.set()
            mutator.join(10)

            def diff() -> list[str]:
                out = []
                for inf, (_, plural, namespaced) in zip(informers, WATCHED):
                    status, listed = Http(server.port).json(
                        "GET", _collection(plural, namespaced, ns) + "?labelSelector=chaos%3Dwatch")
                    truth = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in listed["items"]}
                    cached = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in inf.store.list()}
                    for name in sorted(set(truth) | set(cached)):
                        if truth.get(name) != cached.get(name):
                            out.append(f"{plural}/{name}: server {truth.get(name)} cache {cached.get(name)}")
                return out

            converge_began = time.monotonic()
            mismatches = diff()
            while mismatches and time.monotonic() - converge_began < 30:
                time.sleep(0.05)
                mismatches = diff()
            converge_seconds = time.monotonic() - converge_began
            calls = {k: v for k, v in client.calls.items() if " " not in k}
            objects = sum(len(inf.store) for inf in informers)
            return {
                "disconnects": landed, "disconnects_requested": disconnects,
                "cut_seconds": round(cut_seconds, 2),
                "lists": calls.get("list", 0), "watches": calls.get("watch", 0),
                "relists": calls.get("list", 0) - len(informers),
                "rewatches": calls.get("watch", 0) - len(informers),
                "mutations": dict(mutations), "mutation_errors": mutator_errors[:10],
                "cached_objects": objects,
                "mismatches": len(mismatches), "mismatch_examples": mismatches[:10],
                "seconds_to_converge": round(converge_seconds, 3),
                "ok": landed == disconnects and not mismatches and not mutator_errors and sum(mutations.values()) > 0,
            }
        finally:
            stop.set()
            for inf in informers:
                inf.stop()
            if proxy is not None:
                proxy.stop()
            server.stop()


# -- 3. fuzzed requests ---------------------------------------------------------------------------------------------

FUZZ_NS = "chaos-fuzz"
MAX_BODY = 3 * 1024 * 1024  # ServerConfig.max_body's default


def _seed_objects() -> list[tuple[str, dict]]:
    """The objects that exist before the fuzzing (collection path, object); none may change."""
    ns = FUZZ_NS
    out: list[tuple[str, dict]] = []
    for i in range(5):
        out.append((f"/api/v1/namespaces/{ns}/configmaps",
                    {"metadata": {"name": f"cm{i}", "labels": {"app": "fuzz", "i": str(i)}},
                     "data": {"k": f"v{i}", "list": "a,b"}}))
    out.append((f"/api/v1/namespaces/{ns}/secrets", {"metadata": {"name": "s0"}, "stringData": {"p": "w"}}))
    out.append((f"/api/v1/namespaces/{ns}/pods", {
        "metadata": {"name": "p0", "labels": {"app": "fuzz"}},
        "spec": {"containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": 80}],
                                 "resources": {"requests": {"cpu": "100m"}}}]}}))
    out.append((f"/api/v1/namespaces/{ns}/services", {
        "metadata": {"name": "svc0"}, "spec": {"selector": {"app": "fuzz"}, "ports": [{"port": 80}]}}))
    out.append(("/apis/apps/v1/namespaces/" + ns + "/deployments", {
        "metadata": {"name": "d0"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d0"}},
                 "template": {"metadata": {"labels": {"app": "d0"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}))
    out.append(("/api/v1/nodes", {"metadata": {"name": "fuzz-node", "labels": {"zone": "a"}},
                                  "status": {"capacity": {"cpu": "4"}}}))
    return out


JSON = "application/json"
MERGE = "application/merge-patch+json"
JSONPATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"

BAD_JSON = [b"{", b"{not json", b"[1,2", b'{"metadata":', b"\xff\xfe\x00", b'{"a":1}}', b"nul", b'"unterminated',
            b"{'single':'quotes'}", b'{"metadata":{"name":"x",}}', b"1e99999", b"\x00" * 16, b"{" * 2000]
NOT_OBJECTS = [b"[]", b"[1,2]", b"1", b"-0.5", b'"str"', b"true", b"null"]

BAD_TYPED = [  # for POST/PUT of objects: each is wrong in its shape, never valid
    {"metadata": "x"}, {"metadata": {"name": 5}}, {"metadata": {"name": ["a"]}}, {"metadata": None, "data": 1},
    {"metadata": {"name": "bad-labels", "labels": {"a": 1}}}, {"metadata": {"name": "bad-labels2", "labels": ["a"]}},
    {"metadata": {"name": "bad-ann", "annotations": {"a": {"b": 1}}}}, {"metadata": {"name": "Bad_Name!"}},
    {"metadata": {"name": "x" * 300}}, {"metadata": {"name": "bad-data"}, "data": {"k": 5}},
    {"metadata": {"name": "bad-data2"}, "data": [1, 2]}, {"metadata": {"name": "bad-data3"}
    , "data": {"k": None, "n": {}}},
    {"metadata": {"name": "bad-gen", "generation": "one"}}, {"metadata": {"name": "bad-rv", "resourceVersion": {}}},
    {"metadata": {"name": "bad-ts", "creationTimestamp": 12}}, {"metadata": {"name": "bad-owner"
    , "ownerReferences": "x"}},
    {"metadata": {"name": "bad-fin", "finalizers": [1, 2]}}, {"apiVersion": 3, "metadata": {"name": "bad-av"}},
    {"kind": ["ConfigMap"], "metadata": {"name": "bad-kind"}}, {"apiVersion": "v2", "kind": "ConfigMap"
    , "metadata": {"name": "v2"}},
    {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "wrong-kind"}},
    {"metadata": {"name": "bad-spec"}, "spec": "x"}, {"metadata": {"name": "bad-spec2"}, "spec": {"containers": {}}},
    {"metadata": {"name": "bad-spec3"}, "spec": {"containers": [{"name": 1, "image": []}]}},
    {"metadata": {"name": "bad-spec4"}, "spec": {"replicas": "two", "selector": 5}},
    {"metadata": {"name": "bad-spec5"}, "spec": {"containers": [{"name": "c", "image": "i",
                                                                   "resources": {"requests": {"cpu": "lots"}}}]}},
    {"metadata": {"name": "bad-spec6"}, "spec": {"ports": [{"port": "eighty"}], "selector": []}},
    {"metadata": {"name": "bad-status"}, "status": {"capacity": {"cpu": [1]}}},
    {"metadata": {"name": "deep"}, "data": {"k": "v"}, "x": [[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]},
]

#: PUT bodies for the seeded objects: the name is the target's, and each is wrong in a way every kind
#: rejects (ill-typed metadata, another kind or version, another name), so none may replace a seed.
BAD_REPLACEMENTS = [
    {"metadata": {"labels": {"a": 1}}}, {"metadata": {"labels": ["a"]}}, {"metadata": {"annotations": {"a": {"b": 1}}}},
    {"metadata": {"ownerReferences": "x"}}, {"metadata": {"ownerReferences": [1]}}
    , {"metadata": {"finalizers": [1, 2]}},
    {"metadata": {"generation": "one"}}, {"metadata": {"creationTimestamp": 12}}, {"metadata": {"namespace": 5}},
    {"metadata": {"resourceVersion": "1"}}, {"metadata": {"uid": "not-the-uid"}},
    {"apiVersion": 3}, {"kind": ["X"]}, {"apiVersion": "v2"}, {"kind": "Frob"}, {"metadata": {"name": "other"}},
    {"metadata": "x"}, {"metadata": 5},
]

BAD_PATCHES: list[tuple[str, bytes]] = [
    (JSONPATCH, b'{"op":"add"}'), (JSONPATCH, b'[{"op":"frobnicate","path":"/data/k","value":"x"}]'),
    (JSONPATCH, b'[{"op":"add","path":"data/k","value":"x"}]'), (JSONPATCH, b'[{"op":"remove","path":"/nope/deeper"}]'),
    (JSONPATCH, b'[{"op":"replace","path":"/data/missing","value":"x"}]'),
    (JSONPATCH, b'[{"op":"test","path":"/metadata/name","value":"not-the-name"},'
                b'{"op":"add","path":"/data/z","value":"z"}]'),
    (JSONPATCH, b'[{"op":"move","from":"/nope","path":"/data/y"}]'), (JSONPATCH, b'[{"op":"copy","path":"/data/y"}]'),
    (JSONPATCH, b'[{"op":"add","path":"/data/k","value":5}]')
    , (JSONPATCH, b'[{"op":"add","path":"/metadata/name","value":"renamed"}]'),
    (JSONPATCH, b'[{"op":"replace","path":"/metadata","value":"x"}]')
    , (JSONPATCH, b'[{"op":"add","path":"/spec/containers/99","value":{}}]'),
    (JSONPATCH, b'[{"op":"remove","path":"/data/k/~2"}]'), (JSONPATCH, b'[{"op":"add","path":"/nope/-","value":"x"}]'),
    (JSONPATCH, b'[1,2,3]'), (JSONPATCH, b'[{"op":null,"path":null}]')
    , (JSONPATCH, b'[{"path":"/data/k","value":"x"}]'),
    (MERGE, b'[1]'), (MERGE, b'"x"'), (MERGE, b'{"metadata":5}'), (MERGE, b'{"metadata":{"name":"renamed"}}'),
    (MERGE, b'{"data":{"k":5}}'), (MERGE, b'{"data":[1]}'), (MERGE, b'{"metadata":{"labels":{"a":{"b":1}}}}'),
    (MERGE, b'{"kind":"Pod"}'), (MERGE, b'{"apiVersion":"v9"}'), (MERGE, b'{"metadata":{"resourceVersion":"1"}}'),
    (MERGE, b'{"spec":{"containers":"x"}}'), (MERGE, b'{"spec":{"replicas":"many"}}'),
    (STRATEGIC, b'{"$patch":"frobnicate"}'), (STRATEGIC, b'{"data":{"$patch":"bogus"}}'),
    (STRATEGIC, b'{"spec":{"containers":[{"$patch":"delete"}]}}'),
    (STRATEGIC, b'{"spec":{"$setElementOrder/containers":"x"}}'), (STRATEGIC, b'{"spec":{"$retainKeys":5}}'),
    (STRATEGIC, b'{"spec":{"$deleteFromPrimitiveList/finalizers":{"a":1}}}'), (STRATEGIC, b'{"metadata":{"name":7}}'),
    (STRATEGIC, b'{"spec":{"containers":[{"image":"no-merge-key"}]}}'), (STRATEGIC, b'{"data":{"k":[1]}}'),
    (STRATEGIC, b'[{"op":"add"}]'), (STRATEGIC, b'{"spec":{"containers":{"name":"c"}}}'),
    (APPLY, b"{ not: [valid yaml"), (APPLY, b"kind: ConfigMap\nmetadata:\n  name: NAME\n"), (APPLY, b"- a\n- b\n"),
    (APPLY, b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: NAME\n")
    , (APPLY, b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n"),
    (APPLY, b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: NAME\ndata:\n  k: [1, 2]\n"),
    (APPLY, b"\t\t: :\n"), (APPLY, b"a: &x [*x]\n"), (APPLY, b"apiVersion: v1\nkind: ConfigMap\nmetadata: 5\n"),
    ("text/plain", b"{}"), ("application/xml", b"<a/>"), ("", b"{}"), ("application/json; charset=latin1", b"\xff"),
]

BAD_SELECTORS = ["!!", "a=b=c", "a in (", "a notin b", "=x", "a==", "(a)", "a,", ",", "a!=", "a in ()"
, "x" * 400 + "=1",
                 "a>b", "a in (b,,c)", "%ZZ", "a=b,!", "a=" + "v" * 100, "metadata.name", "spec.nodeName!",
                 "a=\x00", "!a=b", "a.b/c/d=e", "-a=b"]
BAD_FIELD_SELECTORS = ["metadata.name=", "unknown.field=x", "spec.nodeName", "metadata.name in (a)", "=", "a==b==c",
                       "metadata.labels=x", "status.phase!=", "metadata.namespace=a,", "x" * 300]
BAD_QUERY = ["limit=-1", "limit=abc", "limit=99999999999999999999", "resourceVersion=abc", "resourceVersion=-5",
             "resourceVersionMatch=Bogus", "resourceVersionMatch=Exact", "continue=garbage", "continue=%FF%FE",
             "timeoutSeconds=x", "timeoutSeconds=-1", "watch=maybe", "dryRun=Bogus", "fieldManager=" + "m" * 200,
             "fieldValidation=Bogus", "propagationPolicy=Sideways", "gracePeriodSeconds=soon", "pretty=2",
             "allowWatchBookmarks=x", "sendInitialEvents=x", "orphanDependents=x", "force=perhaps", "%%%", "a=%"]
UNKNOWN_PATHS = ["/api/v1/frobs", "/api/v1/namespaces/x/frobs/y", "/apis/nope.io/v1/things"
, "/apis/apps/v9/deployments",
                 "/apis/apps", "/apis/apps/v1/namespaces/x/deployments/y/frob", "/api/v2"
                 , "/api/v1/namespaces//configmaps",
                 "/api/v1/namespaces/%2F/configmaps", "/api/v1/namespaces/" + "n" * 300 + "/configmaps",
                 "/api/v1/namespaces/x/configmaps/" + "c" * 300, "/api/v1/namespaces/x/configmaps/a/b/c/d/e",
                 "/api/v1/namespaces/x/pods/p/frob", "/api/v1/namespaces/x/pods/p/eviction/x", "/%ZZ", "//"
                 , "/api/../etc/passwd",
                 "/openapi/v9", "/apis/apps/v1/deployments/x", "/api/v1/configmaps/x", "/api/v1/nodes/x/status/y",
                 "/api/v1/namespaces/x/configmaps/%00", "/healthz/frob", "/version/x", "/metrics/x"]
UNKNOWN_VERBS = ["FROB", "TRACE", "PROPFIND", "CONNECT", "OPTIONS", "LINK", "MKCOL"]


class Fuzzer:
    """Generates the hostile requests: every one is invalid by construction (none may succeed on a seed)."""

    def __init__(self, seed: int, seeds: list[tuple[str, dict]]) -> None:
        self.rng = random.Random(seed)
        # Targets: each seeded object's collection and item path, plus a name that does not exist.
        self.items = [(coll, f"{coll}/{obj['metadata']['name']}", obj["metadata"]["name"]) for coll, obj in seeds]

    def _target(self) -> tuple[str, str, str]:
        return self.rng.choice(self.items)

    def next(self) -> tuple[str, str, bytes | None, dict[str, str], str]:
        """(method, path, body, headers, category)."""
        rng = self.rng
        coll, item, name = self._target()
        category = rng.choice(["bad-json", "not-object", "wrong-types", "patch", "selector", "field-selector",
                               "query", "unknown-path", "unknown-verb", "body-on-read", "delete-bad"])
        headers = {"Content-Type": JSON}
        if category == "bad-json":
            body = rng.choice(BAD_JSON)
            if rng.random() < 0.3:
                body = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64)))
                if body.strip()[:1] in (b"{", b"[", b"\"") or body.strip()[:1].isdigit():
                    body = b"{" + body  # still malformed
            return rng.choice(["POST", "PUT", "PATCH"]), rng.choice([coll, item]), body, \
                {"Content-Type": rng.choice([JSON, MERGE, JSONPATCH, STRATEGIC])}, category
        if category == "not-object":
            method = rng.choice(["POST", "PUT"])
            return method, coll if method == "POST" else item, rng.choice(NOT_OBJECTS), headers, category
        if category == "wrong-types":
            if rng.random() < 0.5:  # a create: it may succeed (unknown fields are dropped), seeds stay
                return "POST", coll, orjson.dumps(rng.choice(BAD_TYPED)), headers, category
            obj = dict(rng.choice(BAD_REPLACEMENTS))
            meta = obj.get("metadata", {})
            if isinstance(meta, dict):
                obj["metadata"] = {"name": name, **meta}
            return "PUT", item, orjson.dumps(obj), headers, category
        if category == "patch":
            ctype, body = rng.choice(BAD_PATCHES)
            body = body.replace(b"NAME", name.encode())
            return "PATCH", item + rng.choice(["", "?fieldManager=fuzz", "?force=true", "/status"]), body, \
                ({"Content-Type": ctype} if ctype else {}), category
        if category == "selector":
            sel = rng.choice(BAD_SELECTORS)
            watch = "&watch=1&timeoutSeconds=1" if rng.random() < 0.03 else ""
            return "GET", f"{coll}?labelSelector={_quote(sel)}{watch}", None, {}, category
        if category == "field-selector":
            sel = rng.choice(BAD_FIELD_SELECTORS)
            watch = "&watch=1&timeoutSeconds=1" if rng.random() < 0.03 else ""
            return "GET", f"{coll}?fieldSelector={_quote(sel)}{watch}", None, {}, category
        if category == "query":
            query = rng.choice(BAD_QUERY)
            method = rng.choice(["GET", "GET", "DELETE", "PATCH", "PUT", "POST"])
            path = coll if method in ("GET", "POST") else item
            if method == "GET" and query.startswith(("timeoutSeconds", "watch", "allowWatch", "sendInitial")):
                query += "&watch=1&timeoutSeconds=1" if "timeoutSeconds" not in query else ""
            body = None if method in ("GET", "DELETE") else rng.choice(BAD_JSON)
            if method == "DELETE":
                # A DELETE that would succeed with a valid query must not reach a seed: aim at a missing name.
                path = f"{coll}/missing-{rng.randint(0, 99)}"
            return method, f"{path}?{query}", body, headers, category
        if category == "unknown-path":
            path = rng.choice(UNKNOWN_PATHS)
            method = rng.choice(["GET", "POST", "PUT", "PATCH", "DELETE"])
            return method, path, rng.choice([b"{}", b"{", None]), headers, category
        if category == "unknown-verb":
            return rng.choice(UNKNOWN_VERBS), rng.choice([coll, item]), rng.choice([None, b"{}"]), headers, category
        if category == "body-on-read":
            return "GET", rng.choice([coll, item]), rng.choice(BAD_JSON), headers, category
        # delete-bad: DELETE with a malformed DeleteOptions body or preconditions that cannot hold.
        body = rng.choice([b"{", b"[1]", b'{"preconditions":{"uid":"not-the-uid"}}',
                           b'{"preconditions":{"resourceVersion":"1"}}', b'{"gracePeriodSeconds":"soon"}',
                           b'{"propagationPolicy":"Sideways"}', b'{"kind":"Pod"}', b'{"dryRun":"x"}'])
        return "DELETE", item, body, headers, category


def _quote(text: str) -> str:
    from urllib.parse import quote
    return quote(text, safe="")


def _huge_requests(port: int, coll: str, count: int) -> Counter:
    """Bodies over the limit: declared (413 before reading), streamed (chunked), and really sent."""
    codes: Counter = Counter()
    for i in range(count):
        mode = i % 3
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            head = f"POST {coll} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            try:
                if mode == 0:
                    sock.sendall(f"{head}Content-Length: {MAX_BODY + 1}\r\n\r\n".encode())
                elif mode == 1:
                    sock.sendall(f"{head}Transfer-Encoding: chunked\r\n\r\n".encode())
                    chunk = b"x" * (1 << 20)
                    for _ in range(4):
                        sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    sock.sendall(b"0\r\n\r\n")
                else:
                    body = b'{"metadata":{"name":"huge"},"data":{"k":"' + b"x" * (MAX_BODY + 10) + b'"}}'
                    sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
            except OSError:
                pass  # the server may answer and close before taking the whole body
            codes[_status_of(_read_reply(sock))] += 1
    return codes


RAW_GARBAGE = [b"NONSENSE\r\n\r\n", b"GET / HTTP/1.1\r\nContent-Length: abc\r\n\r\n", b"GET\r\n\r\n",
               b"GET /api HTTP/9.9\r\n\r\n", b"GET /api HTTP/1.1\r\n" + b"X-Big: " + b"h" * 70000 + b"\r\n\r\n",
               b"GET /api HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
               b"POST /api/v1/namespaces/x/configmaps HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
               b"POST /api/v1/namespaces/x/configmaps HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
               b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", b"GET /api HTTP/1.1\r\nbad header line\r\n\r\n"]


def _read_reply(sock: socket.socket) -> bytes:
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    return data


def _status_of(reply: bytes) -> str:
    parts = reply.split(b" ", 2)
    if len(parts) >= 2 and parts[0].startswith(b"HTTP/") and parts[1].isdigit():
        return parts[1].decode()
    return "closed"


def _diff(old: Any, new: Any, path: str = "") -> list[str]:
    """Where two JSON values differ (``metadata.resourceVersion: '12' -> '15'``), for the evidence."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            out += _diff(old.get(key, "<absent>"), new.get(key, "<absent>"), f"{path}.{key}" if path else key)
        return out
    return [] if old == new else [f"{path}: {str(old)[:80]} -> {str(new)[:120]}"]


def fuzz_requests(*, quick: bool = False, requests: int | None = None) -> dict:
    """Send hostile requests; no 5xx, no crash, and every seeded object unchanged byte for byte."""
    total = requests if requests is not None else (1000 if quick else 10_000)
    with tempfile.TemporaryDirectory(prefix="chaos-fuzz-") as tmp:
        server = ApiServerProcess(Path(tmp))
        try:
            server.start()
            conn = Http(server.port)
            conn.json("POST", "/api/v1/namespaces", {"metadata": {"name": FUZZ_NS}})
            seeds = _seed_objects()
            for coll, obj in seeds:
                status, reply = conn.json("POST", coll, obj)
                if status != 201:
                    raise RuntimeError(f"seeding {coll}/{obj['metadata']['name']}: {status} {reply}")
            paths = [f"{coll}/{obj['metadata']['name']}" for coll, obj in seeds]
            before = {p: conn.request("GET", p)[1] for p in paths}

            fuzzer = Fuzzer(20231127, seeds)
            histogram: Counter = Counter()
            by_category: dict[str, Counter] = {}
            server_errors: list[str] = []
            slow: Counter = Counter()
            odd_writes: set[str] = set()  # write verbs a non-resource path answered 2xx (reported, not judged)
            accepted: dict[str, list[str]] = {}  # seed path -> the 2xx writes aimed at it (the evidence)
            raw_count = max(10, total // 100)
            huge_count = max(3, total // 1000)
            generated = total - raw_count - huge_count
            for _ in range(generated):
                method, path, body, headers, category = fuzzer.next()
                t0 = time.monotonic()
                try:
                    status, reply = conn.request(method, path, body, headers)
                    code = str(status)
                except (OSError, http.client.HTTPException) as err:
                    code, reply = "closed", repr(err).encode()
                histogram[code] += 1
                by_category.setdefault(category, Counter())[code] += 1
                slow[category] += time.monotonic() - t0
                if category == "unknown-path" and code.startswith("2") and method != "GET":
                    odd_writes.add(f"{method} {path[:80]} -> {code}")
                target = path.split("?", 1)[0].removesuffix("/status")
                if code.startswith("2") and method != "GET" and target in before:
                    accepted[target] = accepted.get(target, []) + [
                        f"{method} {path} [{headers.get('Content-Type')}] {(body or b'')[:160]!r} -> {code}"]
                if code.startswith("5") and len(server_errors) < 20:
                    server_errors.append(f"{method} {path} [{headers.get('Content-Type')}] {body[:200]!r}"
                                         f" -> {code} {reply[:300]!r}")
            conn.close()
            for i in range(raw_count):
                with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
                    try:
                        sock.sendall(RAW_GARBAGE[i % len(RAW_GARBAGE)])
                        # Half-close: a request cut short must be answered or dropped now, not at a timeout.
                        sock.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    code = _status_of(_read_reply(sock))
                histogram[code] += 1
                by_category.setdefault("raw-http", Counter())[code] += 1
            for code, n in _huge_requests(server.port, seeds[0][0], huge_count).items():
                histogram[code] += n
                by_category.setdefault("huge-body", Counter())[code] += n

            alive = server.proc is not None and server.proc.poll() is None
            conn = Http(server.port)
            healthy = alive and conn.request("GET", "/healthz")[0] == 200
            after = {p: conn.request("GET", p)[1] for p in paths}
            conn.close()
            changed = [p for p in paths if before[p] != after[p]]
            fives = sum(n for code, n in histogram.items() if code.startswith("5"))
            return {
                "requests": sum(histogram.values()),
                "status_histogram": dict(sorted(histogram.items())),
                "by_category": {k: dict(sorted(v.items())) for k, v in sorted(by_category.items())},
                "seconds_by_category": {k: round(v, 2) for k, v in sorted(slow.items())},
                "5xx": fives, "5xx_examples": server_errors,
                "crashes": 0 if alive else 1, "healthy_after": healthy,
                "objects_checked": len(paths), "objects_changed": len(changed),
                "changed": {p: {"diff": _diff(orjson.loads(before[p]), orjson.loads(after[p]))[:8],
                                "last_2xx_writes": accepted.get(p, [])[-5:]} for p in changed},
                "accepted_writes_on_seeds": sum(len(v) for v in accepted.values()),
                "writes_answered_2xx_by_non_resource_paths": sorted(odd_writes)[:10],
                "ok": fives == 0 and alive and healthy and not changed,
            }
        finally:
            server.stop()


CASES: dict[str, Callable[..., dict]] = {
    "apiserver-kill9-under-writes": kill9_under_writes,
    "watch-disconnects": watch_disconnects,
    "fuzz-requests": fuzz_requests,
}
