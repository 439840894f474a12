"""ScaleDownBinPack balance plugin (koord-descheduler): ranks pods so that scaling workloads down empties the
least-packed nodes first — as ``controller.kubernetes.io/pod-deletion-cost`` (CalculateOnly) or by evicting
them (EvictDirectly) (reference §1.8)."""

from .args import ScaleDownBinPackArgs, parse_args
from .plugin import NAME, ScaleDownBinPack, new

__all__ = ["NAME", "ScaleDownBinPack", "ScaleDownBinPackArgs", "new", "parse_args"]
