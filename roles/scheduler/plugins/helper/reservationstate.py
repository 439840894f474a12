"""What the Reservation plugin shares with plugins that hold finer-grained resources (NodeNUMAResource, DeviceShare)
within a cycle: the reservation nominated for the pod on a node (Koordinator's ``GetNominatedReservation``).

The Reservation plugin writes its per-pod state under :data:`STATE_KEY`; that state has ``nominated``
(node name -> the nominated reservation, with ``uid`` and ``policy``). Read through
:func:`nominated_reservation` so that no plugin imports another.
"""

from __future__ import annotations

from typing import Any

from koordinator_roles.scheduler.framework.status import CycleState

STATE_KEY = "PreFilterReservation"


def nominated_reservation(state: CycleState, node_name: str) -> Any | None:
    """The reservation nominated for the cycle's pod on ``node_name`` (None: none, or no Reservation plugin)."""
    st = state.read(STATE_KEY)
    return (getattr(st, "nominated", None) or {}).get(node_name)
