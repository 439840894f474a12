"""Gang (Coscheduling) labels and annotations, as Koordinator and scheduler-plugins name them: read by the
scheduler's Coscheduling plugin, checked by the manager's pod webhook."""

from __future__ import annotations

LABEL_POD_GROUP = "pod-group.scheduling.sigs.k8s.io"
LABEL_LIGHTWEIGHT_NAME = "pod-group.scheduling.sigs.k8s.io/name"
LABEL_LIGHTWEIGHT_MIN = "pod-group.scheduling.sigs.k8s.io/min-available"
LABEL_MATCH_POLICY = "pod-group.scheduling.sigs.k8s.io/match-policy"
GANG_PREFIX = "gang.scheduling.koordinator.sh/"
ANNOTATION_NAME = GANG_PREFIX + "name"
ANNOTATION_MIN = GANG_PREFIX + "min-available"
ANNOTATION_TOTAL = GANG_PREFIX + "total-number"
ANNOTATION_MODE = GANG_PREFIX + "mode"
ANNOTATION_WAITING_TIME = GANG_PREFIX + "waiting-time"
ANNOTATION_GROUPS = GANG_PREFIX + "groups"
ANNOTATION_MATCH_POLICY = GANG_PREFIX + "match-policy"
