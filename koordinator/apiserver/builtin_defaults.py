"""Defaulting of built-in kinds, as kube-apiserver applies it before validation and storage.

``apply_defaults(group, kind, obj)`` mutates ``obj`` in place: the scheme's ``SetDefaults_*``
functions (pod specs everywhere they are embedded, workloads, Services, ...), plus the few
things the real server adds on create outside the scheme that clients observe in every
stored object: a Pod's ``status.phase``/``status.qosClass`` and the DefaultTolerationSeconds
admission tolerations, a Namespace's ``kubernetes`` finalizer and ``Active`` phase.

It also canonicalises resource quantities (``0.5`` -> ``"500m"``), since the server stores
``Quantity.String()``, never the text it was sent. Quantities that do not parse are left
alone: ``validation.check_metadata_types`` rejects them before this runs.

Create-only behaviour is keyed off ``metadata.resourceVersion`` (absent on create, required
on update) unless the caller says which it is with ``create=``.
"""

from __future__ import annotations

import base64
import re
from typing import Any, Callable

from koordinator.apis import quantity as qty

Obj = dict[str, Any]

DEFAULT_TOLERATION_SECONDS = 300
_NOT_READY = "node.kubernetes.io/not-ready"
_UNREACHABLE = "node.kubernetes.io/unreachable"
_REPO_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPO_PATH_RE = re.compile(_REPO_COMPONENT + r"(?:/" + _REPO_COMPONENT + r")*")
_TAG_RE = re.compile(r"[\w][\w.-]{0,127}")


def _d(parent: Obj, key: str) -> Obj:
    """``parent[key]`` as a dict, created when absent (or null)."""
    value = parent.get(key)
    if not isinstance(value, dict):
        value = {}
        parent[key] = value
    return value


def _dicts(value: Any) -> list[Obj]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _set(obj: Obj, key: str, value: Any) -> None:
    if obj.get(key) is None:
        obj[key] = value


# ---------------------------------------------------------------------------------------
# Quantities
# ---------------------------------------------------------------------------------------


def _canonical_list(resources: Any) -> None:
    if not isinstance(resources, dict):
        return
    for name, raw in resources.items():
        try:
            resources[name] = qty.canonical(raw)
        except qty.QuantityError:
            pass


# ---------------------------------------------------------------------------------------
# Containers and pod specs
# ---------------------------------------------------------------------------------------


def _image_pull_policy(image: str) -> str:
    """``Always`` for ``:latest`` or untagged images, else ``IfNotPresent`` (SetDefaults_Container)."""
    name, _, digest = image.partition("@")
    first, slash, rest = name.partition("/")
    # Docker's splitDockerDomain: a first segment with '.', ':' or upper case is a registry.
    if slash and (any(c in first for c in ".:") or first == "localhost" or first.lower() != first):
        remainder = rest
    else:
        remainder = name
    repo, colon, tag = remainder.rpartition(":") if ":" in remainder else (remainder, "", "")
    if not _REPO_PATH_RE.fullmatch(repo) or (colon and not _TAG_RE.fullmatch(tag)):
        # An unparseable reference leaves Go with no tag at all.
        return "IfNotPresent"
    if not tag and not digest:
        tag = "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def _default_http_get(action: Any) -> None:
    if isinstance(action, dict):
        if not action.get("path"):
            action["path"] = "/"
        if not action.get("scheme"):
            action["scheme"] = "HTTP"


def _default_probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    for key, value in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1), ("failureThreshold", 3)):
        if not probe.get(key):
            probe[key] = value
    _default_http_get(probe.get("httpGet"))


def _default_container(ctr: Obj) -> None:
    if not ctr.get("imagePullPolicy"):
        ctr["imagePullPolicy"] = _image_pull_policy(ctr.get("image") if isinstance(ctr.get("image"), str) else "")
    if not ctr.get("terminationMessagePath"):
        ctr["terminationMessagePath"] = "/dev/termination-log"
    if not ctr.get("terminationMessagePolicy"):
        ctr["terminationMessagePolicy"] = "File"
    for port in _dicts(ctr.get("ports")):
        if not port.get("protocol"):
            port["protocol"] = "TCP"
    res = _d(ctr, "resources")
    _canonical_list(res.get("limits"))
    _canonical_list(res.get("requests"))
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        _default_probe(ctr.get(probe))
    lifecycle = ctr.get("lifecycle")
    if isinstance(lifecycle, dict):
        for hook in ("postStart", "preStop"):
            if isinstance(lifecycle.get(hook), dict):
                _default_http_get(lifecycle[hook].get("httpGet"))
    for env in _dicts(ctr.get("env")):
        value_from = env.get("valueFrom")
        if isinstance(value_from, dict) and isinstance(value_from.get("fieldRef"), dict):
            _set(value_from["fieldRef"], "apiVersion", "v1")
        if isinstance(value_from, dict) and isinstance(value_from.get("resourceFieldRef"), dict):
            ref = value_from["resourceFieldRef"]
            if ref.get("divisor") is not None:
                try:
                    ref["divisor"] = qty.canonical(ref["divisor"])
                except qty.QuantityError:
                    pass


_VOLUME_SOURCE_KEYS = (
    "hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret", "nfs", "iscsi",
    "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "downwardAPI", "fc",
    "azureFile", "configMap", "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "projected",
    "portworxVolume", "scaleIO", "storageos", "csi", "ephemeral", "image",
)
_DEFAULT_MODE = 0o644


def _default_volume(vol: Obj) -> None:
    if not any(vol.get(k) is not None for k in _VOLUME_SOURCE_KEYS):
        vol["emptyDir"] = {}
    for key in ("secret", "configMap", "downwardAPI", "projected"):
        if isinstance(vol.get(key), dict):
            _set(vol[key], "defaultMode", _DEFAULT_MODE)
    if isinstance(vol.get("hostPath"), dict):
        _set(vol["hostPath"], "type", "")
    if isinstance(vol.get("emptyDir"), dict) and vol["emptyDir"].get("sizeLimit") is not None:
        try:
            vol["emptyDir"]["sizeLimit"] = qty.canonical(vol["emptyDir"]["sizeLimit"])
        except qty.QuantityError:
            pass


def default_pod_spec(spec: Obj) -> None:
    """``SetDefaults_PodSpec`` and what it reaches (containers, ports, probes, volumes)."""
    for key, value in (("dnsPolicy", "ClusterFirst"), ("restartPolicy", "Always"),
                       ("terminationGracePeriodSeconds", 30), ("schedulerName", "default-scheduler")):
        if spec.get(key) in (None, ""):
            spec[key] = value
    _d(spec, "securityContext")
    for list_name in ("containers", "initContainers", "ephemeralContainers"):
        for ctr in _dicts(spec.get(list_name)):
            _default_container(ctr)
    for vol in _dicts(spec.get("volumes")):
        _default_volume(vol)
    _canonical_list(spec.get("overhead"))
    if isinstance(spec.get("resources"), dict):
        _canonical_list(spec["resources"].get("limits"))
        _canonical_list(spec["resources"].get("requests"))


def _default_pod_template(tmpl: Any) -> None:
    if isinstance(tmpl, dict):
        default_pod_spec(_d(tmpl, "spec"))


def _copy_limits_to_requests(containers: Any) -> None:
    for ctr in _dicts(containers):
        res = ctr.get("resources")
        if not isinstance(res, dict) or not isinstance(res.get("limits"), dict):
            continue
        requests = _d(res, "requests")
        for name, value in res["limits"].items():
            requests.setdefault(name, value)


def _default_pod_level_requests(spec: Obj) -> None:
    """Pod-level requests default to the containers' sum, or the pod-level limit."""
    res = spec.get("resources")
    if not isinstance(res, dict) or not isinstance(res.get("limits"), dict):
        return
    requests = _d(res, "requests")
    for name, limit in res["limits"].items():
        if name in requests or name not in ("cpu", "memory") and not name.startswith("hugepages-"):
            continue
        total = 0
        found = False
        for ctr in _dicts(spec.get("containers")):
            raw = ((ctr.get("resources") or {}).get("requests") or {}).get(name)
            if raw is not None:
                try:
                    total += qty.parse_quantity(raw)
                    found = True
                except qty.QuantityError:
                    pass
        requests[name] = qty.format_quantity(total, qty.quantity_format(limit)) if found else limit


def _is_positive(raw: Any) -> bool:
    try:
        return qty.parse_quantity(raw) > 0
    except qty.QuantityError:
        return False


def _add_qos(totals: dict[str, Any], resources: Any) -> set[str]:
    """Add positive cpu/memory amounts to ``totals``; return the names found."""
    found = set()
    for name, raw in (resources if isinstance(resources, dict) else {}).items():
        if name in ("cpu", "memory") and _is_positive(raw):
            found.add(name)
            totals[name] = totals.get(name, 0) + qty.parse_quantity(raw)
    return found


def pod_qos_class(pod: Obj) -> str:
    """``ComputePodQOS``: Guaranteed, Burstable or BestEffort from cpu/memory requests and limits."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    guaranteed = True
    pod_res = spec.get("resources")
    if isinstance(pod_res, dict):
        # Pod-level resources, when given, decide the class on their own.
        _add_qos(requests, pod_res.get("requests"))
        if pod_res.get("limits") and _add_qos(limits, pod_res.get("limits")) != {"cpu", "memory"}:
            guaranteed = False
    else:
        for ctr in _dicts(spec.get("containers")) + _dicts(spec.get("initContainers")):
            res = ctr.get("resources") if isinstance(ctr.get("resources"), dict) else {}
            _add_qos(requests, res.get("requests"))
            if _add_qos(limits, res.get("limits")) != {"cpu", "memory"}:
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(limits.get(name) == value for name, value in requests.items()) \
            and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def _default_tolerations(spec: Obj) -> None:
    """The DefaultTolerationSeconds admission plugin (pods, on create)."""
    tolerations = spec.get("tolerations")
    if not isinstance(tolerations, list):
        tolerations = []
    not_ready = unreachable = False
    for tol in _dicts(tolerations):
        key, effect = tol.get("key") or "", tol.get("effect") or ""
        if effect in ("", "NoExecute"):
            not_ready = not_ready or key in ("", _NOT_READY)
            unreachable = unreachable or key in ("", _UNREACHABLE)
    for present, key in ((not_ready, _NOT_READY), (unreachable, _UNREACHABLE)):
        if not present:
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})
    if tolerations:
        spec["tolerations"] = tolerations


def _default_pod(obj: Obj, create: bool) -> None:
    spec = _d(obj, "spec")
    # Pods only (not templates): limits stand in for missing requests.
    _copy_limits_to_requests(spec.get("containers"))
    _copy_limits_to_requests(spec.get("initContainers"))
    default_pod_spec(spec)
    _default_pod_level_requests(spec)
    _set(spec, "enableServiceLinks", True)
    if spec.get("hostNetwork") is True:
        for list_name in ("containers", "initContainers"):
            for ctr in _dicts(spec.get(list_name)):
                for port in _dicts(ctr.get("ports")):
                    if not port.get("hostPort"):
                        port["hostPort"] = port.get("containerPort")
    if create:
        _default_tolerations(spec)
        status = _d(obj, "status")
        _set(status, "phase", "Pending")
        _set(status, "qosClass", pod_qos_class(obj))


# ---------------------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------------------


def _default_deployment(obj: Obj, create: bool) -> None:
    spec = _d(obj, "spec")
    _set(spec, "replicas", 1)
    strategy = _d(spec, "strategy")
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = _d(strategy, "rollingUpdate")
        _set(rolling, "maxUnavailable", "25%")
        _set(rolling, "maxSurge", "25%")
    _set(spec, "revisionHistoryLimit", 10)
    _set(spec, "progressDeadlineSeconds", 600)
    _default_pod_template(spec.get("template"))


def _default_daemonset(obj: Obj, create: bool) -> None:
    spec = _d(obj, "spec")
    strategy = _d(spec, "updateStrategy")
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = _d(strategy, "rollingUpdate")
        _set(rolling, "maxUnavailable", 1)
        _set(rolling, "maxSurge", 0)
    _set(spec, "revisionHistoryLimit", 10)
    _default_pod_template(spec.get("template"))


def _default_replicaset(obj: Obj, create: bool) -> None:
    spec = _d(obj, "spec")
    _set(spec, "replicas", 1)
    _default_pod_template(spec.get("template"))


def _default_statefulset(obj: Obj, create: bool) -> None:
    spec = _d(obj, "spec")
    if not spec.get("podManagementPolicy"):
        spec["podManagementPolicy"] = "OrderedReady"
    strategy = _d(spec, "updateStrategy")
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
        _d(strategy, "rollingUpdate")
    if strategy["type"] == "RollingUpdate" and isinstance(strategy.get("rollingUpdate"), dict):
        _set(strategy["rollingUpdate"], "partition", 0)
    retention = _d(spec, "persistentVolumeClaimRetentionPolicy")
    if not retention.get("whenDeleted"):
        retention["whenDeleted"] = "Retain"
    if not retention.get("whenScaled"):
        retention["whenScaled"] = "Retain"
    _set(spec, "replicas", 1)
    _set(spec, "revisionHistoryLimit", 10)
    _default_pod_template(spec.get("template"))


def _default_job_spec(spec: Obj) -> None:
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    _set(spec, "parallelism", 1)
    _set(spec, "backoffLimit", 2**31 - 1 if spec.get("backoffLimitPerIndex") is not None else 6)
    _set(spec, "completionMode", "NonIndexed")
    _set(spec, "suspend", False)
    _set(spec, "podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") is not None else "TerminatingOrFailed")
    _default_pod_template(spec.get("template"))


def _default_job(obj: Obj, create: bool) -> None:
    spec = _d(obj, "spec")
    _default_job_spec(spec)
    md = _d(obj, "metadata")
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
    if isinstance(template_labels, dict) and template_labels and not md.get("labels"):
        md["labels"] = dict(template_labels)
    if create and md.get("uid") and not spec.get("manualSelector"):
        _generate_job_selector(obj, spec, md)
        # kube defaults the labels again when it reads the Job back, so a template without labels of
        # its own lends the Job the generated ones.
        generated = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
        if isinstance(generated, dict) and not md.get("labels"):
            md["labels"] = dict(generated)


# The labels kube-apiserver's Job strategy puts on the pod template, and the selector it selects by.
JOB_NAME_LABELS = ("job-name", "batch.kubernetes.io/job-name")
JOB_UID_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")


def _generate_job_selector(obj: Obj, spec: Obj, md: Obj) -> None:
    """``generateSelector``: label the template with the Job's name and uid (labels the user set win,
    and a conflict is validation's to report) and select ``batch.kubernetes.io/controller-uid``."""
    template = spec.get("template")
    if not isinstance(template, dict):
        return
    tmeta = _d(template, "metadata")
    labels = tmeta.get("labels") if isinstance(tmeta.get("labels"), dict) else {}
    for key in JOB_NAME_LABELS:
        labels.setdefault(key, str(md.get("name", "")))
    for key in JOB_UID_LABELS:
        labels.setdefault(key, str(md["uid"]))
    tmeta["labels"] = labels
    selector = spec.get("selector") if isinstance(spec.get("selector"), dict) else {}
    match = selector.get("matchLabels") if isinstance(selector.get("matchLabels"), dict) else {}
    match.setdefault(JOB_UID_LABELS[1], str(md["uid"]))
    selector["matchLabels"] = match
    spec["selector"] = selector


def _default_cronjob(obj: Obj, create: bool) -> None:
    spec = _d(obj, "spec")
    if not spec.get("concurrencyPolicy"):
        spec["concurrencyPolicy"] = "Allow"
    _set(spec, "suspend", False)
    _set(spec, "successfulJobsHistoryLimit", 3)
    _set(spec, "failedJobsHistoryLimit", 1)
    _default_pod_template(_d(_d(spec, "jobTemplate"), "spec").get("template"))


# ---------------------------------------------------------------------------------------
# Core and other kinds
# ---------------------------------------------------------------------------------------


def _default_service(obj: Obj, create: bool) -> None:
    spec = _d(obj, "spec")
    if not spec.get("sessionAffinity"):
        spec["sessionAffinity"] = "None"
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == "ClientIP":
        client_ip = (spec.get("sessionAffinityConfig") or {}).get("clientIP") or {}
        if client_ip.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}
    if not spec.get("type"):
        spec["type"] = "ClusterIP"
    for port in _dicts(spec.get("ports")):
        if not port.get("protocol"):
            port["protocol"] = "TCP"
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    stype = spec["type"]
    externally_accessible = stype in ("LoadBalancer", "NodePort") or (stype == "ClusterIP" and spec.get("externalIPs"))
    if externally_accessible and not spec.get("externalTrafficPolicy"):
        spec["externalTrafficPolicy"] = "Cluster"
    if spec.get("internalTrafficPolicy") is None and stype in ("ClusterIP", "NodePort", "LoadBalancer"):
        spec["internalTrafficPolicy"] = "Cluster"
    if stype == "LoadBalancer":
        _set(spec, "allocateLoadBalancerNodePorts", True)


def _default_namespace(obj: Obj, create: bool) -> None:
    md = _d(obj, "metadata")
    if md.get("name"):
        _d(md, "labels")["kubernetes.io/metadata.name"] = md["name"]
    if create:
        # Create only: the namespace controller removes it later and updates must not re-add it.
        spec = _d(obj, "spec")
        finalizers = spec.get("finalizers") if isinstance(spec.get("finalizers"), list) else []
        if "kubernetes" not in finalizers:
            spec["finalizers"] = finalizers + ["kubernetes"]
        _set(_d(obj, "status"), "phase", "Active")


def _default_node(obj: Obj, create: bool) -> None:
    if obj.get("spec") is None:
        obj["spec"] = {}  # Go's encoding of the NodeSpec struct, written even when empty
    status = obj.get("status")
    if not isinstance(status, dict):
        return
    _canonical_list(status.get("capacity"))
    _canonical_list(status.get("allocatable"))
    if status.get("allocatable") is None and isinstance(status.get("capacity"), dict):
        status["allocatable"] = dict(status["capacity"])


def _default_secret(obj: Obj, create: bool) -> None:
    if not obj.get("type"):
        obj["type"] = "Opaque"
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        # The v1 -> internal conversion folds stringData into data (stringData wins).
        data = _d(obj, "data")
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()


def _default_endpoints(obj: Obj, create: bool) -> None:
    for subset in _dicts(obj.get("subsets")):
        for port in _dicts(subset.get("ports")):
            if not port.get("protocol"):
                port["protocol"] = "TCP"


def _default_priority_class(obj: Obj, create: bool) -> None:
    if not obj.get("preemptionPolicy"):
        obj["preemptionPolicy"] = "PreemptLowerPriority"


def _default_binding(obj: Obj, create: bool) -> None:
    role_ref = obj.get("roleRef")
    if isinstance(role_ref, dict) and not role_ref.get("apiGroup"):
        role_ref["apiGroup"] = "rbac.authorization.k8s.io"
    for subject in _dicts(obj.get("subjects")):
        if not subject.get("apiGroup") and subject.get("kind") in ("User", "Group"):
            subject["apiGroup"] = "rbac.authorization.k8s.io"


def _default_webhooks(obj: Obj, mutating: bool) -> None:
    for hook in _dicts(obj.get("webhooks")):
        _set(hook, "failurePolicy", "Fail")
        _set(hook, "matchPolicy", "Equivalent")
        _set(hook, "namespaceSelector", {})
        _set(hook, "objectSelector", {})
        _set(hook, "timeoutSeconds", 10)
        if mutating:
            _set(hook, "reinvocationPolicy", "Never")
        for rule in _dicts(hook.get("rules")):
            _set(rule, "scope", "*")
        service = (hook.get("clientConfig") or {}).get("service") if isinstance(hook.get("clientConfig"), dict) else None
        if isinstance(service, dict):
            _set(service, "port", 443)


def _default_mutating_webhooks(obj: Obj, create: bool) -> None:
    _default_webhooks(obj, True)


def _default_validating_webhooks(obj: Obj, create: bool) -> None:
    _default_webhooks(obj, False)


Defaulter = Callable[[Obj, bool], None]

DEFAULTERS: dict[tuple[str, str], Defaulter] = {
    ("", "Pod"): _default_pod,
    ("", "Service"): _default_service,
    ("", "Namespace"): _default_namespace,
    ("", "Node"): _default_node,
    ("", "Secret"): _default_secret,
    ("", "Endpoints"): _default_endpoints,
    ("apps", "Deployment"): _default_deployment,
    ("apps", "DaemonSet"): _default_daemonset,
    ("apps", "ReplicaSet"): _default_replicaset,
    ("apps", "StatefulSet"): _default_statefulset,
    ("batch", "Job"): _default_job,
    ("batch", "CronJob"): _default_cronjob,
    ("scheduling.k8s.io", "PriorityClass"): _default_priority_class,
    ("rbac.authorization.k8s.io", "RoleBinding"): _default_binding,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): _default_binding,
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): _default_mutating_webhooks,
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): _default_validating_webhooks,
}


# ---------------------------------------------------------------------------------------
# Storage, quota, and the other kinds kube-scheduler and kube-controller-manager inform on
# ---------------------------------------------------------------------------------------


def _default_persistent_volume(obj: Obj, create: bool) -> None:
    spec = _d(obj, "spec")
    if not spec.get("persistentVolumeReclaimPolicy"):
        spec["persistentVolumeReclaimPolicy"] = "Retain"
    _set(spec, "volumeMode", "Filesystem")
    _canonical_list(spec.get("capacity"))
    if isinstance(spec.get("hostPath"), dict):
        _set(spec["hostPath"], "type", "")
    status = _d(obj, "status")
    if not status.get("phase"):
        status["phase"] = "Pending"


def _default_pvc_spec(spec: Obj) -> None:
    _set(spec, "volumeMode", "Filesystem")
    res = spec.get("resources")
    if isinstance(res, dict):
        _canonical_list(res.get("requests"))
        _canonical_list(res.get("limits"))


def _default_pvc(obj: Obj, create: bool) -> None:
    _default_pvc_spec(_d(obj, "spec"))
    status = _d(obj, "status")
    if not status.get("phase"):
        status["phase"] = "Pending"
    _canonical_list(status.get("capacity"))


def _default_replication_controller(obj: Obj, create: bool) -> None:
    """``SetDefaults_ReplicationController``: selector and labels come from the template's labels."""
    spec = _d(obj, "spec")
    template = spec.get("template")
    labels = ((template.get("metadata") or {}).get("labels") if isinstance(template, dict) else None)
    if isinstance(labels, dict):
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        md = _d(obj, "metadata")
        if not md.get("labels"):
            md["labels"] = dict(labels)
    _set(spec, "replicas", 1)
    _default_pod_template(template)


def _default_pod_template_kind(obj: Obj, create: bool) -> None:
    _default_pod_template(obj.get("template"))


def _default_resource_quota(obj: Obj, create: bool) -> None:
    _canonical_list(_d(obj, "spec").get("hard"))
    status = obj.get("status")
    if isinstance(status, dict):
        _canonical_list(status.get("hard"))
        _canonical_list(status.get("used"))


def _default_limit_range(obj: Obj, create: bool) -> None:
    """``SetDefaults_LimitRangeItem``: a container's default limit is its max, its default request the
    default limit, else the min."""
    for item in _dicts(_d(obj, "spec").get("limits")):
        for part in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
            _canonical_list(item.get(part))
        if item.get("type") != "Container":
            continue
        default, request = _d(item, "default"), _d(item, "defaultRequest")
        for name, value in (item.get("max") or {}).items():
            default.setdefault(name, value)
        for name, value in default.items():
            request.setdefault(name, value)
        for name, value in (item.get("min") or {}).items():
            request.setdefault(name, value)


def _default_storage_class(obj: Obj, create: bool) -> None:
    if not obj.get("reclaimPolicy"):
        obj["reclaimPolicy"] = "Delete"
    if not obj.get("volumeBindingMode"):
        obj["volumeBindingMode"] = "Immediate"


def _default_csi_driver(obj: Obj, create: bool) -> None:
    spec = _d(obj, "spec")
    for key, value in (("attachRequired", True), ("podInfoOnMount", False), ("requiresRepublish", False),
                       ("storageCapacity", False), ("seLinuxMount", False),
                       ("fsGroupPolicy", "ReadWriteOnceWithFSType")):
        _set(spec, key, value)
    if not spec.get("volumeLifecycleModes"):
        spec["volumeLifecycleModes"] = ["Persistent"]


def _default_csi_storage_capacity(obj: Obj, create: bool) -> None:
    for key in ("capacity", "maximumVolumeSize"):
        if obj.get(key) is not None:
            try:
                obj[key] = qty.canonical(obj[key])
            except qty.QuantityError:
                pass


def _default_exact_request(req: Obj) -> None:
    if not req.get("allocationMode"):
        req["allocationMode"] = "ExactCount"
    if req["allocationMode"] == "ExactCount" and not req.get("count"):
        req["count"] = 1
    for tol in _dicts(req.get("tolerations")):
        if not tol.get("operator"):
            tol["operator"] = "Equal"


def default_device_claim(spec: Any) -> None:
    """resource.k8s.io/v1 ``SetDefaults_ExactDeviceRequest``/``SetDefaults_DeviceSubRequest``."""
    if not isinstance(spec, dict):
        return
    for req in _dicts((spec.get("devices") or {}).get("requests") if isinstance(spec.get("devices"), dict) else None):
        if isinstance(req.get("exactly"), dict):
            _default_exact_request(req["exactly"])
        for sub in _dicts(req.get("firstAvailable")):
            _default_exact_request(sub)


def _default_resource_claim(obj: Obj, create: bool) -> None:
    default_device_claim(obj.get("spec"))


def _default_resource_claim_template(obj: Obj, create: bool) -> None:
    template = obj.get("spec")
    if isinstance(template, dict):
        default_device_claim(template.get("spec"))


def _default_endpoint_slice(obj: Obj, create: bool) -> None:
    for port in _dicts(obj.get("ports")):
        _set(port, "name", "")
        _set(port, "protocol", "TCP")


_HPA_SCALE_UP_POLICIES = [{"type": "Pods", "value": 4, "periodSeconds": 15},
                          {"type": "Percent", "value": 100, "periodSeconds": 15}]
_HPA_SCALE_DOWN_POLICIES = [{"type": "Percent", "value": 100, "periodSeconds": 15}]


def _default_hpa_rules(rules: Any, window: int, policies: list[Obj]) -> Obj:
    """``GenerateHPAScaleUpRules``/``GenerateHPAScaleDownRules``: nil fields take the defaults."""
    rules = dict(rules) if isinstance(rules, dict) else {}
    _set(rules, "stabilizationWindowSeconds", window)
    _set(rules, "selectPolicy", "Max")
    if not rules.get("policies"):
        rules["policies"] = [dict(p) for p in policies]
    return rules


def _default_hpa(obj: Obj, create: bool) -> None:
    spec = _d(obj, "spec")
    _set(spec, "minReplicas", 1)
    if obj.get("apiVersion") == "autoscaling/v1":
        # The CPU default of v1 is applied by its conversion to the stored (v2) form.
        return
    if not spec.get("metrics"):
        spec["metrics"] = [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    for metric in _dicts(spec.get("metrics")):
        for source in ("resource", "containerResource", "pods", "object", "external"):
            target = (metric.get(source) or {}).get("target") if isinstance(metric.get(source), dict) else None
            if isinstance(target, dict):
                for key in ("value", "averageValue"):
                    if target.get(key) is not None:
                        try:
                            target[key] = qty.canonical(target[key])
                        except qty.QuantityError:
                            pass
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        behavior["scaleUp"] = _default_hpa_rules(behavior.get("scaleUp"), 0, _HPA_SCALE_UP_POLICIES)
        behavior["scaleDown"] = _default_hpa_rules(behavior.get("scaleDown"), 300, _HPA_SCALE_DOWN_POLICIES)


def _default_network_policy(obj: Obj, create: bool) -> None:
    spec = _d(obj, "spec")
    for direction in ("ingress", "egress"):
        for rule in _dicts(spec.get(direction)):
            for port in _dicts(rule.get("ports")):
                _set(port, "protocol", "TCP")
    if not spec.get("policyTypes"):
        spec["policyTypes"] = ["Ingress"] + (["Egress"] if spec.get("egress") else [])


def _default_match_resources(match: Any) -> None:
    if not isinstance(match, dict):
        return
    _set(match, "matchPolicy", "Equivalent")
    _set(match, "namespaceSelector", {})
    _set(match, "objectSelector", {})
    for key in ("resourceRules", "excludeResourceRules"):
        for rule in _dicts(match.get(key)):
            _set(rule, "scope", "*")


def _default_admission_policy(obj: Obj, create: bool) -> None:
    spec = _d(obj, "spec")
    _set(spec, "failurePolicy", "Fail")
    _default_match_resources(spec.get("matchConstraints"))


def _default_admission_policy_binding(obj: Obj, create: bool) -> None:
    _default_match_resources(_d(obj, "spec").get("matchResources"))


DEFAULTERS.update({
    ("", "PersistentVolume"): _default_persistent_volume,
    ("", "PersistentVolumeClaim"): _default_pvc,
    ("", "ReplicationController"): _default_replication_controller,
    ("", "PodTemplate"): _default_pod_template_kind,
    ("", "ResourceQuota"): _default_resource_quota,
    ("", "LimitRange"): _default_limit_range,
    ("storage.k8s.io", "StorageClass"): _default_storage_class,
    ("storage.k8s.io", "CSIDriver"): _default_csi_driver,
    ("storage.k8s.io", "CSIStorageCapacity"): _default_csi_storage_capacity,
    ("resource.k8s.io", "ResourceClaim"): _default_resource_claim,
    ("resource.k8s.io", "ResourceClaimTemplate"): _default_resource_claim_template,
    ("discovery.k8s.io", "EndpointSlice"): _default_endpoint_slice,
    ("autoscaling", "HorizontalPodAutoscaler"): _default_hpa,
    ("networking.k8s.io", "NetworkPolicy"): _default_network_policy,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): _default_admission_policy,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): _default_admission_policy_binding,
})


def apply_defaults(group: str, kind: str, obj: Obj, create: bool | None = None) -> None:
    """Default ``obj`` (a built-in ``group``/``kind``) in place, as the real server does.

    ``create`` selects the create-only additions (pod status and default tolerations,
    namespace finalizer and phase); when None it is inferred from the absence of
    ``metadata.resourceVersion``. Kinds without defaults are left untouched.
    """
    defaulter = DEFAULTERS.get((group, kind))
    if defaulter is None or not isinstance(obj, dict):
        return
    if create is None:
        md = obj.get("metadata")
        create = not (isinstance(md, dict) and md.get("resourceVersion"))
    defaulter(obj, create)
