"""koord-scheduler's own flags (:func:`koordinator_roles.scheduler.add_flags`) as one typed value."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SchedulerOptions:
    """The scheduler's flags, by ``dest``; ``options.role_options`` of a scheduler's ``RuntimeOptions``."""

    #: Log the top N nodes' scores of every scheduled pod; 0: off.
    debug_scores: int
    #: Not a flag: the ``--config`` configuration (or the default one) that ``check_options`` loaded and
    #: checked, for ``register`` (None until then: ``register`` loads it itself).
    configuration: Any = field(default=None, repr=False, compare=False)
