"""The deployment manifests (``manifests/``) and the container image.

Rendering uses ``kubectl kustomize`` (offline); acceptance uses the embedded API server with
``kubectl apply --dry-run=server``, so every object is validated like a real cluster would.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from koordinator.apis.config_documents import documents_of, validate_configmap
from koordinator.apis.schemas import crd_manifests
from koordinator_roles import is_implemented as implemented
from tests.apiserver_process import ApiServerProcess

ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = ROOT / "manifests"
NAMESPACE = "koordinator-system"
IMAGE_PLACEHOLDER = "koordinator"

# What scripts/gen_crds.py generates into manifests/crds (schemas/crds is the source).
CRD_FILES = sorted(crd_manifests())

CLUSTER_SCOPED = {
    "Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass", "CustomResourceDefinition",
    "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
}
WORKLOAD_KINDS = {"Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob", "ReplicaSet"}

# Workload name -> role, service account, kind.
WORKLOADS = {
    "koord-manager": ("manager", "koord-manager", "Deployment"),
    "koord-scheduler": ("scheduler", "koord-scheduler", "Deployment"),
    "koordlet": ("koordlet", "koordlet", "DaemonSet"),
    "koord-descheduler": ("descheduler", "koord-descheduler", "Deployment"),
    "koord-device-daemon": ("device-daemon", "koord-device-daemon", "DaemonSet"),
}
LEADER_ELECTED = {"koord-manager": "koordinator-manager", "koord-scheduler": "koord-scheduler",
                  "koord-descheduler": "koord-descheduler"}
HOST_AGENTS = {"koordlet", "koord-device-daemon"}
# Workloads whose ServiceAccount has no API rights at all (no ClusterRole, no binding).
NO_API_RIGHTS = {"koord-device-daemon"}

DEFAULT_CONFIGMAPS = ["slo-controller-config", "koord-scheduler-config", "koordlet-config", "koord-descheduler-config",
                      "koord-device-daemon-config"]

Obj = dict[str, Any]


# -- rendering ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def rendered_text() -> str:
    """``kubectl kustomize manifests``: the whole install as one YAML stream."""
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    proc = subprocess.run(["kubectl", "kustomize", str(MANIFESTS)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def objects(rendered_text: str) -> list[Obj]:
    return [o for o in yaml.safe_load_all(rendered_text) if o is not None]


def _of_kind(objects: list[Obj], kind: str) -> list[Obj]:
    return [o for o in objects if o["kind"] == kind]


def _by_kind_name(objects: list[Obj]) -> dict[tuple[str, str], Obj]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def _workloads(objects: list[Obj]) -> list[Obj]:
    return _of_kind(objects, "Deployment") + _of_kind(objects, "DaemonSet")


def _pod_spec(workload: Obj) -> Obj:
    return workload["spec"]["template"]["spec"]


def _containers(workload: Obj) -> list[Obj]:
    spec = _pod_spec(workload)
    return list(spec.get("initContainers") or []) + list(spec["containers"])


# -- the kustomization itself ------------------------------------------------------------------

def test_kustomization_includes_the_crds_and_every_file() -> None:
    kust = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert kust["namespace"] == NAMESPACE
    # Every generated CRD, and nothing else from crds/ (a new kind must be added here too).
    assert sorted(r[len("crds/"):] for r in kust["resources"] if r.startswith("crds/")) == CRD_FILES
    assert sorted(p.name for p in (MANIFESTS / "crds").iterdir()) == CRD_FILES
    for r in kust["resources"]:
        assert (MANIFESTS / r).exists(), r
    assert [i["name"] for i in kust["images"]] == [IMAGE_PLACEHOLDER]


def test_every_object_is_well_formed(objects: list[Obj]) -> None:
    seen: set[tuple[str, str, str]] = set()
    for o in objects:
        assert o.get("apiVersion") and o.get("kind"), o
        meta = o.get("metadata") or {}
        assert meta.get("name"), o
        if o["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in meta, f"{o['kind']}/{meta['name']} is cluster-scoped"
        else:
            assert meta.get("namespace") == NAMESPACE, f"{o['kind']}/{meta['name']}: namespace {meta.get('namespace')}"
        key = (o["kind"], meta.get("namespace", ""), meta["name"])
        assert key not in seen, f"duplicate {key}"
        seen.add(key)
    kinds = {o["kind"] for o in objects}
    assert {"Namespace", "CustomResourceDefinition", "PriorityClass", "ServiceAccount", "ClusterRole",
            "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Deployment", "DaemonSet", "Service",
            "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} <= kinds
    assert len(_of_kind(objects, "CustomResourceDefinition")) == len(CRD_FILES)


def test_bindings_name_service_accounts_in_the_namespace(objects: list[Obj]) -> None:
    sas = {o["metadata"]["name"] for o in _of_kind(objects, "ServiceAccount")}
    for b in _of_kind(objects, "ClusterRoleBinding") + _of_kind(objects, "RoleBinding"):
        for s in b["subjects"]:
            assert s["kind"] == "ServiceAccount" and s["namespace"] == NAMESPACE and s["name"] in sas, b


# -- workloads ---------------------------------------------------------------------------------

def test_workloads_share_one_image_and_select_their_role(objects: list[Obj]) -> None:
    workloads = _workloads(objects)
    assert {w["metadata"]["name"]: w["kind"] for w in workloads} == {n: k for n, (_, _, k) in WORKLOADS.items()}
    images = {c["image"] for w in workloads for c in _containers(w)}
    assert len(images) == 1, images
    assert images.pop().split(":")[0].rsplit("/", 1)[-1] == IMAGE_PLACEHOLDER
    for w in workloads:
        role, sa, _ = WORKLOADS[w["metadata"]["name"]]
        (ctr,) = _pod_spec(w)["containers"]
        roles = [a for a in ctr.get("args", []) if a.startswith("--role=")]
        assert roles == [f"--role={role}"], (w["metadata"]["name"], ctr.get("args"))
        # A workload of a role this build lacks would crash-loop on a cluster.
        assert implemented(role), f"{w['metadata']['name']} runs role {role}, which this build does not have"
        assert "command" not in ctr, "the image's ENTRYPOINT (koordinator) must stay in force"
        assert _pod_spec(w)["serviceAccountName"] == sa
        assert ctr["resources"]["requests"] and ctr["resources"]["limits"], w["metadata"]["name"]
        if w["metadata"]["name"] in LEADER_ELECTED:
            assert "--leader-elect" in ctr["args"]
            assert f"--leader-elect-namespace={NAMESPACE}" in ctr["args"]


def test_security_contexts(objects: list[Obj]) -> None:
    for w in _workloads(objects):
        name = w["metadata"]["name"]
        spec = _pod_spec(w)
        (ctr,) = spec["containers"]
        sc = ctr.get("securityContext") or {}
        if name in HOST_AGENTS:
            # Host agents: root and privileged on purpose (cgroups, /proc, /sys, /dev).
            assert sc.get("privileged") is True and sc.get("runAsUser") == 0, name
            # The koordlet reads every process's /proc; the device daemon reads sysfs and NVML only.
            assert bool(spec.get("hostPID")) == (name == "koordlet"), name
            assert {"operator": "Exists"} in spec.get("tolerations", []), name
            env = {e["name"]: e for e in ctr.get("env", [])}
            assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName", name
        else:
            pod_sc = spec.get("securityContext") or {}
            assert pod_sc.get("runAsNonRoot") is True and pod_sc.get("runAsUser", 0) != 0, name
            assert sc.get("readOnlyRootFilesystem") is True, name
            assert sc.get("allowPrivilegeEscalation") is False, name
            assert sc.get("capabilities", {}).get("drop") == ["ALL"], name
            assert not sc.get("privileged"), name
            assert not (spec.get("hostPID") or spec.get("hostNetwork") or spec.get("hostIPC")), name
            assert not any("hostPath" in v for v in spec.get("volumes", [])), name


def test_koordlet_host_mounts(objects: list[Obj]) -> None:
    ds = _by_kind_name(objects)[("DaemonSet", "koordlet")]
    spec = _pod_spec(ds)
    host = {v["name"]: v["hostPath"]["path"].rstrip("/") for v in spec["volumes"] if "hostPath" in v}
    mounts = {m["mountPath"].rstrip("/"): host.get(m["name"]) for m in spec["containers"][0]["volumeMounts"]}
    # Container path -> host path, as Koordinator's DaemonSet mode expects them.
    for path, hostpath in {"/host-cgroup": "/sys/fs/cgroup", "/host-sys": "/sys", "/host-sys-fs": "/sys/fs",
                           "/host-var-run": "/var/run", "/host-run": "/run",
                           "/host-var-run-koordlet": "/var/run/koordlet", "/etc/localtime": "/etc/localtime",
                           "/host-etc-hookserver": "/etc/runtime/hookserver.d",
                           "/var/lib/kubelet": "/var/lib/kubelet",
                           "/var/run/koordlet/xpu-device-infos": "/var/run/koordlet/xpu-device-infos"}.items():
        assert mounts.get(path) == hostpath, (path, mounts.get(path))


@pytest.mark.parametrize("workload, configmap, host_side", [
    # runtimeHooksHostEndpoint is the socket path as the *host* (koord-runtime-proxy) sees it.
    ("koordlet", "koordlet-config", {"runtimeHooksHostEndpoint"}),
    ("koord-device-daemon", "koord-device-daemon-config", set()),
])
def test_config_paths_are_mounted(objects: list[Obj], workload: str, configmap: str, host_side: set[str]) -> None:
    """Every container path a node agent's configuration names lies on one of its mounts."""
    index = _by_kind_name(objects)
    spec = _pod_spec(index[("DaemonSet", workload)])
    mounts = [m["mountPath"].rstrip("/") for m in spec["containers"][0]["volumeMounts"]]
    (text,) = index[("ConfigMap", configmap)]["data"].values()

    def paths(node: Any, key: str = "") -> Iterator[tuple[str, str]]:
        if isinstance(node, dict):
            for k, v in node.items():
                yield from paths(v, k)
        elif isinstance(node, str) and node.startswith("/"):
            yield key, node

    found = list(paths(yaml.safe_load(text)))
    assert found, configmap
    for key, path in found:
        if key in host_side or (path.rstrip("/") == "/proc" and spec.get("hostPID")):
            continue  # /proc of a hostPID container is the host's
        assert any(path.rstrip("/") == m or path.startswith(m + "/") for m in mounts), (key, path)


def test_configmaps_are_mounted_as_whole_volumes(objects: list[Obj]) -> None:
    configmaps = {o["metadata"]["name"]: o for o in _of_kind(objects, "ConfigMap")}
    assert set(DEFAULT_CONFIGMAPS) <= set(configmaps)
    mounted: set[str] = set()
    for w in _workloads(objects):
        name = w["metadata"]["name"]
        spec = _pod_spec(w)
        cm_volumes = {v["name"]: v["configMap"]["name"] for v in spec.get("volumes", []) if "configMap" in v}
        for ctr in _containers(w):
            for m in ctr.get("volumeMounts", []):
                # subPath mounts never see updates: the kubelet swaps a ..data symlink.
                assert "subPath" not in m and "subPathExpr" not in m, (name, m)
            cm_mounts = {m["mountPath"].rstrip("/"): cm_volumes[m["name"]]
                         for m in ctr.get("volumeMounts", []) if m["name"] in cm_volumes}
            configs = [a.split("=", 1)[1] for a in ctr.get("args", []) if a.startswith(("--config=", "--config-file="))]
            for path in configs:
                path = path.rstrip("/")
                if path in cm_mounts:  # the directory of a whole ConfigMap: one file per key
                    mounted.add(cm_mounts[path])
                    continue
                directory, key = path.rsplit("/", 1)
                assert directory in cm_mounts, f"{name}: --config={path} is not inside a mounted ConfigMap"
                cm = configmaps[cm_mounts[directory]]
                assert key in cm.get("data", {}), f"{name}: ConfigMap {cm['metadata']['name']} has no key {key}"
                mounted.add(cm["metadata"]["name"])
            assert set(cm_mounts.values()) <= set(configmaps), name
    # koord-manager reads slo-controller-config through the API (it is cluster state, edited live).
    assert mounted == set(DEFAULT_CONFIGMAPS) - {"slo-controller-config"}


def test_probes_and_ports(objects: list[Obj]) -> None:
    for w in _workloads(objects):
        (ctr,) = _pod_spec(w)["containers"]
        ports = {p["name"]: p["containerPort"] for p in ctr.get("ports", [])}
        for probe in ("readinessProbe", "livenessProbe"):
            if probe in ctr:
                port = ctr[probe]["httpGet"]["port"]
                assert port in ports or port in ports.values(), (w["metadata"]["name"], probe, port)
        addrs = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in ctr.get("args", []) if "=" in a}
        for flag in ("--metrics-addr", "--health-addr"):
            if flag in addrs:
                assert int(addrs[flag].rsplit(":", 1)[1]) in ports.values(), (w["metadata"]["name"], flag)
    manager = _by_kind_name(objects)[("Deployment", "koord-manager")]
    (ctr,) = _pod_spec(manager)["containers"]
    assert manager["spec"]["replicas"] == 2
    assert ctr["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert ctr["livenessProbe"]["httpGet"]["path"] == "/healthz"
    ports = {p["name"]: p["containerPort"] for p in ctr["ports"]}
    assert ports["webhook-server"] == 9876
    assert {e["name"]: e.get("value") for e in ctr["env"]}["WEBHOOK_PORT"] == "9876"
    # The manager writes its serving certificate (default /tmp/koordinator-webhook-certs) on a
    # writable volume: the root filesystem is read-only.
    cert_dir = {e["name"]: e.get("value") for e in ctr["env"]}.get("WEBHOOK_CERT_DIR", "/tmp/koordinator-webhook-certs")
    writable = {v["name"] for v in _pod_spec(manager)["volumes"] if "emptyDir" in v}
    assert any(cert_dir.startswith(m["mountPath"].rstrip("/") + "/") and m["name"] in writable
               and not m.get("readOnly") for m in ctr["volumeMounts"])
    svc = _by_kind_name(objects)[("Service", "koordinator-webhook-service")]
    assert svc["spec"]["selector"] == manager["spec"]["selector"]["matchLabels"]
    (port,) = svc["spec"]["ports"]
    assert port["port"] == 443 and ports.get(port["targetPort"], port["targetPort"]) == 9876


# -- RBAC --------------------------------------------------------------------------------------

def _rules(objects: list[Obj], kind: str, name: str) -> list[Obj]:
    return _by_kind_name(objects)[(kind, name)]["rules"]


def _allows(rules: list[Obj], group: str, resource: str, verb: str, name: str | None = None) -> bool:
    """Whether a request is allowed as kube's RBAC authorizer decides it: a rule with resourceNames
    matches only requests for one of those names, and a create (or a list/watch without a
    metadata.name fieldSelector) has no name, so only a rule without resourceNames allows it.
    ``name=None`` asks about such a nameless request."""
    return any(group in r.get("apiGroups", []) and resource in r.get("resources", []) and verb in r["verbs"]
               and (not r.get("resourceNames") or (name is not None and name in r["resourceNames"]))
               for r in rules)


def _allows_any_name(rules: list[Obj], group: str, resource: str, verb: str) -> bool:
    """Whether some rule grants ``verb`` on ``resource``, whatever names it is limited to."""
    return any(group in r.get("apiGroups", []) and resource in r.get("resources", []) and verb in r["verbs"]
               for r in rules)


def test_rbac_has_no_wildcards(objects: list[Obj]) -> None:
    for o in _of_kind(objects, "ClusterRole") + _of_kind(objects, "Role"):
        for rule in o["rules"]:
            assert rule.get("resources") and rule.get("verbs"), (o["metadata"]["name"], rule)
            assert "nonResourceURLs" not in rule, o["metadata"]["name"]
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert not any("*" in v for v in rule.get(field, [])), (o["metadata"]["name"], field, rule)
        assert "aggregationRule" not in o


def test_rbac_per_role(objects: list[Obj]) -> None:
    index = _by_kind_name(objects)
    for name, (_, sa, _) in WORKLOADS.items():
        assert ("ServiceAccount", sa) in index
        if name in NO_API_RIGHTS:
            assert not [b for b in _of_kind(objects, "ClusterRoleBinding") + _of_kind(objects, "RoleBinding")
                        if any(s["name"] == sa for s in b["subjects"])], name
            continue
        crb = index[("ClusterRoleBinding", sa)]
        assert crb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": sa}
        role_bindings = [b for b in _of_kind(objects, "RoleBinding") if any(s["name"] == sa for s in b["subjects"])]
        if name in LEADER_ELECTED:
            (rb,) = role_bindings
            rules = index[("Role", rb["roleRef"]["name"])]["rules"]
            assert _allows(rules, "coordination.k8s.io", "leases", "create")
            lease_rules = [r for r in rules if "leases" in r["resources"] and "update" in r["verbs"]]
            assert lease_rules and all(r.get("resourceNames") == [LEADER_ELECTED[name]] for r in lease_rules)
            # Leader election records no Event; the roles' Events come from the ClusterRole.
            assert not _allows_any_name(rules, "", "events", "create"), name
        else:
            assert not role_bindings, name
    for o in _of_kind(objects, "ClusterRole") + _of_kind(objects, "Role"):
        # koordinator/runtime/events.py writes core/v1 Events only.
        assert not any("events.k8s.io" in r.get("apiGroups", []) for r in o["rules"]), o["metadata"]["name"]
    # Spot checks of what each role cannot work without, and of what it must not have.
    m = _rules(objects, "ClusterRole", "koord-manager")
    assert _allows(m, "", "nodes/status", "update") and _allows(m, "slo.koordinator.sh", "nodeslos", "create")
    assert _allows(m, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "patch",
                   "koordinator-mutating-webhook-configuration")
    assert all(r.get("resourceNames") for r in m if r["apiGroups"] == ["admissionregistration.k8s.io"])
    assert not _allows_any_name(m, "", "secrets", "get"), "webhook certificate Secret: namespaced Role only"
    # The quota profile controller writes ElasticQuotas and patches its profiles; nothing writes pods or NRTs.
    assert _allows(m, "", "pods", "watch") and not _allows_any_name(m, "", "pods", "patch")
    for verb in ("watch", "create", "update"):
        assert _allows(m, "scheduling.sigs.k8s.io", "elasticquotas", verb), verb
    assert not _allows_any_name(m, "scheduling.sigs.k8s.io", "elasticquotas", "delete")
    assert _allows(m, "quota.koordinator.sh", "elasticquotaprofiles", "patch")
    assert not _allows_any_name(m, "quota.koordinator.sh", "elasticquotaprofiles", "update")
    assert not _allows_any_name(m, "topology.node.k8s.io", "noderesourcetopologies", "update")
    m_ns = _rules(objects, "Role", "koord-manager-leader-election")
    # The webhook certificate Secret: the manager creates it when absent (create cannot be limited by
    # name, so it is granted on secrets of the namespace); every other verb only on that one Secret.
    assert _allows(m_ns, "", "secrets", "create")
    for verb in ("get", "list", "watch", "update", "patch"):
        assert _allows(m_ns, "", "secrets", verb, "koordinator-webhook-certs"), verb
        assert not _allows(m_ns, "", "secrets", verb, "another-secret"), verb
        assert not _allows(m_ns, "", "secrets", verb), f"{verb} on every Secret"
    assert not _allows_any_name(m_ns, "", "secrets", "delete")
    # The one ConfigMap the manager reads (informer with a metadata.name fieldSelector).
    assert _allows(m_ns, "", "configmaps", "watch", "slo-controller-config")
    assert not _allows(m_ns, "", "configmaps", "get", "koord-scheduler-config")
    assert not _allows(m_ns, "", "configmaps", "list"), "every ConfigMap of the namespace"
    s = _rules(objects, "ClusterRole", "koord-scheduler")
    for group, resource, verb in [("", "pods/binding", "create"), ("", "pods/status", "patch"),
                                  ("storage.k8s.io", "csinodes", "list"), ("storage.k8s.io", "storageclasses", "list"),
                                  ("", "persistentvolumeclaims", "list"), ("", "persistentvolumes", "list"),
                                  ("slo.koordinator.sh", "nodemetrics", "watch"),
                                  ("", "services", "watch"), ("apps", "replicasets", "watch"),
                                  ("apps", "statefulsets", "watch"), ("policy", "poddisruptionbudgets", "watch"),
                                  ("scheduling.koordinator.sh", "reservations/status", "update"),
                                  ("scheduling.sigs.k8s.io", "podgroups", "update"),
                                  ("scheduling.sigs.k8s.io", "elasticquotas", "patch"), ("", "pods/eviction", "create")]:
        assert _allows(s, group, resource, verb), (resource, verb)
    s_ns = _rules(objects, "Role", "koord-scheduler-leader-election")
    assert not _allows_any_name(s_ns, "", "configmaps", "get"), "the scheduler reads no ConfigMap through the API"
    k = _rules(objects, "ClusterRole", "koordlet")
    assert _allows(k, "slo.koordinator.sh", "nodemetrics/status", "update")
    assert _allows(k, "", "pods/eviction", "create"), "CPUEvict/MemoryEvict evict through the eviction API"
    # Unused by default: the kubelet API (--kubelet-addr) and PVCs (no block-I/O strategy here).
    for resource, verb in (("nodes/proxy", "get"), ("persistentvolumeclaims", "list")):
        assert not _allows_any_name(k, "", resource, verb), resource
    assert not _allows(k, "slo.koordinator.sh", "nodemetrics", "update"), "koordlet writes NodeMetric status only"
    assert not _allows(k, "", "nodes", "update") and not _allows(k, "", "pods", "delete")
    d = _rules(objects, "ClusterRole", "koord-descheduler")
    for group, resource, verb in [("", "nodes", "watch"), ("", "pods", "watch"), ("", "pods/eviction", "create"),
                                  ("scheduling.k8s.io", "priorityclasses", "get"), ("", "events", "create")]:
        assert _allows(d, group, resource, verb), (resource, verb)


# -- webhooks and priority classes -------------------------------------------------------------

def test_webhook_configurations(objects: list[Obj]) -> None:
    mutating = _by_kind_name(objects)[("MutatingWebhookConfiguration", "koordinator-mutating-webhook-configuration")]
    validating = _by_kind_name(objects)[("ValidatingWebhookConfiguration",
                                         "koordinator-validating-webhook-configuration")]
    paths = {}
    for config in (mutating, validating):
        for wh in config["webhooks"]:
            svc = wh["clientConfig"]["service"]
            assert (svc["namespace"], svc["name"], svc.get("port", 443)) == \
                (NAMESPACE, "koordinator-webhook-service", 443), wh["name"]
            assert "caBundle" not in wh["clientConfig"], "the manager injects caBundle"
            assert wh["sideEffects"] == "None" and wh["admissionReviewVersions"] == ["v1"], wh["name"]
            assert wh["failurePolicy"] in ("Fail", "Ignore")
            paths[wh["name"]] = (svc["path"], wh["failurePolicy"])
    assert paths == {
        "mpod-create.koordinator.sh": ("/mutate-pod", "Fail"),
        "mpod-update.koordinator.sh": ("/mutate-pod", "Fail"),
        "melasticquota.koordinator.sh": ("/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota", "Fail"),
        "vpod.koordinator.sh": ("/validate-pod", "Fail"),
        "velasticquota.koordinator.sh": ("/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota", "Fail"),
    }
    namespace = _by_kind_name(objects)[("Namespace", NAMESPACE)]
    for config in (mutating, validating):
        for wh in config["webhooks"]:
            if wh["rules"][0]["resources"] == ["pods"]:
                exprs = wh["namespaceSelector"]["matchExpressions"]
                assert {"key": "control-plane", "operator": "DoesNotExist"} in exprs
                # ... and the namespace Koordinator runs in is labelled, so it is never intercepted.
                assert "control-plane" in namespace["metadata"]["labels"]
    (update,) = [wh for wh in mutating["webhooks"] if wh["name"] == "mpod-update.koordinator.sh"]
    assert update["objectSelector"]["matchExpressions"] == [
        {"key": "pod.koordinator.sh/mutating-update", "operator": "In", "values": ["true"]}]


def test_webhook_configurations_are_what_the_manager_serves(objects: list[Obj]) -> None:
    """manifests/webhooks.yaml is koordinator_roles.manager.webhook_configuration for the default feature gates."""
    from koordinator_roles.manager import features
    from koordinator_roles.manager.webhook_configuration import webhook_configurations

    index = _by_kind_name(objects)
    for expected in webhook_configurations(features.GATES):
        shipped = index[(expected["kind"], expected["metadata"]["name"])]
        assert shipped["webhooks"] == expected["webhooks"]


def test_priority_classes(objects: list[Obj]) -> None:
    classes = {o["metadata"]["name"]: o for o in _of_kind(objects, "PriorityClass")}
    assert {n: c["value"] for n, c in classes.items()} == {
        "koord-prod": 9000, "koord-mid": 7000, "koord-batch": 5000, "koord-free": 3000}
    for c in classes.values():
        assert c["globalDefault"] is False and c["preemptionPolicy"] == "PreemptLowerPriority" and c["description"]


# -- acceptance by an API server ---------------------------------------------------------------

@pytest.fixture
def manifests_apiserver(fresh_apiserver: ApiServerProcess) -> Iterator[ApiServerProcess]:
    fresh_apiserver.start("--crd-dir", str(MANIFESTS / "crds"))
    yield fresh_apiserver


def test_api_server_accepts_every_object(rendered_text: str, objects: list[Obj],
                                         manifests_apiserver: ApiServerProcess) -> None:
    # Namespaced objects need their namespace to exist; a dry run creates nothing.
    manifests_apiserver.kubectl("apply", "-f", str(MANIFESTS / "namespace.yaml"))
    proc = manifests_apiserver.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered_text)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == len(objects), proc.stdout
    assert all(line.endswith("(server dry run)") for line in lines), proc.stdout


# -- default configuration documents ---------------------------------------------------------------

def test_default_configmaps_validate(objects: list[Obj]) -> None:
    configmaps = {o["metadata"]["name"]: o for o in _of_kind(objects, "ConfigMap")}
    assert sorted(configmaps) == sorted(DEFAULT_CONFIGMAPS)
    for name in DEFAULT_CONFIGMAPS:
        assert documents_of(name), f"no schema claims ConfigMap {name}"  # else it would pass unchecked
        errors = validate_configmap(configmaps[name])
        assert not errors, f"ConfigMap {name}: {[str(e) for e in errors]}"


# -- the image ---------------------------------------------------------------

def _dockerfile_instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile() -> None:
    instructions = _dockerfile_instructions()
    froms = [rest for word, rest in instructions if word == "FROM"]
    assert len(froms) >= 2 and all(f.split()[0] == "python:3.11-slim" for f in froms), froms
    final = instructions[max(i for i, (w, _) in enumerate(instructions) if w == "FROM"):]
    (entrypoint,) = [rest for word, rest in final if word == "ENTRYPOINT"]
    assert yaml.safe_load(entrypoint) == ["koordinator"]
    users = [rest for word, rest in final if word == "USER"]
    assert users, "the final stage must set a USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) == 65532, "numeric non-root USER (runAsNonRoot can check it)"
    installs = " ".join(rest for word, rest in final if word == "RUN")
    assert re.search(r"pip install \S*\.whl", installs), "the final stage installs the wheel only"
    assert not any(word == "ADD" for word, _ in final)
    assert not any(word == "COPY" and "--from=" not in rest for word, rest in final), \
        "the final stage copies only the build stage's wheel"
    ignore = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    assert ".git" in ignore and ".venv" in ignore
    # What the build stage copies exists and is not excluded from the build context.
    for word, rest in instructions:
        if word == "COPY" and "--from=" not in rest:
            for src in rest.split()[:-1]:
                assert (ROOT / src).exists(), src
                assert src.rstrip("/") not in ignore, f"{src} is in .dockerignore"


# -- koord-runtime-proxy on the host (manifests/host/, not in the kustomization) -------------------

HOST = MANIFESTS / "host"
PROXY_UNIT = HOST / "koord-runtime-proxy.service"
PROXY_BINARY = "/usr/local/bin/koordinator"


def _systemd_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """Section -> key -> values (a key may repeat), with backslash-continued lines joined, as systemd reads it."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    text = re.sub(r"\\\n", " ", path.read_text())
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"{path.name}: {line!r} outside a section"
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: {line!r} is not KEY=VALUE"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def _words(values: list[str]) -> list[str]:
    return [w for v in values for w in v.split()]


def _proxy_options() -> Any:
    """The unit's ExecStart parsed and checked as `koordinator --role=runtime-proxy` parses and checks it."""
    import shlex

    import koordinator_roles.runtime_proxy as runtime_proxy
    from koordinator import cli

    (exec_start,) = _systemd_unit(PROXY_UNIT)["Service"]["ExecStart"]
    argv = shlex.split(exec_start)
    assert argv[0] == PROXY_BINARY, argv[0]
    assert "--role=runtime-proxy" in argv[1:], argv
    try:
        options = cli.parse_role_options("runtime-proxy", argv[1:], runtime_proxy)
    except SystemExit:      # argparse: an unknown flag or a bad value (its message is on stderr)
        pytest.fail(f"{PROXY_UNIT.name}: ExecStart has a flag koordinator --role=runtime-proxy refuses: {argv[1:]}")
    runtime_proxy.check_options(options)
    return options


def _port(addr: str) -> str:
    return addr.rpartition(":")[2]


def test_runtime_proxy_unit() -> None:
    unit = _systemd_unit(PROXY_UNIT)
    assert set(unit) == {"Unit", "Service", "Install"}
    deps = {k: _words(v) for k, v in unit["Unit"].items()}
    assert "containerd.service" in deps.get("After", [])
    assert "kubelet.service" in deps.get("Before", []), "the kubelet must start after the proxy"
    assert "kubelet.service" not in deps.get("After", [])
    service = {k: v[-1] for k, v in unit["Service"].items()}
    assert service["Restart"] == "always"
    for key in ("RestartSec", "KillMode", "LimitNOFILE", "TimeoutStopSec"):
        assert service.get(key), key
    assert service["KillMode"] != "none"
    options = _proxy_options()
    opts = options.role_options
    assert opts.koord_runtimeproxy_endpoint == "/var/run/koord-runtimeproxy/runtimeproxy.sock"
    assert opts.remote_runtime_service_endpoint == "/var/run/containerd/containerd.sock"
    # systemd stops the proxy after the graceful shutdown it was given, not in the middle of it.
    stop = service["TimeoutStopSec"]
    assert stop.endswith("s") and float(stop[:-1]) > options.graceful_shutdown_timeout, stop
    assert "multi-user.target" in _words(unit["Install"].get("WantedBy", []))
    # The header says how to install it.
    header = PROXY_UNIT.read_text().split("[Unit]")[0]
    assert "systemctl enable --now koord-runtime-proxy" in header and "manifests/host/README.md" in header


def test_runtime_proxy_readme_matches_the_unit() -> None:
    options = _proxy_options()
    opts = options.role_options
    text = (HOST / "README.md").read_text()
    socket = f"unix://{opts.koord_runtimeproxy_endpoint}"
    # The kubelet is pointed at the socket the proxy serves, in both forms.
    assert f"--container-runtime-endpoint={socket}" in text
    assert f"containerRuntimeEndpoint: {socket}" in text
    assert f"crictl --runtime-endpoint {socket} version" in text
    # Rollback names containerd's socket, the proxy's backend.
    assert f"--container-runtime-endpoint=unix://{opts.remote_runtime_service_endpoint}" in text
    assert f"127.0.0.1:{_port(options.health_addr)}/readyz" in text
    assert f"127.0.0.1:{_port(options.metrics_addr)}/metrics" in text
    assert "systemctl disable --now koord-runtime-proxy" in text
    assert PROXY_UNIT.name in text
    for family in ("koord_runtime_proxy_cri_requests_total", "koord_runtime_proxy_cri_request_duration_seconds",
                   "koord_runtime_proxy_hook_calls_total", "koord_runtime_proxy_hook_servers"):
        assert family in text, family
    assert "../shared/" not in text and "../shared/" not in PROXY_UNIT.read_text()
    # The top-level README points here.
    assert "manifests/host/README.md" in (ROOT / "README.md").read_text()


def test_runtime_proxy_reaches_the_koordlet() -> None:
    """The koordlet's socket and registration, as its DaemonSet mounts them, are where the proxy looks."""
    import posixpath

    from koordinator_roles.runtime_proxy.options import RuntimeProxyOptions

    opts = _proxy_options().role_options
    (ds,) = [o for o in yaml.safe_load_all((MANIFESTS / "workloads" / "koordlet.yaml").read_text())
             if o and o["kind"] == "DaemonSet" and o["metadata"]["name"] == "koordlet"]
    spec = _pod_spec(ds)
    host = {v["name"]: v["hostPath"]["path"].rstrip("/") for v in spec["volumes"] if "hostPath" in v}
    mounts = {m["mountPath"].rstrip("/"): m for m in spec["containers"][0]["volumeMounts"]}
    cm = yaml.safe_load((MANIFESTS / "config" / "koordlet-config.yaml").read_text())
    config = yaml.safe_load(cm["data"]["koordlet-config"])
    assert config.get("runtimeHooksNetwork", "unix") == "unix"

    # The socket: the koordlet listens on runtimeHooksAddr in its container; the host path mounted at
    # that directory, plus the socket's name, is runtimeHooksHostEndpoint (written into koordlet.json).
    addr_dir, sock = posixpath.split(config["runtimeHooksAddr"])
    mount = mounts.get(addr_dir)
    assert mount is not None, f"runtimeHooksAddr {config['runtimeHooksAddr']}: {addr_dir} is not mounted"
    assert not mount.get("readOnly"), "the koordlet creates its socket there"
    assert mount["name"] in host, f"{addr_dir} is not a hostPath mount"
    assert config["runtimeHooksHostEndpoint"] == f"{host[mount['name']]}/{sock}"

    # The registration: runtimeHooksConfigPath is the host's --hook-server-config-dir.
    mount = mounts.get(config["runtimeHooksConfigPath"].rstrip("/"))
    assert mount is not None, f"runtimeHooksConfigPath {config['runtimeHooksConfigPath']} is not mounted"
    assert not mount.get("readOnly"), "the koordlet writes koordlet.json there"
    assert host.get(mount["name"]) == opts.hook_server_config_dir.rstrip("/") \
        == RuntimeProxyOptions().hook_server_config_dir.rstrip("/") == "/etc/runtime/hookserver.d"

    # The koordlet's own pod skips the hooks, so it can start whatever its failure policy.
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert labels.get(opts.runtime_hook_server_key) == opts.runtime_hook_server_val
