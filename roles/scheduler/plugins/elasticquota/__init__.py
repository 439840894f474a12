"""Koordinator's ElasticQuota plugin: hierarchical elastic quotas (min, max, borrowing by weight) in the scheduler."""

from koordinator_roles.scheduler.plugins.elasticquota.plugin import NAME, ElasticQuota, new

__all__ = ["NAME", "ElasticQuota", "new"]
