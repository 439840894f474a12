"""The embedded, SQLite-backed, Kubernetes-compatible API server."""
