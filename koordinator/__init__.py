"""Koordinator in Python: the shared runtime, the domain model and the embedded API server."""

__version__ = "0.1.0"
