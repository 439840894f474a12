"""Koordinator's LoadAwareScheduling plugin: thresholds on real node usage, scores favouring idle nodes."""

from koordinator_roles.scheduler.plugins.loadaware.plugin import NAME, LoadAwareScheduling, new

__all__ = ["NAME", "LoadAwareScheduling", "new"]
