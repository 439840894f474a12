"""LowNodeLoad balance plugin (koord-descheduler): evicts pods from nodes whose NodeMetric usage stays above
the high thresholds, as far as the nodes under the low thresholds can take them (reference §1.6)."""

from .plugin import NAME, LowNodeLoad, new

__all__ = ["NAME", "LowNodeLoad", "new"]
