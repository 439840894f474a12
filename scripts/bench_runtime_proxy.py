#!/usr/bin/env python3
"""Benchmark the latency koord-runtime-proxy adds per CRI call; prints one JSON document.

Everything runs on this machine and is started and stopped here: a private containerd
(:mod:`tests.containerd_harness`, CRI v1, runc), the proxy as its own process
(``python -m koordinator --role=runtime-proxy``, as it is deployed) in front of it, and the
koordlet's hook server (:class:`~koordinator_roles.koordlet.runtimehooks.hookserver.HookServer`
with the koordlet's own plugins, a real :class:`Reconciler` and :class:`ResourceExecutor` over a
temp cgroup tree) registered in the proxy's ``--hook-server-config-dir``.

One BE pod (label ``koordinator.sh/qosClass: BE``, batch-cpu/batch-memory in
``node.koordinator.sh/extended-resource-spec``) with ``--containers`` running containers is made
through the proxy, as the kubelet would. Then, from one Python gRPC client, each call is made N
times directly on containerd's socket and N times through the proxy, alternating in the same loop
(which goes first alternates too), so both see the same machine state:

- ``pass_through``: ``Version``, ``ListContainers``, ``ContainerStatus``, ``ImageStatus`` (raw
  bytes forwarded, no hook), ``--calls`` each;
- ``hooked``: ``UpdateContainerResources`` on a running container (``--hooked-calls``; through the
  proxy it asks the hook server's PreUpdateContainerResources, whose BatchResource answer the
  proxy merges in; the direct request already carries the values the hook answers, so containerd
  does the same work both ways), and ``CreateContainer`` + ``RemoveContainer`` of a container of the
  pod (``--create-calls``; PreCreateContainer through the proxy).

Per call: direct and proxied p50/p99 in ms and the added latency, proxied minus direct, per
percentile. ``hook_answers`` counts the hook server's answers that carried resources: a hooked
figure only counts when the hooks really answered.

Targets (issue): the proxy adds ≤ 0.3 ms at p99 to pass-through calls and ≤ 2 ms to hooked calls.
``ok`` is true when every target is met, no call failed and every proxied hooked call got its
hook's answer.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: Targets (issue): added p99 latency per call, ms.
TARGET_PASS_THROUGH_ADDED_P99_MS = 0.3
TARGET_HOOKED_ADDED_P99_MS = 2.0
GiB = 1 << 30
BE_LABELS = {"koordinator.sh/qosClass": "BE"}
EXT_SPEC = "node.koordinator.sh/extended-resource-spec"
#: batch-cpu request 500 (milli), limit 1000, batch-memory 1Gi per container: what BatchResource answers
#: for a container is shares 512 (500 × 1024 / 1000), quota 100000 (1000 × 100000 / 1000), memory 1Gi.
BATCH = {"requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "1Gi"},
         "limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "1Gi"}}
BATCH_SHARES, BATCH_QUOTA, BATCH_MEMORY = 512, 100_000, GiB
CREATED_NAME = "bench-create"      # the container CreateContainer/RemoveContainer make and remove
START_TIMEOUT = 60.0


# -- figures --------------------------------------------------------------------------------------

def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of ``values`` (sorted or not), q in (0, 1]."""
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def summary(direct_ns: list[int], proxied_ns: list[int]) -> dict[str, Any]:
    """p50/p99 of both, and the proxy's added latency per percentile, in ms."""
    if not direct_ns or not proxied_ns:
        return {"calls": min(len(direct_ns), len(proxied_ns))}
    out: dict[str, Any] = {"calls": min(len(direct_ns), len(proxied_ns))}
    for q, name in ((0.5, "p50"), (0.99, "p99")):
        d, p = percentile(direct_ns, q) / 1e6, percentile(proxied_ns, q) / 1e6
        out[f"direct_{name}_ms"] = round(d, 3)
        out[f"proxied_{name}_ms"] = round(p, 3)
        out[f"added_{name}_ms"] = round(p - d, 3)
    return out


def alternate(n: int, direct: Callable[[int], Any], proxied: Callable[[int], Any],
              errors: list[str]) -> tuple[list[int], list[int]]:
    """``direct(i)`` and ``proxied(i)`` timed n times each, alternating which goes first; failures in ``errors``."""
    import grpc

    d_ns: list[int] = []
    p_ns: list[int] = []
    clock = time.perf_counter_ns
    for i in range(n):
        for which in ((direct, d_ns), (proxied, p_ns)) if i % 2 == 0 else ((proxied, p_ns), (direct, d_ns)):
            call, into = which
            started = clock()
            try:
                call(i)
            except grpc.RpcError as err:
                if len(errors) < 10:
                    errors.append(f"{'direct' if call is direct else 'proxied'}: {err.code().name}: {err.details()}")
                continue
            into.append(clock() - started)
    return d_ns, p_ns


# -- the hook server --------------------------------------------------------------------------------

def hook_server(workdir: Path, pod: dict, config_dir: str) -> Any:
    """The koordlet's hook server (not started) over a temp cgroup tree, with every plugin whose gate is on
    by default; its ``answered`` counts answers carrying resources, by stage."""
    from collections import Counter

    from koordinator.sim.tree import NodeTree, Topology
    from koordinator_roles.koordlet import features, runtimehooks
    from koordinator_roles.koordlet.metriccache import MetricCache, kinds
    from koordinator_roles.koordlet.resourceexecutor import ResourceExecutor
    from koordinator_roles.koordlet.runtimehooks.hookserver import HookServer
    from koordinator_roles.koordlet.statesinformer.states import pod_meta
    from koordinator_roles.koordlet.system.cgroup import CgroupLayout

    cpus = os.cpu_count() or 1
    topology = Topology.for_cpus(cpus)
    tree = NodeTree(workdir, "bench", topology, 64 * GiB, cgroup_version=1, driver="cgroupfs")
    tree.create(boot_time=time.time())
    layout = CgroupLayout(1, "cgroupfs", str(tree.cgroup_root))
    executor = ResourceExecutor(layout)
    cache = MetricCache(None)
    processors = []
    for cpu in range(topology.cpus):
        core, socket, _ = topology.place(cpu)
        processors.append({"id": cpu, "core": core, "socket": socket, "node": socket})
    cache.set_kv(kinds.KV_NODE_CPU_INFO, {"cpus": processors})
    node = {"metadata": {"name": "bench", "labels": {}, "annotations": {}},
            "status": {"capacity": {"cpu": str(cpus), "memory": "64Gi"},
                       "allocatable": {"cpu": str(cpus), "memory": "64Gi", "kubernetes.io/batch-cpu": "8000",
                                       "kubernetes.io/batch-memory": str(32 * GiB)}}}
    # The koordlet enforcement bench's states (its NodeSLO keeps the default cpuset suppress policy, so
    # BatchResource answers a CFS quota).
    from bench_koordlet_enforce import States

    states = States(node, [pod_meta(pod, layout)])
    gates = dict(features.GATES)      # the koordlet's defaults
    reconciler = runtimehooks.build(states, executor, gates, cache=cache, proc_root=str(tree.proc_root))

    class CountingHookServer(HookServer):
        answered: Counter = Counter()

        def _container(self, stage: str, request: Any, context: Any) -> Any:
            response = super()._container(stage, request, context)
            if response.HasField("container_resources"):
                self.answered[stage] += 1
            return response

    addr = str(workdir / "koordlet.sock")
    server = CountingHookServer(reconciler, addr=addr, config_dir=config_dir, host_endpoint=addr)
    server.answered = Counter()
    server.plugins = [p.name for p in reconciler.plugins]
    return server


# -- the proxy --------------------------------------------------------------------------------------

class Proxy:
    """``koordinator --role=runtime-proxy`` as a process of its own; ``stop()`` ends it (SIGTERM)."""

    def __init__(self, workdir: Path, backend: str, hooks_dir: str) -> None:
        self.endpoint = str(workdir / "proxy.sock")
        self.log_path = workdir / "proxy.log"
        self._log = open(self.log_path, "ab")
        args = [sys.executable, "-m", "koordinator", "--role=runtime-proxy",
                f"--koord-runtimeproxy-endpoint={self.endpoint}", f"--remote-runtime-service-endpoint={backend}",
                f"--hook-server-config-dir={hooks_dir}", "--metrics-addr=0", "--health-addr=0"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log, env=env,
                                     cwd=str(ROOT))

    def wait_ready(self, channel: Any) -> None:
        import grpc

        from koordinator.grpcapi.runtime.v1 import api_pb2 as cri
        from koordinator.grpcapi.runtime.v1 import api_pb2_grpc as crigrpc

        ready = grpc.channel_ready_future(channel)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the proxy exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                ready.result(timeout=1.0)
                break
            except grpc.FutureTimeoutError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the proxy did not serve {self.endpoint}:\n{self.log_tail()}") from None
        crigrpc.RuntimeServiceStub(channel).Version(cri.VersionRequest(), timeout=START_TIMEOUT, wait_for_ready=True)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


# -- the benchmark ------------------------------------------------------------------------------------

def bench(calls: int, hooked_calls: int, create_calls: int, containers: int, warmup: int) -> dict[str, Any]:
    """The whole run (see the module docstring); the JSON document as a dict."""
    import grpc

    from koordinator.grpcapi.runtime.v1 import api_pb2 as cri
    from koordinator.grpcapi.runtime.v1 import api_pb2_grpc as crigrpc
    from tests.containerd_harness import TEST_IMAGE, Containerd, container_config, containerd_problem

    problem = containerd_problem()
    if problem:
        return {"ok": False, "error": f"cannot run containerd here: {problem}"}
    logging.basicConfig(level=logging.WARNING)
    out: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "grpcio": grpc.__version__},
        "proxy": "own process: python -m koordinator --role=runtime-proxy",
        "client": "one Python grpc client (sync stubs), direct and proxied calls alternating",
        "calls": calls, "hooked_calls": hooked_calls, "create_calls": create_calls, "containers": containers,
        "warmup": warmup}
    errors: list[str] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-rproxy-", dir="/tmp") as tmp, Containerd() as cd:
        workdir = Path(tmp)
        hooks_dir = str(workdir / "hooks")
        uid = str(uuid.uuid4())
        names = [f"c{i}" for i in range(containers)] + [CREATED_NAME]
        annotations = {EXT_SPEC: json.dumps({"containers": dict.fromkeys(names, BATCH)})}
        pod = {"metadata": {"uid": uid, "namespace": "bench", "name": "bench-be", "labels": dict(BE_LABELS),
                            "annotations": annotations},
               "spec": {"nodeName": "bench", "priority": 5000, "containers": [{"name": n, "resources": {}}
                                                                              for n in names]},
               "status": {"qosClass": "BestEffort", "phase": "Running", "containerStatuses": []}}
        hooks = hook_server(workdir, pod, hooks_dir)
        hooks.start()
        proxy = None
        channels: list[Any] = []
        try:
            proxy = Proxy(workdir, cd.address, hooks_dir)
            direct_ch = grpc.insecure_channel(f"unix://{cd.address}")
            proxied_ch = grpc.insecure_channel(f"unix://{proxy.endpoint}")
            channels = [direct_ch, proxied_ch]
            proxy.wait_ready(proxied_ch)
            out["backend"] = _version(crigrpc.RuntimeServiceStub(direct_ch))
            out["hook_server"] = {"plugins": hooks.plugins,
                                  "registration": json.loads(Path(hooks_dir, "koordlet.json").read_text())}
            rt = {"direct": crigrpc.RuntimeServiceStub(direct_ch), "proxied": crigrpc.RuntimeServiceStub(proxied_ch)}
            img = {"direct": crigrpc.ImageServiceStub(direct_ch), "proxied": crigrpc.ImageServiceStub(proxied_ch)}
            via = rt["proxied"]      # the pod is made through the proxy, as the kubelet would

            parent = cd.cgroup_parent("besteffort", uid)
            sandbox = cd.sandbox_config("bench-be", "bench", uid, cgroup_parent=parent, labels=dict(BE_LABELS),
                                        annotations=annotations)
            sandbox_id = via.RunPodSandbox(cri.RunPodSandboxRequest(config=sandbox), timeout=120).pod_sandbox_id
            ids = []
            for name in names[:-1]:
                cid = via.CreateContainer(cri.CreateContainerRequest(
                    pod_sandbox_id=sandbox_id, config=container_config(name), sandbox_config=sandbox),
                    timeout=120).container_id
                via.StartContainer(cri.StartContainerRequest(container_id=cid), timeout=60)
                ids.append(cid)
            out["setup_s"] = round(time.monotonic() - started, 1)
            hooks.answered.clear()
            gc.collect()

            # pass-through: raw bytes, no hook
            timeout = 30
            cases: dict[str, tuple[Callable[[str], Callable[[int], Any]], int]] = {
                "Version": (lambda k: lambda i: rt[k].Version(cri.VersionRequest(), timeout=timeout), calls),
                "ListContainers": (lambda k: lambda i: rt[k].ListContainers(cri.ListContainersRequest(),
                                                                            timeout=timeout), calls),
                "ContainerStatus": (lambda k: lambda i: rt[k].ContainerStatus(
                    cri.ContainerStatusRequest(container_id=ids[i % len(ids)]), timeout=timeout), calls),
                "ImageStatus": (lambda k: lambda i: img[k].ImageStatus(
                    cri.ImageStatusRequest(image=cri.ImageSpec(image=TEST_IMAGE)), timeout=timeout), calls),
            }
            out["pass_through"] = {}
            for name, (make, n) in cases.items():
                alternate(warmup, make("direct"), make("proxied"), errors)
                out["pass_through"][name] = summary(*alternate(n, make("direct"), make("proxied"), errors))

            # hooked: UpdateContainerResources on a running container
            def update(k: str) -> Callable[[int], Any]:
                def call(i: int) -> Any:
                    resources = cri.LinuxContainerResources(cpu_period=100_000, cpu_quota=BATCH_QUOTA,
                                                            cpu_shares=BATCH_SHARES,
                                                            memory_limit_in_bytes=BATCH_MEMORY)
                    return rt[k].UpdateContainerResources(cri.UpdateContainerResourcesRequest(
                        container_id=ids[i % len(ids)], linux=resources), timeout=timeout)
                return call

            out["hooked"] = {}
            hooked_warmup = min(warmup, max(hooked_calls // 10, 1))
            alternate(hooked_warmup, update("direct"), update("proxied"), errors)
            hooks.answered.clear()
            d_ns, p_ns = alternate(hooked_calls, update("direct"), update("proxied"), errors)
            out["hooked"]["UpdateContainerResources"] = {
                **summary(d_ns, p_ns), "hook": "PreUpdateContainerResources",
                "hook_answers": hooks.answered["PreUpdateContainerResources"]}

            # hooked: CreateContainer (PreCreateContainer) and RemoveContainer (no hook: store clean-up)
            if create_calls:
                created: dict[str, list[int]] = {"direct": [], "proxied": []}
                removed: dict[str, list[int]] = {"direct": [], "proxied": []}
                attempt = [0]
                clock = time.perf_counter_ns
                for i in range(create_calls):
                    for k in ("direct", "proxied") if i % 2 == 0 else ("proxied", "direct"):
                        attempt[0] += 1
                        config = container_config(CREATED_NAME, attempt=attempt[0])
                        config.linux.resources.CopyFrom(cri.LinuxContainerResources(
                            cpu_period=100_000, cpu_quota=BATCH_QUOTA, cpu_shares=BATCH_SHARES,
                            memory_limit_in_bytes=BATCH_MEMORY))
                        t0 = clock()
                        try:
                            cid = rt[k].CreateContainer(cri.CreateContainerRequest(
                                pod_sandbox_id=sandbox_id, config=config, sandbox_config=sandbox),
                                timeout=120).container_id
                        except grpc.RpcError as err:
                            errors.append(f"{k} CreateContainer: {err.code().name}: {err.details()}")
                            continue
                        t1 = clock()
                        try:
                            rt[k].RemoveContainer(cri.RemoveContainerRequest(container_id=cid), timeout=120)
                        except grpc.RpcError as err:
                            errors.append(f"{k} RemoveContainer: {err.code().name}: {err.details()}")
                            continue
                        created[k].append(t1 - t0)
                        removed[k].append(clock() - t1)
                out["hooked"]["CreateContainer"] = {
                    **summary(created["direct"], created["proxied"]), "hook": "PreCreateContainer",
                    "hook_answers": hooks.answered["PreCreateContainer"]}
                out["hooked"]["RemoveContainer"] = {**summary(removed["direct"], removed["proxied"]),
                                                    "hook": None}
        finally:
            for ch in channels:
                ch.close()
            if proxy is not None:
                out["proxy_exit_code"] = proxy.stop()
                if errors or "hooked" not in out:
                    out["proxy_log_tail"] = proxy.log_tail()
            hooks.stop(5)
    out["errors"] = errors
    out["total_s"] = round(time.monotonic() - started, 1)
    out["targets"] = targets(out)
    answered = all(case["hook_answers"] == case["calls"] for case in out["hooked"].values() if case.get("hook"))
    out["hooks_answered"] = answered
    out["ok"] = not errors and answered and all(t["met"] for t in out["targets"].values())
    return out


def _version(stub: Any) -> str:
    from koordinator.grpcapi.runtime.v1 import api_pb2 as cri

    v = stub.Version(cri.VersionRequest(), timeout=10)
    return f"{v.runtime_name} {v.runtime_version} (CRI {v.runtime_api_version})"


def targets(out: dict[str, Any]) -> dict[str, Any]:
    """Each target with the worst added p99 of its calls and whether it is met."""
    result = {}
    for key, section, target in (("pass_through_added_p99_ms", "pass_through", TARGET_PASS_THROUGH_ADDED_P99_MS),
                                 ("hooked_added_p99_ms", "hooked", TARGET_HOOKED_ADDED_P99_MS)):
        measured = {name: case["added_p99_ms"] for name, case in out.get(section, {}).items()
                    if "added_p99_ms" in case}
        worst = max(measured, key=measured.get) if measured else None
        result[key] = {"target": target, "worst": measured.get(worst) if worst else None, "worst_call": worst,
                       "met": bool(measured) and measured[worst] <= target}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls of each pass-through method, each way")
    parser.add_argument("--hooked-calls", type=int, default=500, help="UpdateContainerResources calls, each way")
    parser.add_argument("--create-calls", type=int, default=50,
                        help="CreateContainer + RemoveContainer pairs, each way (0: skip)")
    parser.add_argument("--containers", type=int, default=4, help="running containers of the BE pod")
    parser.add_argument("--warmup", type=int, default=100, help="untimed calls of each method first, each way")
    args = parser.parse_args()
    for flag in ("calls", "hooked_calls", "containers"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    out = bench(args.calls, args.hooked_calls, args.create_calls, args.containers, max(args.warmup, 0))
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
