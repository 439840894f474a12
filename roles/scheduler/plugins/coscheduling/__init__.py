"""Koordinator's Coscheduling plugin: gang scheduling (PodGroup CRs and gang annotations) and the PodGroup
status controller."""

from koordinator_roles.scheduler.plugins.coscheduling.plugin import NAME, Coscheduling, new

__all__ = ["NAME", "Coscheduling", "new"]
