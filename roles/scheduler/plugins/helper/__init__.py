"""Code shared by several plugins (kube-scheduler's ``framework/plugins/helper``).

Plugins import from here and never from one another (an import-linter contract in pyproject.toml);
these modules import no plugin.
"""
