"""CoschedulingArgs: Koordinator's defaults and validation (``validation_pluginargs.go``), errors naming the field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from koordinator.apis.goduration import parse_go_duration
from koordinator.apis.pluginargs import bool_arg

ONLY_WAITING = "only-waiting"
WAITING_AND_RUNNING = "waiting-and-running"
ONCE_SATISFIED = "once-satisfied"
MATCH_POLICIES = (ONLY_WAITING, WAITING_AND_RUNNING, ONCE_SATISFIED)

DEFAULT_TIMEOUT = 600.0


@dataclass
class CoschedulingArgs:
    """Validated, defaulted CoschedulingArgs; ``default_timeout`` in seconds."""

    default_timeout: float = DEFAULT_TIMEOUT
    controller_workers: int = 1
    skip_check_schedule_cycle: bool = False  # accepted for compatibility, read nowhere (as in Koordinator)
    enable_preemption: bool = False
    aware_network_topology: bool = False
    default_match_policy: str = ONCE_SATISFIED


def _seconds(key: str, value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{key}: Invalid value: {value!r}: must be a duration such as \"600s\"")
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return parse_go_duration(str(value)) / 1e9
    except ValueError:
        raise ValueError(f"{key}: Invalid value: {value!r}: must be a duration such as \"600s\"") from None


def parse_args(args: Mapping[str, Any] | None) -> CoschedulingArgs:
    """Apply the defaults and validate; ValueError names the field (``defaultTimeout: Invalid value: ...``)."""
    args = args or {}
    out = CoschedulingArgs()
    timeout = args.get("defaultTimeout")
    if timeout is not None:
        out.default_timeout = _seconds("defaultTimeout", timeout)
        if out.default_timeout < 0:
            raise ValueError(f"defaultTimeout: Invalid value: {timeout!r}: defaultTimeout should be a "
                             "non-negative value")
    workers = args.get("controllerWorkers")
    if workers is not None:
        if isinstance(workers, bool) or not isinstance(workers, int):
            raise ValueError(f"controllerWorkers: Invalid value: {workers!r}: must be an integer")
        if workers < 1:
            raise ValueError(f"controllerWorkers: Invalid value: {workers}: controllerWorkers should be a "
                             "positive value")
        out.controller_workers = workers
    out.skip_check_schedule_cycle = bool_arg(args, "skipCheckScheduleCycle", False)
    out.enable_preemption = bool_arg(args, "enablePreemption", False)
    out.aware_network_topology = bool_arg(args, "awareNetworkTopology", False)
    # Not built: refusing them beats silently scheduling differently from what the configuration asks.
    if out.enable_preemption:
        raise ValueError("enablePreemption: Unsupported value: true: job-level (gang) preemption is not "
                         "implemented in this build")
    if out.aware_network_topology:
        raise ValueError("awareNetworkTopology: Unsupported value: true: network-topology-aware gang placement "
                         "is not implemented in this build")
    policy = args.get("defaultMatchPolicy")
    if policy is not None and policy != "":
        if policy not in MATCH_POLICIES:
            raise ValueError(f"defaultMatchPolicy: Unsupported value: {policy!r}: supported values: "
                             + ", ".join(f'"{p}"' for p in MATCH_POLICIES))
        out.default_match_policy = policy
    return out
