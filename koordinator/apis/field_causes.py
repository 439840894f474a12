"""Field errors as Status causes (``details.causes`` entries), the shape kube-apiserver reports them in.

Shared by the structural-schema engine (:mod:`koordinator.apis.crdschema`) and the embedded API
server's errors, so both word a cause the same way.
"""

from __future__ import annotations


def cause(reason: str, field: str, message: str) -> dict[str, str]:
    """One ``details.causes`` entry: ``message`` is what follows ``<field>: `` in the text."""
    return {"reason": reason, "message": message, "field": field}


def required(field: str, detail: str = "") -> dict[str, str]:
    """A ``FieldValueRequired`` cause (``Required value``, with ``detail`` after a colon when given)."""
    return cause("FieldValueRequired", field, "Required value" + (f": {detail}" if detail else ""))
