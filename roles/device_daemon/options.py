"""koord-device-daemon's own flags (:func:`koordinator_roles.device_daemon.add_flags`) as one typed value."""

from __future__ import annotations

from dataclasses import dataclass

from koordinator.devices.xpu import DEFAULT_FILE

DEFAULT_SLEEP_INTERVAL = 900.0  # 15m, Koordinator's default


@dataclass
class DeviceDaemonOptions:
    """The daemon's flags, by ``dest``. A flag left out is None until ``check_options`` fills it from its
    environment variable (Koordinator's ``KDD_*``), else from the default."""

    oneshot: bool | None = None
    no_timestamp: bool | None = None
    #: Seconds between two discoveries.
    sleep_interval: float | None = None
    #: Empty: the document is not written (Koordinator's no-op writer).
    prints_output_file: str | None = None
    #: The host's /sys (this build's flag; Koordinator reads /sys through ``chroot /hostfs``).
    sys_root: str = "/sys"
    #: Koordinator's ``--config-file``; None: $KDD_CONFIG_FILE, $CONFIG_FILE.
    config_file: str | None = None

    def effective(self) -> dict[str, object]:
        """The effective configuration as Koordinator logs it (``flags.kdd``)."""
        from koordinator.runtime.options import format_duration

        return {"version": "v1", "flags": {"kdd": {"oneshot": bool(self.oneshot),
                                                   "sleepInterval": format_duration(self.sleep_interval or 0),
                                                   "printsOutputFile": self.prints_output_file}}}


#: flag dest -> environment variables read when the flag is not given (first set one wins).
ENV = {"oneshot": ("KDD_ONESHOT",), "no_timestamp": ("KDD_NO_TIMESTAMP",),
       "sleep_interval": ("KDD_SLEEP_INTERVAL",),
       "prints_output_file": ("KDD_PRINTS_OUTPUT_FILE", "PRINTS_OUTPUT_FILE")}
CONFIG_ENV = ("KDD_CONFIG_FILE", "CONFIG_FILE")
#: flag dest -> key under ``flags.kdd`` of the configuration file.
CONFIG_KEYS = {"oneshot": "oneshot", "no_timestamp": "noTimestamp", "sleep_interval": "sleepInterval",
               "prints_output_file": "printsOutputFile"}
DEFAULTS = {"oneshot": False, "no_timestamp": False, "sleep_interval": DEFAULT_SLEEP_INTERVAL,
            "prints_output_file": DEFAULT_FILE}
