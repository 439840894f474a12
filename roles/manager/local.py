"""The manager in ``koordinator local``: its webhooks routed to it as a cluster install routes them.

A cluster install (``manifests/``) has the ``koordinator-webhook-service`` Service in front of the
manager's pods and the two webhook configurations of ``manifests/webhooks.yaml``. ``local`` has no
pods and no kube-proxy: the embedded API server resolves the Service through its Endpoints, so the
Endpoints point at the loopback port the manager is told to serve its webhooks on.
"""

from __future__ import annotations

from typing import Any

from koordinator_roles import LocalContext, LocalSetup

#: Under ``local``'s data directory: the manager's serving certificate (kept across restarts).
CERT_DIR = "webhook-certs"


def local_setup(context: LocalContext) -> LocalSetup:
    """The manager's part of ``koordinator local`` (the role contract, :mod:`roles`): route the
    webhooks to a free loopback port and tell the manager to serve them there."""
    port = context.free_port()
    ensure_webhooks(context.client, port)
    return LocalSetup(
        flags=["--webhook-host", "127.0.0.1", "--webhook-port", str(port),
               "--webhook-cert-dir", str(context.data_dir / CERT_DIR)],
        # As the install's Deployment sets it: where the certificate Secret and the Lease live.
        env={"POD_NAMESPACE": context.namespace})


def ensure_webhooks(client: Any, port: int) -> None:
    """Route the manager's admission webhooks to 127.0.0.1:``port``, as a cluster routes them to its pods.

    The embedded API server resolves ``koordinator-webhook-service`` through its Endpoints (there
    is no kube-proxy), so the webhook configurations are the same objects as in ``manifests/``; the
    manager patches their ``caBundle`` once it has its certificate.
    """
    from koordinator.runtime.errors import AlreadyExists
    from koordinator_roles.manager import features
    from koordinator_roles.manager.webhook_configuration import SERVICE_NAME, SERVICE_NAMESPACE, webhook_configurations

    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": SERVICE_NAME, "namespace": SERVICE_NAMESPACE},
               "spec": {"ports": [{"port": 443, "targetPort": port, "protocol": "TCP"}],
                        "selector": {"koord-app": "koord-manager"}}}
    endpoints = {"apiVersion": "v1", "kind": "Endpoints",
                 "metadata": {"name": SERVICE_NAME, "namespace": SERVICE_NAMESPACE},
                 "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": port, "protocol": "TCP"}]}]}
    for obj in (service, endpoints):
        try:
            client.create(obj)
        except AlreadyExists:
            # A restart picks a new port: point the existing objects at it.
            current = client.get(obj["kind"], SERVICE_NAME, SERVICE_NAMESPACE)
            for k in ("spec", "subsets"):
                if k in obj:
                    current[k] = obj[k]
            client.update(current)
    for config in webhook_configurations(features.GATES):
        try:
            client.create(config)
        except AlreadyExists:
            current = client.get(config["kind"], config["metadata"]["name"])
            # Keep the caBundle the manager injected; take everything else from this build.
            bundles = {w["name"]: w.get("clientConfig", {}).get("caBundle") for w in current.get("webhooks") or []}
            for w in config["webhooks"]:
                if bundles.get(w["name"]):
                    w["clientConfig"]["caBundle"] = bundles[w["name"]]
            current["webhooks"] = config["webhooks"]
            client.update(current)
