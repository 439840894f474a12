"""koord-descheduler's own flags (:func:`koordinator_roles.descheduler.add_flags`) as one typed value."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class DeschedulerOptions:
    """The descheduler's flags, by ``dest``; ``options.role_options`` of a descheduler's ``RuntimeOptions``."""

    #: Write the effective configuration (defaulted, profiles completed) as YAML to this file and exit 0.
    write_config_to: str | None = None
    #: Not a flag: the configuration ``check_options`` loaded and checked, for ``register``.
    configuration: Any = field(default=None, repr=False, compare=False)
