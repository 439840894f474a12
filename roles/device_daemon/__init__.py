"""Role ``device-daemon`` (koord-device-daemon): discovers the node's accelerators and RDMA devices and
writes them, as Koordinator's device infos document, where the koordlet reads them.

Every ``--sleep-interval`` (default 15m; ``--oneshot``: once, then exit 0) it scans the host
(:mod:`koordinator.devices.discovery`: NVIDIA GPUs through NVML, other accelerators by PCI vendor and
class id, RDMA devices, all from ``--sys-root``) and writes the JSON array atomically to
``--prints-output-file`` (default ``/var/run/koordlet/xpu-device-infos/ic-device``; empty: not
written). The koordlet (gate ``Accelerators``) turns the file into the node's ``Device`` object and
its GPU labels; the manager copies those onto the Node. The daemon itself never writes to the API.
When it stops (not ``--oneshot``) it removes its file, so the koordlet stops reporting devices no
one vouches for. ``--no-timestamp`` is accepted and has no effect, as in Koordinator (the document
has no timestamp).

Each flag may come from its ``KDD_*`` environment variable instead; a flag or variable not given
takes its value from the configuration file (``--config-file``, or $KDD_CONFIG_FILE,
$CONFIG_FILE: ``version: v1``, ``flags.kdd``, the ConfigMap ``koord-device-daemon-config``), else
Koordinator's default.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from koordinator_roles.device_daemon.options import CONFIG_ENV, CONFIG_KEYS, DEFAULTS, ENV, DeviceDaemonOptions

if TYPE_CHECKING:
    from koordinator.runtime.options import RuntimeOptions
    from koordinator_roles import LocalContext, LocalSetup

#: The role contract's dataclass of the flags :func:`add_flags` adds (:mod:`roles`).
Options = DeviceDaemonOptions

log = logging.getLogger("koordinator.device_daemon")


def add_flags(group: argparse._ArgumentGroup) -> None:
    """koord-device-daemon's flags (Koordinator's names; defaults applied by :func:`check_options`)."""
    from koordinator.runtime.options import parse_bool, positive_duration

    def env(dest: str) -> str:
        return " or ".join(f"${name}" for name in ENV[dest])

    group.add_argument("--oneshot", nargs="?", const=True, default=None, type=parse_bool, metavar="true|false",
                       help=f"discover and write once, then exit (env {env('oneshot')}; default: false)")
    group.add_argument("--no-timestamp", nargs="?", const=True, default=None, type=parse_bool,
                       metavar="true|false",
                       help=f"accepted for Koordinator's command line; no effect (env {env('no_timestamp')}; "
                            "default: false)")
    group.add_argument("--sleep-interval", type=positive_duration, default=None, metavar="DURATION",
                       help=f"time between two discoveries (env {env('sleep_interval')}; default: 15m)")
    group.add_argument("--prints-output-file", default=None, metavar="FILE",
                       help=f"the device infos file; empty: not written (env {env('prints_output_file')}; "
                            f"default: {DEFAULTS['prints_output_file']})")
    group.add_argument("--config-file", default=None, metavar="FILE",
                       help="YAML or JSON configuration (version v1, flags.kdd; a mounted ConfigMap directory "
                            "holding one key is fine; read at start) (env $KDD_CONFIG_FILE or $CONFIG_FILE; default: none)")
    group.add_argument("--sys-root", default="/sys", metavar="DIR", help="the host's /sys")


def _from_env(dest: str, environ: dict[str, str]) -> Any:
    """The value of ``dest``'s environment variable (ValueError naming it when malformed); None when unset."""
    from koordinator.runtime.options import parse_bool, positive_duration

    for name in ENV[dest]:
        if name not in environ:
            continue
        raw = environ[name]
        try:
            if dest in ("oneshot", "no_timestamp"):
                return parse_bool(raw)
            if dest == "sleep_interval":
                return positive_duration(raw)
        except argparse.ArgumentTypeError as err:
            raise ValueError(f"{name}: Invalid value: {json.dumps(raw)}: {err}") from None
        return raw
    return None


def load_config(path: str) -> dict[str, Any]:
    """``flags.kdd`` of the configuration file at ``path`` (schema defaults applied); ValueError naming the
    file and each bad field."""
    import yaml

    from koordinator.apis.config_documents import validate_document
    from koordinator.runtime.componentconfig import config_file

    path = config_file(path)
    try:
        with open(path, encoding="utf-8") as f:
            document = yaml.safe_load(f)  # JSON is YAML
    except OSError as err:
        raise ValueError(f"--config-file {path}: cannot read: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise ValueError(f"--config-file {path}: not YAML or JSON: {err}") from None
    parsed, errors = validate_document("koord-device-daemon-config", document if document is not None else {})
    if errors:
        raise ValueError(f"--config-file {path}: " + "; ".join(str(e) for e in errors))
    return ((parsed.get("flags") or {}).get("kdd") or {}) if isinstance(parsed, dict) else {}


def check_options(options: RuntimeOptions[DeviceDaemonOptions], environ: dict[str, str] | None = None) -> None:
    """Complete the flags not given: their ``KDD_*`` variable, else the configuration file, else the default.

    ValueError naming a bad variable's value, a bad configuration field, or an output file that is a
    directory.
    """
    from koordinator.runtime.options import parse_duration

    opts = options.role_options
    env = dict(os.environ if environ is None else environ)
    config_path = opts.config_file or next(
        (env[name] for name in CONFIG_ENV if env.get(name)), None)
    opts.config_file = config_path
    kdd = load_config(config_path) if config_path else {}
    for dest in ENV:
        if getattr(opts, dest) is not None:
            continue
        value = _from_env(dest, env)
        if value is None and CONFIG_KEYS[dest] in kdd:
            value = kdd[CONFIG_KEYS[dest]]
            if dest == "sleep_interval":
                value = parse_duration(str(value))
                if value <= 0:
                    raise ValueError(f"--config-file {config_path}: flags.kdd.sleepInterval: Invalid value: "
                                     f"{json.dumps(kdd['sleepInterval'])}: must be positive")
        setattr(opts, dest, DEFAULTS[dest] if value is None else value)
    out = opts.prints_output_file
    if out and (out.endswith(os.sep) or os.path.isdir(out)):
        raise ValueError(f"--prints-output-file: Invalid value: {json.dumps(out)}: is a directory, want a file path")


class DeviceDaemon:
    """The discover-and-write loop (see the module docstring). ``nvml``: the NVML module to use (None:
    ``pynvml``); ``on_oneshot_done`` is called after the one run of ``--oneshot``."""

    def __init__(self, opts: DeviceDaemonOptions, *, nvml: Any = None, on_oneshot_done: Any = None) -> None:
        self.opts = opts
        self.nvml = nvml
        self.on_oneshot_done = on_oneshot_done
        self.runs = 0
        self.last: list[Any] | None = None

    def run_once(self) -> list[Any]:
        """Discover and write once; the entries written."""
        from koordinator.devices.discovery import discover
        from koordinator.devices.xpu import write_document

        infos = discover(self.opts.sys_root, self.nvml)
        path = self.opts.prints_output_file
        if path:
            write_document(path, infos)
        kinds: dict[str, int] = {}
        for info in infos:
            key = info.type or info.vendor
            kinds[key] = kinds.get(key, 0) + 1
        log.info("device infos %s devices=%d%s", f"written to {path}" if path else "not written (no output file)",
                 len(infos), "".join(f" {k}={n}" for k, n in sorted(kinds.items())))
        self.runs += 1
        self.last = infos
        return infos

    def run(self, stop: threading.Event) -> None:
        """Run until ``stop`` (or once, with ``--oneshot``); a failed write is logged and retried next round."""
        try:
            while not stop.is_set():
                try:
                    self.run_once()
                except OSError as err:  # a read-only or full output volume: one line, the next round may succeed
                    log.error("device infos not written: %s", err)
                if self.opts.oneshot:
                    if self.on_oneshot_done is not None:
                        self.on_oneshot_done()
                    return
                stop.wait(self.opts.sleep_interval or DEFAULTS["sleep_interval"])
        finally:
            if not self.opts.oneshot:
                self.remove_output()

    def remove_output(self) -> None:
        """Remove the output file (the koordlet must not report devices while no daemon runs)."""
        path = self.opts.prints_output_file
        if not path:
            return
        try:
            os.unlink(path)
            log.info("device infos removed path=%s", path)
        except FileNotFoundError:
            pass
        except OSError as err:
            log.warning("device infos not removed: %s", err)


def register(runtime: Any, options: RuntimeOptions[DeviceDaemonOptions]) -> DeviceDaemon:
    """Add the discovery loop to ``runtime``; with ``--oneshot`` the runtime stops after the first write."""
    opts = options.role_options
    if opts.no_timestamp:
        log.info("--no-timestamp has no effect: the device infos document carries no timestamp")
    log.info("koord-device-daemon node=%s config=%s", options.node_name, json.dumps(opts.effective()))
    daemon = DeviceDaemon(opts, on_oneshot_done=lambda: runtime.request_stop("oneshot"))
    runtime.add_runnable("device-discovery", daemon.run)
    runtime.add_ready_check("device-discovery", lambda: None if daemon.runs else "the first discovery has not finished")
    return daemon


def local_setup(context: LocalContext) -> LocalSetup:
    """Not run by ``koordinator local``: the node simulator already plays the device daemon (and the device
    plugin) for its fake GPUs, keeping each node's Device itself; a daemon there would find the fake
    NVIDIA PCI functions without NVML and report nothing."""
    from koordinator_roles import LocalSetup

    return LocalSetup(not_run="the node simulator acts as the device daemon (it keeps each node's Device)")
