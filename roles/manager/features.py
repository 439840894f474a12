"""koord-manager's feature gates: Koordinator's names and defaults (``pkg/features/features.go``).

``--feature-gates`` is checked against this table at start: an unknown name is an error naming it,
as a Kubernetes component says "unrecognized feature gate". Gates listed in :data:`UNSUPPORTED`
exist in Koordinator but this build does not implement what they switch on: turning one on is
refused with that reason rather than silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping

# name -> default
GATES: dict[str, bool] = {
    "PodMutatingWebhook": True,
    "PodValidatingWebhook": True,
    "ElasticQuotaMutatingWebhook": True,
    "ElasticQuotaValidatingWebhook": True,
    "WebhookFramework": True,
    "NodeMutatingWebhook": False,
    "NodeValidatingWebhook": False,
    "ConfigMapValidatingWebhook": False,
    "ReservationMutatingWebhook": False,
    "ColocationProfileSkipMutatingResources": False,
    "ColocationProfileSkipValidatingPriority": False,
    "MultiQuotaTree": False,
    "ElasticQuotaIgnorePodOverhead": False,
    "ElasticQuotaGuaranteeUsage": False,
    "ElasticQuotaEnableUpdateResourceKey": False,
    "ElasticQuotaEvaluationTransformPod": False,
    "DisableDefaultQuota": False,
    "SupportParentQuotaSubmitPod": False,
    "EnableQuotaAdmission": False,
    "EnableQuotaAdmissionOnUpdate": False,
    "EnableSyncGPUSharedResource": False,
    "ColocationProfileController": False,
    "ValidatePodDeviceResource": False,
    "EnablePodEnhancedValidator": False,
    "DisableExtendedResourceSpec": False,
    "DisableDeviceResourceSpec": False,
    "BindingAdmissionWebhook": False,
}

# Older spellings Koordinator's documentation uses for the two quota webhook gates.
ALIASES = {
    "ElasticMutatingWebhook": "ElasticQuotaMutatingWebhook",
    "ElasticValidatingWebhook": "ElasticQuotaValidatingWebhook",
}

UNSUPPORTED: dict[str, str] = {
    "NodeMutatingWebhook": "the /mutate-node-status webhook is not implemented in this build",
    "NodeValidatingWebhook": "the /validate-node webhook is not implemented in this build",
    "BindingAdmissionWebhook": "the /validate-pod-binding webhook is not implemented in this build",
    "MultiQuotaTree": "multiple quota trees are not implemented in this build",
    "ElasticQuotaGuaranteeUsage": "guaranteed quota usage is not implemented in this build",
    "EnableQuotaAdmission": "quota admission is not implemented in this build",
    "EnableQuotaAdmissionOnUpdate": "quota admission is not implemented in this build",
    "ColocationProfileController": "the colocationprofile controller is not implemented in this build",
    "ValidatePodDeviceResource": "device resource validation is not implemented in this build",
    "EnablePodEnhancedValidator": "the enhanced pod validator is not implemented in this build",
}


def resolve(requested: Mapping[str, bool]) -> dict[str, bool]:
    """Every gate's value after ``--feature-gates``; raises ValueError naming a bad gate."""
    gates = dict(GATES)
    for name, value in requested.items():
        canonical = ALIASES.get(name, name)
        if canonical not in GATES:
            raise ValueError(f"--feature-gates: unrecognized feature gate: {name} "
                             f"(koord-manager gates: {', '.join(sorted(GATES))})")
        if value and canonical in UNSUPPORTED:
            raise ValueError(f"--feature-gates: {name}=true is not supported: {UNSUPPORTED[canonical]}")
        gates[canonical] = value
    return gates
