"""`koordinator local` runs every role as its own ServiceAccount, under the RBAC of manifests/rbac."""

from __future__ import annotations

import stat
from pathlib import Path

import yaml

from koordinator import defaults, local
from koordinator.runtime.client import Client
from tests.local_cluster import FORBIDDEN, forbidden_lines, running_cluster
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parent.parent
SA = "system:serviceaccount:koordinator-system:"
KUBE_SYSTEM_SA = "system:serviceaccount:kube-system:"


def test_the_shipped_rbac_is_the_manifests():
    """The package ships manifests/rbac byte for byte, so that an installed `koordinator local` applies the same."""
    manifests = sorted(p.name for p in (REPO / "manifests" / "rbac").glob("*.yaml"))
    shipped = defaults.rbac_files()
    assert sorted(shipped) == [f"{defaults.RBAC_DIR}/{name}" for name in manifests]
    for path, text in shipped.items():
        assert text == (REPO / "manifests" / path).read_text(), \
            f"koordinator/defaults/{path} differs from manifests/{path}: copy one onto the other"
    accounts = {o["metadata"]["name"] for o in defaults.rbac_objects() if o["kind"] == "ServiceAccount"}
    assert set(local.ROLE_SERVICE_ACCOUNTS.values()) <= accounts


def test_the_forbidden_pattern_finds_refusals_only():
    assert FORBIDDEN.search('pods "x" is forbidden: User "system:serviceaccount:a:b" cannot delete')
    assert FORBIDDEN.search("request failed status=403")
    assert FORBIDDEN.search("reason: Forbidden")
    assert not FORBIDDEN.search("serving at https://127.0.0.1:40312 pid 14030")


def test_roles_run_as_their_service_accounts_and_are_never_refused(tmp_path):
    with running_cluster(tmp_path, "--nodes", "1") as cluster:
        data_dir = cluster.lp.data_dir
        admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
        assert admin["clusters"][0]["cluster"]["server"].startswith("https://")
        assert admin["clusters"][0]["cluster"]["certificate-authority-data"]
        # kubectl with the printed kubeconfig is the cluster admin.
        proc = cluster.kubectl("auth", "can-i", "*", "*")
        assert proc.stdout.strip() == "yes", proc.stderr
        for role, account in local.ROLE_SERVICE_ACCOUNTS.items():
            path = data_dir / "kubeconfigs" / f"{role}.kubeconfig"
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
            client = Client.from_kubeconfig(str(path))
            try:
                review = client.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                        body={"apiVersion": "authentication.k8s.io/v1",
                                              "kind": "SelfSubjectReview"})
            finally:
                client.close()
            assert review["status"]["userInfo"]["username"] == SA + account
        # The stand-ins for kube-controller-manager and the kubelets run as ServiceAccounts of kube-system.
        for stand_in, account in local.STAND_IN_SERVICE_ACCOUNTS.items():
            proc = cluster.kubectl("--kubeconfig", str(data_dir / "kubeconfigs" / f"{stand_in}.kubeconfig"),
                                   "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
            assert proc.stdout == f"{KUBE_SYSTEM_SA}{account}", proc.stdout + proc.stderr
        # Each ServiceAccount may do what its ClusterRole says, and no more.
        for account, verb, resource, answer in [
            ("koord-scheduler", "create", "pods/binding", "yes"),
            ("koord-scheduler", "delete", "nodes", "no"),
            ("koordlet", "update", "nodemetrics.slo.koordinator.sh/status", "yes"),
            ("koordlet", "delete", "pods", "no"),
            ("koord-manager", "patch", "nodes/status", "yes"),
            ("koord-manager", "create", "pods/binding", "no"),
            ("koord-descheduler", "create", "pods/eviction", "yes"),
            ("koord-device-daemon", "get", "pods", "no"),
            (KUBE_SYSTEM_SA + "koordinator-controllers", "create", "replicasets.apps", "yes"),
            (KUBE_SYSTEM_SA + "koordinator-controllers", "create", "secrets", "no"),
            (KUBE_SYSTEM_SA + "koordinator-controllers", "create", "pods/binding", "no"),
            (KUBE_SYSTEM_SA + "koordinator-node-simulator", "patch", "pods/status", "yes"),
            (KUBE_SYSTEM_SA + "koordinator-node-simulator", "create", "pods", "no"),
            (KUBE_SYSTEM_SA + "koordinator-node-simulator", "delete", "nodes", "no"),
        ]:
            # kubectl reads RESOURCE/NAME: a subresource goes in --subresource.
            kind, _, sub = resource.partition("/")
            proc = cluster.kubectl("auth", "can-i", verb, kind, *(["--subresource", sub] if sub else []),
                                   "--as", account if account.startswith(KUBE_SYSTEM_SA) else SA + account)
            assert proc.stdout.strip() == answer, (account, verb, resource, proc.stdout, proc.stderr)
        # The scheduler binds (pods/binding under its own identity) and the pod runs.
        cluster.apply(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod",
                                      "metadata": {"name": "hello", "namespace": "default"},
                                      "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
        wait_until(lambda: (cluster.client.get("Pod", "hello", "default").get("status") or {}).get("phase")
                   == "Running", timeout=60, message="pod hello not Running", interval=0.2)
        # The controllers make a Deployment's pods and, once it is deleted, collect them, under their identity;
        # the simulator runs and then removes them under its own.
        cluster.apply(yaml.safe_dump({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}))

        def web_pods() -> list[dict]:
            return cluster.client.list("Pod", "default", label_selector="app=web")["items"]

        wait_until(lambda: [p.get("status", {}).get("phase") for p in web_pods()] == ["Running", "Running"],
                   timeout=60, message="the Deployment's 2 pods not Running", interval=0.2)
        proc = cluster.kubectl("delete", "deployment", "web", "--wait=false")
        assert proc.returncode == 0, proc.stderr
        wait_until(lambda: not web_pods(), timeout=60, message="the Deployment's pods not collected", interval=0.2)
        # A ClusterRole changed by hand is put back at the next start (an extra rule, so nothing is refused now).
        proc = cluster.kubectl("patch", "clusterrole", "koord-scheduler", "--type=json", "-p",
                               '[{"op": "add", "path": "/rules/-", "value": {"apiGroups": [""], '
                               '"resources": ["secrets"], "verbs": ["get"]}}]')
        assert proc.returncode == 0, proc.stderr
        token = _token(data_dir / "kubeconfigs" / "scheduler.kubeconfig")
    # running_cluster checked the logs on the way out; look once more that the roles did log (non-vacuous).
    logs = {p.name for p in (data_dir / "logs").glob("*.log")}
    assert {"manager.log", "scheduler.log", "descheduler.log", "controllers.log", "simulator.log"} <= logs, logs
    assert not forbidden_lines(data_dir)

    with running_cluster(tmp_path, "--nodes", "1") as cluster:
        proc = cluster.kubectl("auth", "can-i", "get", "secrets", "--as", SA + "koord-scheduler")
        assert proc.stdout.strip() == "no", proc.stdout + proc.stderr
        # A fresh token at every start.
        assert _token(data_dir / "kubeconfigs" / "scheduler.kubeconfig") != token


def _token(kubeconfig: Path) -> str:
    return yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
