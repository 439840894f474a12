"""Peak prediction of the koordlet (reference A.9): decaying histograms of usage per pod, per
priority class and for the system, giving the prod reclaimable resources and the prod peak that the
NodeMetric reporter writes as ``prodReclaimableMetric`` / ``prodPeakMetric``."""

from koordinator_roles.koordlet.prediction.predictor import PeakPredictor
from koordinator_roles.koordlet.prediction.reclaimable import PredictionError

__all__ = ["PeakPredictor", "PredictionError"]
