"""The built-in kinds kube-scheduler and kube-controller-manager inform on, served like kube-apiserver.

Each kind is listed and watched through the official ``kubernetes`` client's typed API, shown by
``kubectl get``, and round-trips a representative object; invalid objects are refused with 422
naming the field and change nothing stored; kube-apiserver's defaults are applied. The
events.k8s.io/v1 and autoscaling/v1 views convert to and from the stored core/v1 Event and
autoscaling/v2 HorizontalPodAutoscaler.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from typing import Any, Callable

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from tests.test_apiserver_protobuf import PB, envelope, f, meta, msg


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    api: str  # the kubernetes client API class
    list_fn: str  # its list method (namespaced ones take the namespace)
    sample: Callable[[str, str], dict]  # a valid object, given a unique name and the namespace

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str, name: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced:
            base += f"/namespaces/{namespace}"
        return f"{base}/{self.plural}" + (f"/{name}" if name else "")

    @property
    def resource(self) -> str:
        return f"{self.plural}.{self.version}.{self.group}" if self.group else self.plural


def _obj(api_version: str, kind: str, name: str, **body: Any) -> dict:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, **body}


_TEMPLATE = {"metadata": {"labels": {"app": "web"}},
             "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}
_CLAIM_SPEC = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}


def _csr_request() -> str:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    csr = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "system:node:n1")])).sign(key, hashes.SHA256())
    return base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode()


# Every group/version/resource kube-scheduler 1.36 and kube-controller-manager 1.36 list and watch that
# this change added, with where the informer comes from (kubernetes/kubernetes):
KINDS = [
    # scheduler: VolumeBinding/VolumeZone/NodeVolumeLimits plugins (pkg/scheduler/eventhandlers.go
    # fwk.PersistentVolume); kcm: persistentvolume-binder, attachdetach, pv-protection controllers.
    Kind("", "v1", "persistentvolumes", "PersistentVolume", False, "CoreV1Api", "list_persistent_volume",
         lambda n, ns: _obj("v1", "PersistentVolume", n, spec={
             "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"}})),
    # scheduler: VolumeBinding, VolumeRestrictions (fwk.PersistentVolumeClaim); kcm: pv-binder,
    # pvc-protection, ephemeral-volume, resourcequota.
    Kind("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, "CoreV1Api",
         "list_namespaced_persistent_volume_claim",
         lambda n, ns: _obj("v1", "PersistentVolumeClaim", n, spec={
             "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}})),
    # scheduler: PodTopologySpread default constraints (setListers); kcm: replicationcontroller, disruption.
    Kind("", "v1", "replicationcontrollers", "ReplicationController", True, "CoreV1Api",
         "list_namespaced_replication_controller",
         lambda n, ns: _obj("v1", "ReplicationController", n, spec={"replicas": 2, "template": _TEMPLATE})),
    # kcm: resourcequota controller.
    Kind("", "v1", "resourcequotas", "ResourceQuota", True, "CoreV1Api", "list_namespaced_resource_quota",
         lambda n, ns: _obj("v1", "ResourceQuota", n, spec={"hard": {"pods": "10", "requests.cpu": "4"}})),
    # kcm: garbage collector / resourcequota metadata informers (every listable resource).
    Kind("", "v1", "limitranges", "LimitRange", True, "CoreV1Api", "list_namespaced_limit_range",
         lambda n, ns: _obj("v1", "LimitRange", n, spec={"limits": [{"type": "Container", "max": {"cpu": "2"}}]})),
    Kind("", "v1", "podtemplates", "PodTemplate", True, "CoreV1Api", "list_namespaced_pod_template",
         lambda n, ns: _obj("v1", "PodTemplate", n, template=_TEMPLATE)),
    # scheduler: fwk.StorageClass; kcm: pv-binder, expander.
    Kind("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, "StorageV1Api", "list_storage_class",
         lambda n, ns: _obj("storage.k8s.io/v1", "StorageClass", n, provisioner="csi.example.com")),
    # scheduler: fwk.CSIDriver (VolumeBinding capacity check); kcm: attachdetach.
    Kind("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False, "StorageV1Api", "list_csi_driver",
         lambda n, ns: _obj("storage.k8s.io/v1", "CSIDriver", f"{n}.csi.example.com", spec={})),
    # scheduler: fwk.CSINode (NodeVolumeLimits, VolumeBinding); kcm: attachdetach.
    Kind("storage.k8s.io", "v1", "csinodes", "CSINode", False, "StorageV1Api", "list_csi_node",
         lambda n, ns: _obj("storage.k8s.io/v1", "CSINode", n, spec={
             "drivers": [{"name": "csi.example.com", "nodeID": "node-1"}]})),
    # scheduler: fwk.CSIStorageCapacity (VolumeBinding CapacityCheck).
    Kind("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True, "StorageV1Api",
         "list_namespaced_csi_storage_capacity",
         lambda n, ns: _obj("storage.k8s.io/v1", "CSIStorageCapacity", n, storageClassName="fast", capacity="10Gi")),
    # scheduler: fwk.VolumeAttachment (NodeVolumeLimits); kcm: attachdetach.
    Kind("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False, "StorageV1Api",
         "list_volume_attachment",
         lambda n, ns: _obj("storage.k8s.io/v1", "VolumeAttachment", n, spec={
             "attacher": "csi.example.com", "nodeName": "node-1", "source": {"persistentVolumeName": "pv-1"}})),
    # kcm: pv-binder and volume expander (VolumeAttributesClass GA since 1.34).
    Kind("storage.k8s.io", "v1", "volumeattributesclasses", "VolumeAttributesClass", False, "StorageV1Api",
         "list_volume_attributes_class",
         lambda n, ns: _obj("storage.k8s.io/v1", "VolumeAttributesClass", n, driverName="csi.example.com",
                        parameters={"iops": "3000"})),
    # scheduler: DynamicResources (NewDRAManager, fwk.DeviceClass; DRA GA in 1.34, v1 informers).
    Kind("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False, "ResourceV1Api", "list_device_class",
         lambda n, ns: _obj("resource.k8s.io/v1", "DeviceClass", n, spec={
             "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]})),
    # scheduler: resourceslicetracker (fwk.ResourceSlice); kcm: resourceslice tracking in resourceclaim.
    Kind("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False, "ResourceV1Api", "list_resource_slice",
         lambda n, ns: _obj("resource.k8s.io/v1", "ResourceSlice", n, spec={
             "driver": "gpu.example.com", "nodeName": "node-1",
             "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
             "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}}}]})),
    # scheduler: assume cache of ResourceClaims (fwk.ResourceClaim); kcm: resourceclaim controller.
    Kind("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, "ResourceV1Api",
         "list_namespaced_resource_claim",
         lambda n, ns: _obj("resource.k8s.io/v1", "ResourceClaim", n, spec=_CLAIM_SPEC)),
    # kcm: resourceclaim controller (claims from templates).
    Kind("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True, "ResourceV1Api",
         "list_namespaced_resource_claim_template",
         lambda n, ns: _obj("resource.k8s.io/v1", "ResourceClaimTemplate", n, spec={"spec": _CLAIM_SPEC})),
    # scheduler and kcm record through events.k8s.io/v1 (the new events broadcaster).
    Kind("events.k8s.io", "v1", "events", "Event", True, "EventsV1Api", "list_namespaced_event",
         lambda n, ns: _obj("events.k8s.io/v1", "Event", n, eventTime="2026-01-01T00:00:00.000000Z",
                        reportingController="default-scheduler", reportingInstance="default-scheduler-host",
                        action="Scheduling", reason="FailedScheduling", type="Warning", note="0/1 nodes",
                        regarding={"kind": "Pod", "name": "p", "namespace": ns})),
    # kcm: endpointslice, endpointslice-mirroring controllers.
    Kind("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True, "DiscoveryV1Api",
         "list_namespaced_endpoint_slice",
         lambda n, ns: _obj("discovery.k8s.io/v1", "EndpointSlice", n, addressType="IPv4",
                        endpoints=[{"addresses": ["10.0.0.1"]}], ports=[{"port": 80}])),
    # kcm: horizontal-pod-autoscaler controller (autoscaling/v2).
    Kind("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, "AutoscalingV2Api",
         "list_namespaced_horizontal_pod_autoscaler",
         lambda n, ns: _obj("autoscaling/v2", "HorizontalPodAutoscaler", n, spec={
             "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 5})),
    Kind("autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, "AutoscalingV1Api",
         "list_namespaced_horizontal_pod_autoscaler",
         lambda n, ns: _obj("autoscaling/v1", "HorizontalPodAutoscaler", n, spec={
             "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 5,
             "targetCPUUtilizationPercentage": 60})),
    # kcm: csrsigning, csrapproving, csrcleaner, root-ca-cert-publisher's signer.
    Kind("certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", False,
         "CertificatesV1Api", "list_certificate_signing_request",
         lambda n, ns: _obj("certificates.k8s.io/v1", "CertificateSigningRequest", n, spec={
             "request": _csr_request(), "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
             "usages": ["digital signature", "client auth"]})),
    # kcm: garbage collector metadata informers.
    Kind("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, "NetworkingV1Api",
         "list_namespaced_network_policy",
         lambda n, ns: _obj("networking.k8s.io/v1", "NetworkPolicy", n, spec={
             "podSelector": {"matchLabels": {"app": "web"}}, "ingress": [{"ports": [{"port": 80}]}]})),
    Kind("networking.k8s.io", "v1", "ingresses", "Ingress", True, "NetworkingV1Api", "list_namespaced_ingress",
         lambda n, ns: _obj("networking.k8s.io/v1", "Ingress", n, spec={"rules": [{"host": "web.example.com", "http": {
             "paths": [{"path": "/", "pathType": "Prefix",
                        "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]})),
    Kind("networking.k8s.io", "v1", "ingressclasses", "IngressClass", False, "NetworkingV1Api", "list_ingress_class",
         lambda n, ns: _obj("networking.k8s.io/v1", "IngressClass", n, spec={"controller": "example.com/ingress"})),
    # kcm: service-cidr-controller (networking.k8s.io/v1 ServiceCIDR and IPAddress, GA in 1.33).
    Kind("networking.k8s.io", "v1", "servicecidrs", "ServiceCIDR", False, "NetworkingV1Api", "list_service_cidr",
         lambda n, ns: _obj("networking.k8s.io/v1", "ServiceCIDR", n, spec={"cidrs": ["10.96.0.0/16"]})),
    Kind("networking.k8s.io", "v1", "ipaddresses", "IPAddress", False, "NetworkingV1Api", "list_ip_address",
         # An IPAddress is named by its (canonical) address.
         lambda n, ns: _obj("networking.k8s.io/v1", "IPAddress",
                            f"10.96.{int(n[-4:], 16) % 250}.{int(n[-2:], 16) % 250}",
                        spec={"parentRef": {"resource": "services", "namespace": "default", "name": "web"}})),
    Kind("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False, "NodeV1Api", "list_runtime_class",
         lambda n, ns: _obj("node.k8s.io/v1", "RuntimeClass", n, handler="runc")),
    # kcm: validatingadmissionpolicy-status-controller.
    Kind("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", False,
         "AdmissionregistrationV1Api", "list_validating_admission_policy",
         lambda n, ns: _obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", n, spec={
             "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                     "operations": ["CREATE"], "resources": ["deployments"]}]},
             "validations": [{"expression": "object.spec.replicas <= 5"}]})),
    Kind("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
         "ValidatingAdmissionPolicyBinding", False, "AdmissionregistrationV1Api",
         "list_validating_admission_policy_binding",
         lambda n, ns: _obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", n, spec={
             "policyName": "replicas", "validationActions": ["Deny"]})),
    # kcm: daemonset and statefulset controllers (history).
    Kind("apps", "v1", "controllerrevisions", "ControllerRevision", True, "AppsV1Api",
         "list_namespaced_controller_revision",
         lambda n, ns: _obj("apps/v1", "ControllerRevision", n, data={"spec": {"template": {}}}, revision=1)),
]


@pytest.fixture(scope="module")
def typed(apiserver) -> client.ApiClient:
    api = config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    try:
        yield api
    finally:
        api.close()


def _create(apiserver, kind: Kind, namespace: str, obj: dict) -> dict:
    code, body, _ = apiserver.request("POST", kind.path(namespace), obj)
    assert code == 201, body
    return body


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: f"{k.resource}")
def test_listed_watched_and_round_tripped(apiserver, typed, namespace, kind: Kind):
    name = f"s-{uuid.uuid4().hex[:8]}"
    created = _create(apiserver, kind, namespace, kind.sample(name, namespace))
    name = created["metadata"]["name"]
    assert created["apiVersion"] == kind.api_version and created["kind"] == kind.kind
    code, got, _ = apiserver.request("GET", kind.path(namespace, name))
    assert code == 200 and got == created
    # A write of the object read back changes nothing the client sent.
    code, replaced, _ = apiserver.request("PUT", kind.path(namespace, name), got)
    assert code == 200, replaced
    assert {k: v for k, v in replaced.items() if k != "metadata"} == {k: v for k, v in got.items() if k != "metadata"}

    api = getattr(client, kind.api)(typed)
    list_fn = getattr(api, kind.list_fn)
    args = (namespace,) if kind.namespaced else ()
    listed = list_fn(*args)
    assert name in [item.metadata.name for item in listed.items]
    assert listed.metadata.resource_version
    # An informer's watch: every current object first, then changes; stop at ours. The item model is
    # named after the list's (the client guesses "V1ResourceClaim" for resource.k8s.io's otherwise).
    model = getattr(client, type(listed).openapi_types["items"].split("[", 1)[1].rstrip("]"))
    seen = None
    for event in watch.Watch(return_type=model).stream(list_fn, *args, timeout_seconds=10):
        if event["object"].metadata.name == name:
            seen = event["type"]
            break
    assert seen == "ADDED"


def test_kubectl_gets_every_kind(apiserver, namespace):
    names = {}
    for kind in KINDS:
        if kind.group == "autoscaling" and kind.version == "v1":
            continue  # the same objects as autoscaling/v2: kubectl prints one
        names[kind.resource] = _create(apiserver, kind, namespace, kind.sample(f"k-{uuid.uuid4().hex[:8]}", namespace))[
            "metadata"]["name"]
    # Wide: an event's name is a wide column.
    out = apiserver.kubectl("get", ",".join(names), "-n", namespace, "-o", "wide").stdout
    for resource, name in names.items():
        assert name in out, f"{resource}: {name} not in\n{out}"
    for short in ("pv", "pvc", "rc", "quota", "limits", "sc", "hpa", "csr", "netpol", "ing"):
        apiserver.kubectl("get", short, "-n", namespace)
    headers = apiserver.kubectl("get", "pvc,sc,rc,hpa", "-n", namespace).stdout
    for column in ("ACCESS MODES", "VOLUMEBINDINGMODE", "DESIRED", "TARGETS", "MINPODS"):
        assert column in headers


# -- validation: 422 naming the field, and nothing stored changes ----------------------------------

INVALID = [
    ("persistentvolumeclaims", {"spec": {}},
     ["spec.accessModes: Required value: at least 1 access mode is required",
      "spec.resources[storage]: Required value"]),
    ("persistentvolumes", {"spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}},
     ["spec: Required value: must specify a volume type"]),
    ("persistentvolumes", {"spec": {"hostPath": {"path": "/x"}, "nfs": {"server": "s", "path": "/"},
                                    "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "0"}}},
     ["spec.nfs: Forbidden: may not specify more than 1 volume type",
      'spec.capacity[storage]: Invalid value: "0": must be greater than zero']),
    ("storageclasses", {}, ["provisioner: Required value"]),
    ("storageclasses", {"provisioner": "x.io", "reclaimPolicy": "Recycle"},
     ['reclaimPolicy: Unsupported value: "Recycle": supported values: "Delete", "Retain"']),
    ("replicationcontrollers", {"spec": {"selector": {"app": "a"}, "template": _TEMPLATE}},
     ['spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: '
      '`selector` does not match template `labels`']),
    ("volumeattachments", {"spec": {"attacher": "csi.example.com", "source": {}}},
     ["spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName",
      "spec.nodeName: Required value"]),
    ("resourceclaims", {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {}}]}}},
     ["spec.devices.requests[0].exactly.deviceClassName: Required value"]),
    ("resourceslices", {"spec": {"driver": "gpu.example.com", "pool": {"name": "p", "resourceSliceCount": 1}}},
     ["spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` "
      "is required"]),
    # Without eventTime only the legacy checks and the strict ones of events.k8s.io/v1 apply.
    ("events", {"reason": "R", "regarding": {"kind": "Pod", "name": "p"}},
     ["eventTime: Required value", 'type: Invalid value: "": has invalid value: ']),
    ("events", {"eventTime": "2026-01-01T00:00:00.000000Z", "type": "Normal", "reason": "R"},
     ["reportingController: Required value", "reportingInstance: Required value", "action: Required value"]),
    ("endpointslices", {"addressType": "IPv5"},
     ['addressType: Unsupported value: "IPv5": supported values: "FQDN", "IPv4", "IPv6"']),
    ("horizontalpodautoscalers", {"spec": {"scaleTargetRef": {"kind": "Deployment"}, "maxReplicas": 0}},
     ["spec.scaleTargetRef.name: Required value", "spec.maxReplicas: Invalid value: 0: must be greater than 0"]),
    ("certificatesigningrequests", {"spec": {"request": base64.b64encode(b"not a csr").decode(), "usages": ["x"]}},
     ["spec.request: Invalid value: []byte{...}: PEM block type must be CERTIFICATE REQUEST",
      "spec.signerName: Required value"]),
    ("ingresses", {"spec": {"rules": [{"http": {"paths": [{"path": "/", "backend": {
        "service": {"name": "web", "port": {"number": 80}}}}]}}]}},
     ["spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified"]),
    ("ingressclasses", {"spec": {}}, ["spec.controller: Required value"]),
    ("runtimeclasses", {"handler": "Not_A_Label"}, ['handler: Invalid value: "Not_A_Label"']),
    ("validatingadmissionpolicybindings", {"spec": {}},
     ["spec.policyName: Required value",
      "spec.validationActions: Required value: at least one validation action is required"]),
    ("controllerrevisions", {"revision": -1},
     ["data: Required value: data is mandatory", "revision: Invalid value: -1: must be greater than or equal to 0"]),
]


@pytest.mark.parametrize("plural,body,messages", INVALID, ids=[f"{c[0]}-{i}" for i, c in enumerate(INVALID)])
def test_invalid_objects_are_refused_naming_the_field(apiserver, namespace, plural, body, messages):
    kind = next(k for k in KINDS if k.plural == plural)
    before = apiserver.request("GET", kind.path(namespace))[1]
    name = f"bad-{uuid.uuid4().hex[:6]}"
    code, status, _ = apiserver.request("POST", kind.path(namespace), _obj(kind.api_version, kind.kind, name, **body))
    assert code == 422, status
    assert status["reason"] == "Invalid"
    for text in messages:
        assert text in status["message"], status["message"]
        field = text.split(":", 1)[0]
        assert field in [c["field"] for c in status["details"]["causes"]]
    after = apiserver.request("GET", kind.path(namespace))[1]
    assert [i["metadata"]["name"] for i in after["items"]] == [i["metadata"]["name"] for i in before["items"]]


def test_forbidden_updates_keep_the_stored_object(apiserver, namespace):
    sc = KINDS[6]
    stored = _create(apiserver, sc, namespace, sc.sample(f"sc-{uuid.uuid4().hex[:6]}", namespace))
    changed = {**stored, "provisioner": "other.example.com", "parameters": {"type": "ssd"}}
    code, status, _ = apiserver.request("PUT", sc.path(namespace, stored["metadata"]["name"]), changed)
    assert code == 422
    assert "provisioner: Forbidden: updates to provisioner are forbidden." in status["message"]
    assert "parameters: Forbidden: updates to parameters are forbidden." in status["message"]
    assert apiserver.request("GET", sc.path(namespace, stored["metadata"]["name"]))[1] == stored

    pvc = KINDS[1]
    claim = _create(apiserver, pvc, namespace, pvc.sample(f"pvc-{uuid.uuid4().hex[:6]}", namespace))
    code, status, _ = apiserver.request("PUT", pvc.path(namespace, claim["metadata"]["name"]),
                                        {**claim, "spec": {**claim["spec"], "accessModes": ["ReadWriteMany"]}})
    assert code == 422 and "spec: Forbidden: spec is immutable after creation" in status["message"]
    # The PV controller may bind the claim to a volume once.
    code, bound, _ = apiserver.request("PUT", pvc.path(namespace, claim["metadata"]["name"]),
                                       {**claim, "spec": {**claim["spec"], "volumeName": "pv-1"}})
    assert code == 200 and bound["spec"]["volumeName"] == "pv-1"


# -- defaulting ------------------------------------------------------------------------------------

def _by_plural(plural: str, version: str = "") -> Kind:
    return next(k for k in KINDS if k.plural == plural and (not version or k.version == version))


def test_defaults_are_applied(apiserver, namespace):
    def create(plural: str, version: str = "", **overrides: Any) -> dict:
        kind = _by_plural(plural, version)
        return _create(apiserver, kind, namespace, {**kind.sample(f"d-{uuid.uuid4().hex[:6]}", namespace), **overrides})

    pvc = create("persistentvolumeclaims")
    assert pvc["spec"]["volumeMode"] == "Filesystem" and pvc["status"] == {"phase": "Pending"}
    pv = create("persistentvolumes")
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain" and pv["spec"]["volumeMode"] == "Filesystem"
    assert pv["spec"]["hostPath"]["type"] == "" and pv["status"]["phase"] == "Pending"
    sc = create("storageclasses")
    assert (sc["reclaimPolicy"], sc["volumeBindingMode"]) == ("Delete", "Immediate")
    rc = create("replicationcontrollers", spec={"template": _TEMPLATE})
    assert rc["spec"]["selector"] == {"app": "web"} and rc["metadata"]["labels"] == {"app": "web"}
    assert rc["spec"]["replicas"] == 1 and rc["spec"]["template"]["spec"]["restartPolicy"] == "Always"
    driver = create("csidrivers")
    assert driver["spec"] == {"attachRequired": True, "podInfoOnMount": False, "requiresRepublish": False,
                              "storageCapacity": False, "seLinuxMount": False,
                              "fsGroupPolicy": "ReadWriteOnceWithFSType", "volumeLifecycleModes": ["Persistent"]}
    claim = create("resourceclaims")
    assert claim["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}
    netpol = create("networkpolicies")
    assert netpol["spec"]["policyTypes"] == ["Ingress"]
    assert netpol["spec"]["ingress"][0]["ports"][0]["protocol"] == "TCP"
    slice_ = create("endpointslices")
    assert slice_["ports"] == [{"port": 80, "name": "", "protocol": "TCP"}]
    hpa = create("horizontalpodautoscalers", "v2")
    assert hpa["spec"]["minReplicas"] == 1
    assert hpa["spec"]["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    limits = create("limitranges")
    assert limits["spec"]["limits"][0]["default"] == {"cpu": "2"}
    assert limits["spec"]["limits"][0]["defaultRequest"] == {"cpu": "2"}
    policy = create("validatingadmissionpolicies")
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["matchConstraints"]["matchPolicy"] == "Equivalent"
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["scope"] == "*"


# -- two views of one stored kind -------------------------------------------------------------------

def test_events_api_and_core_events_are_one_store(apiserver, typed, namespace):
    events = client.EventsV1Api(typed)
    body = _by_plural("events").sample("scheduled", namespace)
    body["regarding"] = {"kind": "Pod", "name": "web-0", "namespace": namespace}
    events.create_namespaced_event(namespace, body)
    core = apiserver.request("GET", f"/api/v1/namespaces/{namespace}/events/scheduled")[1]
    assert core["involvedObject"] == {"kind": "Pod", "name": "web-0", "namespace": namespace}
    assert core["message"] == "0/1 nodes" and core["reportingComponent"] == "default-scheduler"
    # What kubectl describe asks for, and what kubectl get events prints.
    selected = apiserver.request(
        "GET", f"/api/v1/namespaces/{namespace}/events?fieldSelector=involvedObject.name%3Dweb-0")[1]
    assert [e["metadata"]["name"] for e in selected["items"]] == ["scheduled"]
    assert "pod/web-0" in apiserver.kubectl("get", "events", "-n", namespace).stdout
    by_regarding = events.list_namespaced_event(namespace, field_selector="regarding.name=web-0")
    assert [e.metadata.name for e in by_regarding.items] == ["scheduled"]
    code, status, _ = apiserver.request("GET",
                                        f"/api/v1/namespaces/{namespace}/events?fieldSelector=regarding.name%3Dx")
    assert code == 400 and "field label not supported: regarding.name" in status["message"]

    # The events broadcaster's series update is a strategic merge patch through events.k8s.io.
    events.patch_namespaced_event("scheduled", namespace, {
        "series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"}})
    core = apiserver.request("GET", f"/api/v1/namespaces/{namespace}/events/scheduled")[1]
    assert core["series"] == {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"}

    # A core/v1 event (a legacy recorder) reads back through events.k8s.io with fields mapped.
    apiserver.request("POST", f"/api/v1/namespaces/{namespace}/events", {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "legacy"},
        "involvedObject": {"kind": "Pod", "name": "web-2", "namespace": namespace}, "reason": "Started",
        "message": "ready", "count": 3,
        "source": {"component": "kubelet", "host": "n1"}, "type": "Normal",
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:05:00Z"}, expect=201)
    view = apiserver.request("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events/legacy")[1]
    assert view["regarding"] == {"kind": "Pod", "name": "web-2", "namespace": namespace} and view["note"] == "ready"
    assert view["deprecatedCount"] == 3 and view["deprecatedSource"] == {"component": "kubelet", "host": "n1"}
    assert view["deprecatedLastTimestamp"] == "2026-01-01T00:05:00Z"

    # kube-scheduler's recorder sends the event as protobuf.
    regarding = msg(f(1, "Pod"), f(2, namespace), f(3, "web-1"))
    raw = msg(f(1, meta("pb-event", namespace)), f(2, msg(f(1, 1767225600), f(2, 0))), f(4, "default-scheduler"),
              f(5, "default-scheduler-host"), f(6, "Binding"), f(7, "Scheduled"), f(8, regarding),
              f(10, "Successfully assigned"), f(11, "Normal"))
    code, created, _ = apiserver.request("POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
                                         raw=envelope("events.k8s.io/v1", "Event", raw),
                                         headers={"Content-Type": PB, "Accept": f"{PB}, application/json"})
    assert code == 201, created
    core = apiserver.request("GET", f"/api/v1/namespaces/{namespace}/events/pb-event")[1]
    assert core["involvedObject"]["name"] == "web-1" and core["reason"] == "Scheduled"
    assert core["eventTime"] == "2026-01-01T00:00:00.000000Z"


def test_hpa_versions_convert_both_ways(apiserver, namespace):
    v1, v2 = (f"/apis/autoscaling/{v}/namespaces/{namespace}/horizontalpodautoscalers" for v in ("v1", "v2"))
    apiserver.request("POST", v1, _by_plural("horizontalpodautoscalers", "v1").sample("web", namespace), expect=201)
    stored = apiserver.request("GET", f"{v2}/web")[1]
    assert stored["spec"]["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]
    # A v2-only metric survives a v1 read-modify-write in kube's annotation.
    stored["spec"]["metrics"].append({"type": "Pods", "pods": {
        "metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}})
    apiserver.request("PUT", f"{v2}/web", stored, expect=200)
    old = apiserver.request("GET", f"{v1}/web")[1]
    assert old["spec"]["targetCPUUtilizationPercentage"] == 60
    assert json.loads(old["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"]) == [
        {"type": "Pods", "pods": {"metricName": "qps", "targetAverageValue": "10"}}]
    old["spec"]["maxReplicas"] = 9
    apiserver.request("PUT", f"{v1}/web", old, expect=200)
    new = apiserver.request("GET", f"{v2}/web")[1]
    assert new["spec"]["maxReplicas"] == 9 and len(new["spec"]["metrics"]) == 2
    assert "annotations" not in new["metadata"]
    assert "cpu: <unknown>/60%, <unknown>/10" in apiserver.kubectl("get", "hpa", "-n", namespace).stdout


def test_subresources(apiserver, typed, namespace):
    core = client.CoreV1Api(typed)
    rc = _create(apiserver, _by_plural("replicationcontrollers"), namespace,
                 _by_plural("replicationcontrollers").sample("scaled", namespace))
    scale = core.read_namespaced_replication_controller_scale("scaled", namespace)
    assert scale.spec.replicas == 2
    core.patch_namespaced_replication_controller_scale("scaled", namespace, {"spec": {"replicas": 4}})
    assert apiserver.request("GET", _by_plural("replicationcontrollers").path(namespace, "scaled"))[1][
        "spec"]["replicas"] == 4
    # Status writes go through /status only.
    rc = apiserver.request("GET", _by_plural("replicationcontrollers").path(namespace, "scaled"))[1]
    rc["status"] = {"replicas": 4, "readyReplicas": 4}
    apiserver.request("PUT", _by_plural("replicationcontrollers").path(namespace, "scaled") + "/status", rc,
                      expect=200)
    ready = apiserver.kubectl("get", "rc", "scaled", "-n", namespace, "-o", "jsonpath={.status.readyReplicas}")
    assert ready.stdout == "4"

    certs = client.CertificatesV1Api(typed)
    csr_kind = _by_plural("certificatesigningrequests")
    csr = _create(apiserver, csr_kind, namespace, csr_kind.sample(f"csr-{uuid.uuid4().hex[:6]}", namespace))
    name = csr["metadata"]["name"]
    csr["status"] = {"conditions": [{"type": "Approved", "status": "True", "reason": "Auto", "message": "ok"}]}
    csr["spec"]["usages"] = ["server auth"]  # approval changes conditions only
    approved = certs.replace_certificate_signing_request_approval(name, csr)
    assert [c.type for c in approved.status.conditions] == ["Approved"]
    assert approved.spec.usages == ["digital signature", "client auth"]
    assert "Approved" in apiserver.kubectl("get", "csr", name).stdout


def test_resource_claim_status_as_the_scheduler_writes_it(apiserver, typed, namespace):
    resource = client.ResourceV1Api(typed)
    kind = _by_plural("resourceclaims")
    _create(apiserver, kind, namespace, kind.sample("claim", namespace))
    claim = apiserver.request("GET", kind.path(namespace, "claim"))[1]
    claim["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}]}},
        "reservedFor": [{"resource": "pods", "name": "web-0", "uid": str(uuid.uuid4())}]}
    updated = resource.replace_namespaced_resource_claim_status("claim", namespace, claim)
    assert updated.status.allocation.devices.results[0].device == "gpu-0"
    assert "allocated,reserved" in apiserver.kubectl("get", "resourceclaims", "-n", namespace).stdout
    # kube-scheduler's DRA plugin writes the status as protobuf: a second pod joins the reservation.
    request = msg(f(1, "gpu"), f(2, msg(f(1, "gpu.example.com"), f(3, "ExactCount"), f(4, 1))))
    result = msg(f(1, "gpu"), f(2, "gpu.example.com"), f(3, "node-1"), f(4, "gpu-0"))
    reserved = [msg(f(3, "pods"), f(4, r["name"]), f(5, r["uid"])) for r in claim["status"]["reservedFor"]]
    reserved.append(msg(f(3, "pods"), f(4, "web-1"), f(5, "uid-web-1")))
    raw = msg(f(1, meta("claim", namespace)), f(2, msg(f(1, msg(f(1, request))))),
              f(3, msg(f(1, msg(f(1, msg(f(1, result))))), *(f(2, r) for r in reserved))))
    code, body, _ = apiserver.request("PUT", kind.path(namespace, "claim") + "/status",
                                      raw=envelope("resource.k8s.io/v1", "ResourceClaim", raw),
                                      headers={"Content-Type": PB, "Accept": f"{PB}, application/json"})
    assert code == 200, body
    assert [r["name"] for r in body["status"]["reservedFor"]] == ["web-0", "web-1"]
    assert body["status"]["allocation"]["devices"]["results"] == [
        {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}]
    # The spec is immutable.
    claim = apiserver.request("GET", kind.path(namespace, "claim"))[1]
    claim["spec"]["devices"]["requests"][0]["name"] = "other"
    with pytest.raises(ApiException) as info:
        resource.replace_namespaced_resource_claim("claim", namespace, claim)
    assert info.value.status == 422 and "field is immutable" in info.value.body
