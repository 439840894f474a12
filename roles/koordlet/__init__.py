"""Role ``koordlet``: the per-node agent — what it measures and reports, and the QoS it enforces.

Modules, each on the Runtime of ``koordinator --role=koordlet --node-name=N``:

- :mod:`koordinator_roles.koordlet.statesinformer`: the Node, the pods on it (from the kubelet's ``/pods`` with
  ``--kubelet-addr``, else through the API), its NodeSLO and NodeMetric; the NodeMetric status,
  NodeResourceTopology and (gate ``Accelerators``) Device reporters.
- :mod:`koordinator_roles.koordlet.metricsadvisor`: collectors reading ``/proc``, sysfs and cgroups (v1 and v2,
  systemd and cgroupfs drivers) under ``--proc-root``, ``--sys-root`` and ``--cgroup-root``.
- :mod:`koordinator_roles.koordlet.metriccache`: the time series and node facts, an SQLite file under
  ``--run-dir`` that survives a restart, bounded by ``--tsdb-retention-duration`` and ``--tsdb-max-bytes``.
- :mod:`koordinator_roles.koordlet.prediction`: peak prediction (prod reclaimable resources).
- :mod:`koordinator_roles.koordlet.qosmanager` and :mod:`koordinator_roles.koordlet.resourceexecutor`: the QoS
  strategies (suppress, evict, burst, reconcilers) and their audited cgroup writes.
- :mod:`koordinator_roles.koordlet.runtimehooks`: the hook plugins, applied by the reconciler and answered to
  koord-runtime-proxy by the hook server on ``--runtime-hooks-addr``.

Flags keep Koordinator's names and defaults (reference A.2) where Koordinator has them. ``--config``
names a koordlet-config document whose keys are those flags in camelCase (:mod:`koordinator_roles.koordlet.config`):
read at start, flags given on the command line win.
"""

from __future__ import annotations

import argparse
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from koordinator_roles.koordlet import features
from koordinator_roles.koordlet.local import local_setup  # noqa: F401  (the role contract's hook for `koordinator local`)
from koordinator_roles.koordlet.options import KoordletOptions

if TYPE_CHECKING:
    from koordinator.runtime.options import RuntimeOptions

#: The role contract's dataclass of the flags :func:`add_flags` adds (:mod:`roles`).
Options = KoordletOptions

log = logging.getLogger("koordinator.koordlet")

DEFAULT_RUN_DIR = "/var/run/koordlet"
METRICS_DB = "metrics.db"
CHECKPOINT_DIR = "prediction-checkpoints"
AUDIT_DIR = "audit"
HOOK_SOCKET = "koordlet.sock"


def _bytes(value: str) -> int:
    """A byte size as a Kubernetes quantity (``100Mi``) or plain bytes."""
    from koordinator.apis import quantity

    try:
        n = quantity.value(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"invalid size {value!r}: {err}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"invalid size {value!r}: must be positive")
    return n


def _percent(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid percent {value!r}: not an integer") from None
    if not 0 <= n <= 1000:
        raise argparse.ArgumentTypeError(f"invalid percent {n}: must be 0-1000")
    return n


def _seconds(value: str) -> float:
    try:
        n = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seconds {value!r}: not a number") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"invalid seconds {value!r}: must be >= 0")
    return n


def _stages(value: str) -> list[str]:
    from koordinator_roles.koordlet.runtimehooks.hookserver import STAGES

    stages = [s.strip() for s in value.split(",") if s.strip()]
    for stage in stages:
        if stage not in STAGES:
            raise argparse.ArgumentTypeError(f"unknown stage {stage!r} (known: {', '.join(STAGES)})")
    return stages


def add_flags(group: argparse._ArgumentGroup) -> None:
    """koordlet's own flags (the shared ones, --node-name included, come from the runtime)."""
    from koordinator.runtime.options import add_bool_flag, parse_duration, positive_duration, positive_int

    def duration(flag: str, default: str, help: str) -> None:
        group.add_argument(flag, type=positive_duration, default=default, metavar="DURATION", help=help)

    group.add_argument("--proc-root", "--proc-root-dir", dest="proc_root", default="/proc", metavar="DIR",
                       help="the host's /proc")
    group.add_argument("--sys-root", "--sys-root-dir", dest="sys_root", default="/sys", metavar="DIR",
                       help="the host's /sys")
    group.add_argument("--cgroup-root", "--cgroup-root-dir", dest="cgroup_root", default="/sys/fs/cgroup",
                       metavar="DIR", help="the host's cgroup mount (v1: the directory holding cpu/, memory/ ...)")
    group.add_argument("--cgroup-driver", choices=("auto", "systemd", "cgroupfs"), default="auto",
                       help="the kubelet's cgroup driver; auto looks for kubepods.slice or kubepods")
    group.add_argument("--run-dir", default=DEFAULT_RUN_DIR, metavar="DIR",
                       help=f"where the metric cache ({METRICS_DB}) and prediction checkpoints live; kept "
                            "across restarts")
    group.add_argument("--kubelet-addr", default="", metavar="URL",
                       help="the kubelet to list pods from (https://HOST:10250 with the service account token, "
                            "or http://HOST:10255); empty: list the node's pods through the API server")
    duration("--kubelet-sync-interval", "10s", "how often pods are listed from the kubelet")
    duration("--kubelet-sync-timeout", "3s", "timeout of one kubelet request")
    duration("--collect-res-used-interval", "1s", "interval of the node, pod and container usage collectors")
    duration("--collect-node-cpu-info-interval", "60s", "interval of the node CPU/NUMA info collector")
    duration("--collect-sys-metric-outdated-interval", "10s",
             "node and pod samples older than this are not used for system usage")
    duration("--node-topology-sync-interval", "3s", "interval of the NodeResourceTopology (and Device) report")
    add_bool_flag(group, "--enable-node-metric-report", default=True, help="report the NodeMetric status")
    group.add_argument("--report-interval", type=parse_duration, default=None, metavar="DURATION",
                       help="deprecated in Koordinator: when set, overrides the NodeMetric spec's "
                            "reportIntervalSeconds (default: from the spec, 60s)")
    duration("--tsdb-retention-duration", "12h", "how long samples are kept in the metric cache")
    group.add_argument("--tsdb-max-bytes", type=_bytes, default="100Mi", metavar="SIZE",
                       help="the metric cache's size bound; the oldest samples go first")
    group.add_argument("--prediction-checkpoint-filepath", default="", metavar="DIR",
                       help=f"prediction checkpoints (default: RUN_DIR/{CHECKPOINT_DIR})")
    duration("--prediction-cold-start-duration", "24h", "pods younger than this are not predicted")
    group.add_argument("--prediction-safety-margin-percent", type=_percent, default=10, metavar="PERCENT",
                       help="margin added to predicted peaks")
    duration("--prediction-memory-histogram-decay-halflife", "24h", "half-life of memory samples")
    duration("--prediction-cpu-histogram-decay-halflife", "12h", "half-life of CPU samples")
    duration("--prediction-training-interval", "1m", "how often models take a sample")
    duration("--prediction-model-expiration-duration", "30m", "models not updated this long are dropped")
    duration("--prediction-model-checkpoint-interval", "10m", "how often a model is checkpointed")
    group.add_argument("--prediction-model-checkpoint-max-per-step", type=positive_int, default=12, metavar="N",
                       help="models checkpointed per round at most")
    # QoS manager (A.2.5): intervals in whole seconds as Koordinator's flags; 0 switches a strategy off.
    for flag, default, what in (("--cpu-suppress-interval-seconds", 1, "CPUSuppress round"),
                                ("--cpu-evict-interval-seconds", 1, "CPUEvict round"),
                                ("--memory-evict-interval-seconds", 1, "MemoryEvict round"),
                                ("--memory-evict-cool-time-seconds", 4, "pause after a memory eviction"),
                                ("--cpu-evict-cool-time-seconds", 20, "pause after a CPU eviction"),
                                ("--reconcile-interval-seconds", 1, "CPUBurst and the cgroup reconcilers' round")):
        group.add_argument(flag, type=_seconds, default=default, metavar="SECONDS", help=f"{what} (seconds)")
    add_bool_flag(group, "--only-evict-by-api", default=False,
                  help="evict through the eviction API only (default: kill containers through the runtime)")
    group.add_argument("--resource-force-update-seconds", type=_seconds, default=60, metavar="SECONDS",
                       help="the resource executor re-applies a cached cgroup value at least this often")
    group.add_argument("--xpu-device-infos-dir", default="/var/run/koordlet/xpu-device-infos", metavar="DIR",
                       help="the device daemon's device infos, one JSON file per producer (gate Accelerators); "
                            "their accelerators replace NVML's GPUs in the Device")
    group.add_argument("--audit-log-dir", default="", metavar="DIR",
                       help="where the audit log of cgroup changes goes (default: RUN_DIR/audit)")
    group.add_argument("--audit-max-disk-space-mb", type=positive_int, default=16, metavar="MB",
                       help="the audit log's size bound on disk")
    # Proxy-mode runtime hooks (A.2.6): the hook server koord-runtime-proxy calls.
    group.add_argument("--runtime-hooks-network", choices=("unix", "tcp"), default="unix",
                       help="the hook server's network; koord-runtime-proxy dials unix sockets only")
    group.add_argument("--runtime-hooks-addr", default="", metavar="PATH",
                       help="the unix socket the hook server listens on (default: RUN_DIR/koordlet.sock)")
    group.add_argument("--runtime-hooks-host-endpoint", default="", metavar="PATH",
                       help="the socket as koord-runtime-proxy on the host sees it, written into the registration "
                            "(default: --runtime-hooks-addr)")
    group.add_argument("--runtime-hooks-failure-policy", choices=("Ignore", "Fail"), default="Ignore",
                       help="what the proxy does when the koordlet does not answer: Ignore (create the container "
                            "unchanged) or Fail (fail the CRI call)")
    group.add_argument("--runtime-hooks-plugin-failure-policy", choices=("Ignore", "Fail"), default="Ignore",
                       help="a hook plugin that cannot handle a pod: Ignore (skip the plugin) or Fail (fail the call)")
    group.add_argument("--runtime-hooks-config-path", default="/etc/runtime/hookserver.d", metavar="DIR",
                       help="where the registration for koord-runtime-proxy (koordlet.json) is written")
    group.add_argument("--runtime-hooks-disable-stages", type=_stages, default=None, metavar="STAGE,...",
                       help="hook stages not to register (e.g. PreUpdateContainerResources) (default: none)")


def check_options(options: RuntimeOptions[KoordletOptions]) -> None:
    """Refuse bad flags, or a bad ``--config`` document, before anything starts (the CLI exits 2).

    With ``--config`` the document's values go into ``options`` where the command line gave no flag.
    """
    from koordinator_roles.koordlet import config

    features.resolve(options.feature_gates)
    names = config.apply(config.load(options.config), options) if options.config else {}

    def name(dest: str) -> str:
        # A value from the file is named by its file and key, one from the command line by its flag.
        return names.get(dest) or f"--{dest.replace('_', '-')}"

    opts = options.role_options
    for flag in ("proc_root", "sys_root", "cgroup_root"):
        path = getattr(opts, flag)
        if not os.path.isdir(path):
            raise ValueError(f"{name(flag)}: {path!r} is not a directory")
    addr = opts.kubelet_addr
    if addr and not addr.startswith(("http://", "https://")):
        raise ValueError(f"{name('kubelet_addr')}: {addr!r} must start with http:// or https://")
    if opts.report_interval is not None and opts.report_interval <= 0:
        raise ValueError(f"{name('report_interval')}: {opts.report_interval:g}s: must be positive")
    if opts.runtime_hooks_network != "unix":
        raise ValueError(f"{name('runtime_hooks_network')}: {opts.runtime_hooks_network!r}: only unix is supported "
                         "(koord-runtime-proxy dials the hook server's unix socket)")


@dataclass
class KoordletParts:
    """What :func:`register` built, for tools and tests that look inside a running koordlet."""

    layout: Any
    cache: Any
    states: Any
    advisor: Any
    predictor: Any
    executor: Any = None
    qos: Any = None
    reporter: Any = None
    topology_reporter: Any = None
    device_reporter: Any = None
    runtime_hooks: Any = None


class _CacheCloser:
    """Closes the metric cache after everything that writes or reads it has stopped."""

    def __init__(self, cache: Any) -> None:
        self.cache = cache

    def start(self) -> None:
        pass

    def stop(self, timeout: float) -> bool:
        self.cache.close()
        return True


def _read_config_at_start(runtime: Any, options: RuntimeOptions[KoordletOptions]) -> None:
    """Log what ``--config`` set and what it holds in vain, and warn when it changes (a restart applies it).

    check_options applied the document before logging was set up; it is read again here (a small file)
    for the log lines and as the baseline a change is compared with.
    """
    from koordinator_roles.koordlet import config

    cfg = config.load(options.config)
    config.log_start(cfg, options)
    config.watch(runtime, options.config, cfg)


def _qos_manager(runtime: Any, options: RuntimeOptions[KoordletOptions], layout: Any, cache: Any, states: Any,
                 gates: dict[str, bool]) -> tuple[Any, Any]:
    """The resource executor (audited cgroup writes) and the QoS manager's strategies on ``runtime``."""
    from koordinator_roles.koordlet import qosmanager
    from koordinator_roles.koordlet.resourceexecutor import AuditLog, ResourceExecutor

    opts = options.role_options
    registry = runtime.metrics.registry
    audit = AuditLog(opts.audit_log_dir or os.path.join(opts.run_dir, AUDIT_DIR),
                     max_bytes=opts.audit_max_disk_space_mb << 20)
    executor = ResourceExecutor(layout, audit=audit, force_update_seconds=opts.resource_force_update_seconds,
                                metrics=registry)
    qos_options = qosmanager.QOSOptions(
        cpu_suppress_interval=opts.cpu_suppress_interval_seconds, cpu_evict_interval=opts.cpu_evict_interval_seconds,
        memory_evict_interval=opts.memory_evict_interval_seconds,
        memory_evict_cool_time=opts.memory_evict_cool_time_seconds,
        cpu_evict_cool_time=opts.cpu_evict_cool_time_seconds, reconcile_interval=opts.reconcile_interval_seconds,
        only_evict_by_api=opts.only_evict_by_api, collect_interval=opts.collect_res_used_interval)
    ctx = qosmanager.QOSContext(states=states, cache=cache, executor=executor, layout=layout, gates=gates,
                                options=qos_options, node_name=options.node_name, client=runtime.client,
                                events=runtime.event_recorder, metrics=registry, proc_root=opts.proc_root,
                                sys_root=opts.sys_root)
    manager = qosmanager.build(ctx)
    manager.register(runtime)
    return executor, manager


def _runtime_hooks(runtime: Any, options: RuntimeOptions[KoordletOptions], executor: Any, cache: Any, states: Any,
                   gates: dict[str, bool]) -> Any:
    """The runtime hooks in reconciler mode and for koord-runtime-proxy (reference A.8.1), through the QoS
    manager's executor."""
    from koordinator_roles.koordlet import runtimehooks
    from koordinator_roles.koordlet.runtimehooks.hookserver import HookServer

    opts = options.role_options
    reconciler = runtimehooks.build(states, executor, gates, cache=cache, interval=opts.reconcile_interval_seconds,
                                    events=runtime.event_recorder, proc_root=opts.proc_root)
    reconciler.register(runtime)
    addr = opts.runtime_hooks_addr or os.path.join(opts.run_dir, HOOK_SOCKET)
    runtime.add_component(HookServer(
        reconciler, addr=addr, config_dir=opts.runtime_hooks_config_path,
        host_endpoint=opts.runtime_hooks_host_endpoint or addr, failure_policy=opts.runtime_hooks_failure_policy,
        plugin_failure_policy=opts.runtime_hooks_plugin_failure_policy,
        disabled_stages=opts.runtime_hooks_disable_stages))
    return reconciler


def register(runtime: Any, options: RuntimeOptions[KoordletOptions]) -> KoordletParts:
    """Build the koordlet's modules on ``runtime`` (reference A.1 start order: states, then collectors)."""
    from koordinator_roles.koordlet.metriccache import MetricCache
    from koordinator_roles.koordlet.metrics import KoordletCollector, round_duration
    from koordinator_roles.koordlet.metricsadvisor import MetricsAdvisor
    from koordinator_roles.koordlet.prediction import PeakPredictor
    from koordinator_roles.koordlet.statesinformer import (DeviceReporter, KubeletClient, NodeMetricReporter,
                                                           NodeTopologyReporter, StatesInformer)
    from koordinator_roles.koordlet.system.cgroup import detect_layout
    from koordinator_roles.koordlet.system.paths import HostPaths

    opts = options.role_options
    if options.config:
        _read_config_at_start(runtime, options)
    gates = features.resolve(options.feature_gates)
    if inactive := features.inactive(gates):
        log.info("feature gates on but not implemented in this build: %s", ",".join(inactive))
    node = options.node_name
    layout = detect_layout(opts.cgroup_root, None if opts.cgroup_driver == "auto" else opts.cgroup_driver)
    paths = HostPaths(proc_root=opts.proc_root, sys_root=opts.sys_root, cgroup_root=opts.cgroup_root)
    run_dir = opts.run_dir
    cache = MetricCache(os.path.join(run_dir, METRICS_DB), retention_seconds=opts.tsdb_retention_duration,
                        max_bytes=opts.tsdb_max_bytes)
    runtime.add_component(_CacheCloser(cache))
    kubelet = (KubeletClient(opts.kubelet_addr, timeout=opts.kubelet_sync_timeout)
               if opts.kubelet_addr else None)
    states = StatesInformer.from_runtime(runtime, node, layout, kubelet=kubelet,
                                        kubelet_sync_interval=opts.kubelet_sync_interval)
    advisor = MetricsAdvisor(paths, layout, cache, states, collect_interval=opts.collect_res_used_interval,
                             node_info_interval=opts.collect_node_cpu_info_interval,
                             sys_outdated=opts.collect_sys_metric_outdated_interval,
                             on_round=round_duration(runtime.metrics.registry).observe)
    predictor = PeakPredictor(
        cache, states, checkpoint_dir=opts.prediction_checkpoint_filepath or os.path.join(run_dir, CHECKPOINT_DIR),
        training_interval=opts.prediction_training_interval, cold_start=opts.prediction_cold_start_duration,
        safety_margin_percent=opts.prediction_safety_margin_percent,
        cpu_half_life=opts.prediction_cpu_histogram_decay_halflife,
        memory_half_life=opts.prediction_memory_histogram_decay_halflife,
        model_expiration=opts.prediction_model_expiration_duration,
        checkpoint_interval=opts.prediction_model_checkpoint_interval,
        checkpoint_max_per_step=opts.prediction_model_checkpoint_max_per_step)
    parts = KoordletParts(layout=layout, cache=cache, states=states, advisor=advisor, predictor=predictor)

    parts.executor, parts.qos = _qos_manager(runtime, options, layout, cache, states, gates)
    parts.runtime_hooks = _runtime_hooks(runtime, options, parts.executor, cache, states, gates)

    if kubelet is not None:
        runtime.add_runnable("kubelet-pods", states.run)

    def collect(stop: Any) -> None:
        # Collectors need the pod list: with a kubelet it arrives after the informers' sync.
        while not states.has_synced():
            if stop.wait(0.1):
                return
        advisor.run(stop)

    runtime.add_runnable("metrics-advisor", collect)
    runtime.add_runnable("metric-cache-gc", cache.run_gc)
    runtime.add_runnable("peak-predictor", predictor.run)
    runtime.add_ready_check("metrics-advisor",
                            lambda: None if advisor.has_synced() else "the first collection round has not finished")
    if opts.enable_node_metric_report:
        parts.reporter = NodeMetricReporter(runtime.client, states, cache, predictor=predictor,
                                            report_interval=opts.report_interval, gpu=gates["Accelerators"])
        runtime.add_runnable("nodemetric-reporter", parts.reporter.run)
    if gates["NodeTopologyReport"]:
        parts.topology_reporter = NodeTopologyReporter(runtime.client, states, cache, kubelet=kubelet,
                                                       interval=opts.node_topology_sync_interval,
                                                       hugepages=gates["HugePageReport"])
        runtime.add_runnable("node-topology-reporter", parts.topology_reporter.run)
    if gates["Accelerators"]:
        parts.device_reporter = DeviceReporter(runtime.client, states, cache, sys_root=opts.sys_root,
                                               interval=opts.node_topology_sync_interval,
                                               xpu_dir=opts.xpu_device_infos_dir)
        runtime.add_runnable("device-reporter", parts.device_reporter.run)
    runtime.metrics.registry.register(KoordletCollector(
        node, cache=cache, reporter=parts.reporter, predictor=predictor,
        node_metric_gauges=gates["NodeMetricPromMetrics"]))
    log.info("koordlet node=%s cgroup=v%d/%s run-dir=%s pods-from=%s", node, layout.version, layout.driver, run_dir,
             opts.kubelet_addr or "api")
    return parts
