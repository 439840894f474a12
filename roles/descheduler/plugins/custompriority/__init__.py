"""CustomPriority balance plugin (koord-descheduler): moves pods from expensive node pools to cheaper ones,
pod by pod (BestEffort) or whole nodes at a time (DrainNode), reference §1.8."""

from .plugin import NAME, CustomPriority, new

__all__ = ["NAME", "CustomPriority", "new"]
