"""``koordinator console``: a live terminal view of a node or of the whole cluster.

- :mod:`.sources`: what a node holds locally — ``/proc`` (live CPU and memory), the koordlet's cgroup tree
  (the BE cpuset and quota in force) and its ``--run-dir`` (the executor's audit log, the hook server's
  registration);
- :mod:`.model`: one :class:`~.model.NodeSnapshot` / :class:`~.model.ClusterSnapshot` per refresh, read from
  the API (through :class:`koordinator.runtime.client.Client` only) and the node-local sources;
- :mod:`.render`: the snapshots as ``rich`` tables (the live view, and the plain ``--once`` text);
- :mod:`.keys`: the keyboard in raw mode (``q``, ``/``, ``tab``) on a thread of its own;
- :mod:`.command`: the ``console`` subcommand (flags, the live loop, ``--once``).

It imports no role package: what it knows of the koordlet's files (``audit/audit.log``,
``hookserver.d/``) is their documented layout, read as plain files.
"""
