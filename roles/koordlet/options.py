"""The koordlet's own flags (:func:`koordinator_roles.koordlet.add_flags`) as one typed value."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class KoordletOptions:
    """The koordlet's flags, by ``dest``; ``options.role_options`` of a koordlet's ``RuntimeOptions``.

    Durations are in seconds, sizes in bytes. ``check_options`` sets the fields a ``--config`` document
    has keys for, where the command line gave no flag (:func:`koordinator_roles.koordlet.config.apply`).
    """

    proc_root: str
    sys_root: str
    cgroup_root: str
    #: ``auto``, ``systemd`` or ``cgroupfs``.
    cgroup_driver: str
    run_dir: str
    #: Empty: the node's pods come through the API server.
    kubelet_addr: str
    kubelet_sync_interval: float
    kubelet_sync_timeout: float
    collect_res_used_interval: float
    collect_node_cpu_info_interval: float
    collect_sys_metric_outdated_interval: float
    node_topology_sync_interval: float
    enable_node_metric_report: bool
    #: None: the NodeMetric spec's reportIntervalSeconds.
    report_interval: float | None
    tsdb_retention_duration: float
    tsdb_max_bytes: int
    #: Empty: RUN_DIR/prediction-checkpoints.
    prediction_checkpoint_filepath: str
    prediction_cold_start_duration: float
    prediction_safety_margin_percent: int
    prediction_memory_histogram_decay_halflife: float
    prediction_cpu_histogram_decay_halflife: float
    prediction_training_interval: float
    prediction_model_expiration_duration: float
    prediction_model_checkpoint_interval: float
    prediction_model_checkpoint_max_per_step: int
    #: QoS manager (reference A.2.5), seconds.
    cpu_suppress_interval_seconds: float = 1.0
    cpu_evict_interval_seconds: float = 1.0
    memory_evict_interval_seconds: float = 1.0
    memory_evict_cool_time_seconds: float = 4.0
    cpu_evict_cool_time_seconds: float = 20.0
    reconcile_interval_seconds: float = 1.0
    only_evict_by_api: bool = False
    #: Resource executor: cached writes are re-applied at least this often (seconds).
    resource_force_update_seconds: float = 60.0
    #: Empty: RUN_DIR/audit.
    audit_log_dir: str = ""
    audit_max_disk_space_mb: int = 16
    #: The device daemon's device infos (gate ``Accelerators``); every regular file is read.
    xpu_device_infos_dir: str = "/var/run/koordlet/xpu-device-infos"
    #: Proxy-mode hook server (reference A.2.6). Empty addr: RUN_DIR/koordlet.sock.
    runtime_hooks_network: str = "unix"
    runtime_hooks_addr: str = ""
    #: The socket as koord-runtime-proxy on the host sees it; empty: the addr.
    runtime_hooks_host_endpoint: str = ""
    runtime_hooks_failure_policy: str = "Ignore"
    runtime_hooks_plugin_failure_policy: str = "Ignore"
    runtime_hooks_config_path: str = "/etc/runtime/hookserver.d"
    runtime_hooks_disable_stages: list[str] | None = None
