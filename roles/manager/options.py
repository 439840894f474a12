"""koord-manager's own flags (:func:`koordinator_roles.manager.add_flags`) as one typed value."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ManagerOptions:
    """The manager's flags, by ``dest``; ``options.role_options`` of a manager's ``RuntimeOptions``.

    ``controllers`` and ``noderesource_plugins`` stay as written: :func:`koordinator_roles.manager.enabled_controllers`
    and :func:`koordinator_roles.manager.noderesource_plugins` read them, and refuse a bad one naming the flag.
    """

    controllers: str
    slo_config_name: str
    config_namespace: str
    #: 0: no webhook server.
    webhook_port: int
    #: Empty: every interface.
    webhook_host: str
    webhook_cert_dir: str
    node_strategy_name_need_check: bool
    noderesource_plugins: str
