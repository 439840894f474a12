"""The Runtime: what every role runs on.

It owns the client, the shared informers, the metrics registry, the probe servers, the event
recorder, leader election and every thread a role needs. A role only registers controllers,
runnables and components on it (``register(runtime, options)``) and the Runtime runs them:

1. components (config sources, webhook servers, ...), the probe servers and the informers start;
2. once every informer has synced, the controllers and runnables that are not leader-gated start;
3. with ``--leader-elect`` the leader-gated ones start when the Lease is won (at once without it);
4. losing the Lease stops them within the margin the Lease leaves (lease duration minus renew
   deadline) and the process exits 1 so that it restarts clean, as Kubernetes components do; a
   gated task that ignores its stop signal past that margin gets the process killed rather than
   risk two leaders acting at once;
5. SIGTERM/SIGINT: stop everything (in-flight reconciles finish), release the Lease, stop the
   informers and servers, all within ``--graceful-shutdown-timeout``.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from koordinator.runtime.client import Client
from koordinator.runtime.controller import Controller
from koordinator.runtime.informer import InformerFactory
from koordinator.runtime.metrics import RuntimeMetrics
from koordinator.runtime.options import OFFLINE_ROLES, RuntimeOptions
from koordinator.runtime.servers import ProbeServer

log = logging.getLogger("koordinator.runtime")

Check = Callable[[], "str | None"]


class Component(Protocol):
    """Anything the Runtime starts and stops: ``start()`` launches its threads, ``stop(timeout)`` joins them."""

    def start(self) -> None: ...

    def stop(self, timeout: float) -> Any: ...


@dataclass
class _Runnable:
    """A function run in a thread of its own until its stop event is set."""

    name: str
    fn: Callable[[threading.Event], None]
    stop_event: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.fn(self.stop_event)
        except Exception:
            log.exception("runnable failed name=%s", self.name)

    def stop(self, timeout: float) -> bool:
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(timeout)
            return not self.thread.is_alive()
        return True


def freeze_long_lived_objects() -> None:
    """Exempt every object alive now (the synced caches, modules, plugin state) from the cyclic
    garbage collector.

    A full collection walks every tracked object: with the caches of a big cluster that is ~0.1 s,
    several times a minute on a busy scheduler. These objects live as long as the process; reference
    counting still frees them when an informer drops one.
    """
    gc.collect()
    gc.freeze()


class Runtime:
    """Owns and runs everything a role registers; see the module docstring for the order."""

    def __init__(self, options: RuntimeOptions, *, client: Client | None = None,
                 metrics: RuntimeMetrics | None = None, freeze_after_sync: bool = False) -> None:
        """``freeze_after_sync``: call :func:`freeze_long_lived_objects` once the caches synced (a role's
        own process; not for runtimes sharing a process, such as tests)."""
        self.options = options
        self._freeze_after_sync = freeze_after_sync
        self.metrics = metrics or (client.metrics if client is not None else RuntimeMetrics())
        # A role that never talks to the API server (OFFLINE_ROLES) runs without a client: no informers,
        # no Events, no Lease.
        self.client: Client | None = client
        if client is None and options.role not in OFFLINE_ROLES:
            self.client = Client.from_kubeconfig(
                options.kubeconfig, qps=options.kube_api_qps, burst=options.kube_api_burst, metrics=self.metrics,
                user_agent=f"koordinator/{options.component}")
        self.informers = InformerFactory(self.client)
        self._components: list[Component] = []
        self._work: list[tuple[Component, bool]] = []  # (controller or runnable, leader_gated)
        self._health_checks: dict[str, Check] = {"ping": lambda: None, "runtime": self._fatal_check}
        self._ready_checks: dict[str, Check] = {"informer-sync": self._sync_check}
        self._servers: list[ProbeServer] = []
        self._recorder: Any = None
        self._elector: Any = None
        self._elector_stop = threading.Event()
        self._elector_thread: threading.Thread | None = None
        self._cond = threading.Condition()
        self._stopping = False
        self._leading = False
        self._gated_running: list[Component] = []
        self._started: list[Component] = []
        self._supervisor: threading.Thread | None = None
        self._done = threading.Event()
        self._fatal: str | None = None
        self.exit_code = 0
        if options.leader_elect:
            self._ready_checks["leader-election"] = self._leader_check

    # -- registration ------------------------------------------------------------------------

    def add_component(self, component: Component) -> Component:
        """Started first (before informers), in registration order; stopped last but one."""
        self._components.append(component)
        return component

    def controller(self, name: str, reconcile: Callable[[str], Any], *, workers: int = 1,
                   leader_gated: bool = True, **kwargs: Any) -> Controller:
        """A :class:`~koordinator.runtime.controller.Controller` reporting to this runtime's metrics, added."""
        return self.add_controller(Controller(name, reconcile, workers=workers, leader_gated=leader_gated,
                                              metrics=self.metrics, **kwargs))

    def add_controller(self, controller: Controller) -> Controller:
        """Add a controller built elsewhere; its ``leader_gated`` decides when it runs."""
        self._work.append((controller, controller.leader_gated))
        return controller

    def add_runnable(self, name: str, fn: Callable[[threading.Event], None], *, leader_gated: bool = False) -> None:
        """Run ``fn(stop_event)`` in a thread once caches are synced (and the Lease is held, if gated)."""
        self._work.append((_Runnable(name, fn), leader_gated))

    def add_health_check(self, name: str, fn: Check) -> None:
        """``fn() -> None`` when healthy, else the reason; served on /healthz (and counts for /readyz)."""
        self._health_checks[name] = fn

    def add_ready_check(self, name: str, fn: Check) -> None:
        self._ready_checks[name] = fn

    def event_recorder(self) -> Any:
        """The process's :class:`~koordinator.runtime.events.EventRecorder` (created on first use)."""
        if self._recorder is None:
            from koordinator.runtime.events import EventRecorder

            if self.client is None:
                raise RuntimeError(f"{self.options.component} has no API client: it records no Events")

            self._recorder = EventRecorder(self.client, self.options.component,
                                           host=self.options.node_name or socket.gethostname(),
                                           metrics=self.metrics)
            if self._supervisor is not None:
                self._recorder.start()
        return self._recorder

    def config_file(self, configmap: str, on_change: Callable[[dict], None], *, path: str | None = None,
                    key: str | None = None) -> Any:
        """Watch ``--config`` (or ``path``): a mounted ConfigMap directory or one of its files.

        The first load happens in :meth:`start` (an invalid or missing config fails the start with the
        fields named); later changes are validated, applied through ``on_change(parsed)`` or rejected
        with an error log, a Warning Event on this pod ($POD_NAMESPACE/$POD_NAME) and a metric.
        ``key``: the ConfigMap key a single file holds, whatever its name (default: its basename).
        """
        from koordinator.runtime.configsource import FileConfigSource

        path = path or self.options.config
        if not path:
            raise ValueError(f"{self.options.component} needs --config (the mounted {configmap} ConfigMap)")
        pod, namespace = os.environ.get("POD_NAME"), os.environ.get("POD_NAMESPACE")
        involved = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": namespace}} \
            if pod and namespace else None
        return self.add_component(FileConfigSource(path, configmap, on_change=on_change, key=key,
                                                   recorder=self.event_recorder() if involved else None,
                                                   involved_object=involved, metrics=self.metrics))

    def is_leader(self) -> bool:
        """True while this process may run leader-gated work (always, without --leader-elect)."""
        with self._cond:
            return self._leading

    @property
    def server_urls(self) -> list[str]:
        return [s.url for s in self._servers]

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start everything; returns at once (work starts when the caches have synced)."""
        if self._supervisor is not None:
            raise RuntimeError("runtime already started")
        for component in self._components:
            component.start()
        self._start_servers()
        if self._recorder is not None:
            self._recorder.start()
        self.informers.start()
        self._supervisor = threading.Thread(target=self._supervise, name="runtime-supervisor", daemon=True)
        self._supervisor.start()
        if self.options.leader_elect:
            self._start_elector()
        else:
            with self._cond:
                self._leading = True
                self._cond.notify_all()

    def request_stop(self, reason: str = "") -> None:
        """Ask :meth:`run` to shut down (signal handlers, fatal errors); returns at once."""
        if reason:
            log.info("shutting down reason=%s", reason)
        self._done.set()

    def run(self) -> int:
        """Start, block until SIGTERM/SIGINT or a fatal error, shut down; the process exit code."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda s, _f: self.request_stop(signal.Signals(s).name))
        try:
            self.start()
            # Wake up regularly: a SIGTERM the kernel delivers to another thread only sets a flag,
            # and the main thread runs the Python handler once it executes bytecode again.
            while not self._done.wait(0.5):
                pass
        finally:
            self.stop()
        return self.exit_code

    def stop(self, timeout: float | None = None) -> None:
        """Graceful shutdown: work, then the Lease, then informers, recorder, components and servers."""
        budget = self.options.graceful_shutdown_timeout if timeout is None else timeout
        deadline = time.monotonic() + budget

        def left() -> float:
            return max(0.1, deadline - time.monotonic())

        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._done.set()
        if self._supervisor is not None:
            self._supervisor.join(left())
        with self._cond:
            started, self._started = list(self._started), []
        for component in reversed(started):
            component.stop(left())
        self._stop_gated(left())
        self._elector_stop.set()
        if self._elector_thread is not None:
            self._elector_thread.join(left())
        self.informers.stop(left())
        if self._recorder is not None:
            self._recorder.stop(left())
        for component in reversed(self._components):
            component.stop(left())
        for server in self._servers:
            server.stop(left())
        self._servers = []

    # -- internals -------------------------------------------------------------------------------

    def _start_servers(self) -> None:
        metrics_addr, health_addr = self.options.metrics_addr, self.options.health_addr
        # One server when both name the same port; port 0 twice means two free ports.
        if metrics_addr == health_addr and metrics_addr != "0" and not metrics_addr.endswith(":0"):
            self._servers.append(ProbeServer(metrics_addr, registry=self.metrics.registry,
                                             health_checks=self._health_checks, ready_checks=self._ready_checks,
                                             name="probes"))
        else:
            if metrics_addr and metrics_addr != "0":
                self._servers.append(ProbeServer(metrics_addr, registry=self.metrics.registry, name="metrics"))
            if health_addr and health_addr != "0":
                self._servers.append(ProbeServer(health_addr, health_checks=self._health_checks,
                                                 ready_checks=self._ready_checks, name="health"))
        for server in self._servers:
            server.start()

    def _supervise(self) -> None:
        """Start non-gated work once caches synced, then gated work whenever we lead."""
        waited = 0.0
        while not self.informers.wait_for_sync(1.0):
            with self._cond:
                if self._stopping:
                    return
            waited += 1.0
            if waited % 30 == 0:
                log.warning("still waiting for caches to sync after %ds: %s", waited,
                            ", ".join(self.informers.unsynced()))
        if self._freeze_after_sync:
            freeze_long_lived_objects()
        with self._cond:
            if self._stopping:
                return
            for component, gated in self._work:
                if not gated:
                    component.start()
                    self._started.append(component)
            while True:
                while not self._stopping and not (self._leading and not self._gated_running):
                    self._cond.wait()
                if self._stopping:
                    return
                for component, gated in self._work:
                    if gated:
                        component.start()
                        self._gated_running.append(component)
                if not self._gated_running:
                    return  # nothing gated registered

    def _start_elector(self) -> None:
        from koordinator.runtime.leaderelection import LeaderElector

        o = self.options
        # Its own unthrottled client: renewals must not queue behind controllers' requests.
        self._elector = LeaderElector(
            self.client.with_limits(0, 0), namespace=o.leader_elect_namespace, name=o.leader_elect_name,
            identity=o.leader_elect_identity, lease_duration=o.leader_elect_lease_duration,
            renew_deadline=o.leader_elect_renew_deadline, retry_period=o.leader_elect_retry_period,
            on_started_leading=self._on_started_leading, on_stopped_leading=self._on_stopped_leading,
            metrics=self.metrics)
        self._elector_thread = threading.Thread(target=self._elector.run, args=(self._elector_stop,),
                                                name="leader-elector", daemon=True)
        self._elector_thread.start()

    def _on_started_leading(self) -> None:
        # Called on the elector's thread, which must go back to renewing: the supervisor starts the work.
        with self._cond:
            self._leading = True
            self._cond.notify_all()

    def _on_stopped_leading(self) -> None:
        with self._cond:
            was_leading, self._leading = self._leading, False
            stopping = self._stopping
        if not was_leading:
            return
        # Whatever the Lease leaves between our renew deadline and another candidate's take-over.
        margin = max(0.5, self.options.leader_elect_lease_duration - self.options.leader_elect_renew_deadline - 0.5)
        if not self._stop_gated(margin):
            log.critical("leader-gated work did not stop within %.1fs after losing the lease; exiting", margin)
            logging.shutdown()
            os._exit(1)
        if not stopping:
            log.error("leader election lost lease=%s/%s identity=%s", self.options.leader_elect_namespace,
                      self.options.leader_elect_name, self.options.leader_elect_identity)
            self._fatal = "leader election lost"
            self.exit_code = 1
            self.request_stop("leader election lost")

    def _stop_gated(self, timeout: float) -> bool:
        with self._cond:
            running, self._gated_running = self._gated_running, []
        deadline = time.monotonic() + timeout
        ok = True
        for component in reversed(running):
            result = component.stop(max(0.0, deadline - time.monotonic()))
            ok = ok and result is not False
        for component in running:
            thread = getattr(component, "thread", None)
            if thread is not None and thread.is_alive():
                ok = False
        return ok

    def _sync_check(self) -> str | None:
        unsynced = self.informers.unsynced()
        return f"waiting for caches: {', '.join(unsynced)}" if unsynced else None

    def _leader_check(self) -> str | None:
        elector = self._elector
        if elector is None or (not elector.is_leader() and not elector.leader_identity):
            return "leader election not decided yet"
        return None

    def _fatal_check(self) -> str | None:
        return self._fatal
