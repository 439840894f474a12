"""Score normalisation shared by Score plugins (kube's ``helper.DefaultNormalizeScore``)."""

from __future__ import annotations

import numpy as np

from koordinator_roles.scheduler.framework.interfaces import MAX_NODE_SCORE


def default_normalize_score(scores: np.ndarray, reverse: bool, max_priority: int = MAX_NODE_SCORE) -> None:
    """kube's ``helper.DefaultNormalizeScore``, in place: scale to ``max_priority``, optionally reversed."""
    if not len(scores):
        return
    max_count = int(scores.max())
    if max_count <= 0:
        if reverse:
            scores[:] = max_priority
        return
    scaled = max_priority * scores // max_count
    scores[:] = max_priority - scaled if reverse else scaled
