"""Compatibility with a real kube-apiserver running Koordinator's CRDs, on the examples corpus.

``../shared/examples/koordinator`` holds YAML files from Koordinator's docs and repository, and
``verdicts.json`` what a real kube-apiserver with Koordinator's CRDs answered (see its INDEX.md, "How
the verdicts were produced"). The same setup is rebuilt here on one embedded API server started with
``--crd-dir manifests/crds``: the koord-prod/mid/batch/free PriorityClasses, the namespaces the
examples name, and ``corpus-default`` as the kubeconfig context namespace. Then, per file:

* ``kubectl apply --dry-run=server -f FILE`` must give the same verdict; accepted files the same
  kubectl output and warnings; rejected files must be rejected at the same stage (by kubectl itself
  or by the API server), by the API server with the same field paths and HTTP reasons, by kubectl
  with the same message. Files refused only for a missing sibling PriorityClass are re-run with it.
* each object POSTed raw (``application/yaml``, ``dryRun=All&fieldValidation=Strict``) must get the
  same HTTP status as the real server's ``server_direct`` answer, with the same field paths (422)
  or the same message (other errors).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest

from koordinator.apiserver.objects import load_yaml_documents
from tests.apiserver_process import ApiServerProcess

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT.parent / "shared" / "examples" / "koordinator"

if not (EXAMPLES / "verdicts.json").is_file():
    pytest.skip(f"compatibility corpus not present ({EXAMPLES} has no verdicts.json)", allow_module_level=True)
if shutil.which("kubectl") is None:
    pytest.skip("kubectl is not installed", allow_module_level=True)

VERDICTS: list[dict[str, Any]] = json.loads((EXAMPLES / "verdicts.json").read_text())
NAMESPACES = ["batch-demo", "koord-queue", "koordinator-system", "kubeflow", "quota-example", "system", "test",
              "corpus-default"]
CONTEXT_NAMESPACE = "corpus-default"
# config/manager/koord-*.yaml with kustomize's koord- name prefix, created with `kubectl create`.
PRIORITY_CLASSES = "".join(f"""---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: koord-{name}
value: {value}
preemptionPolicy: PreemptLowerPriority
description: "This priority class should be used for {name} service pods only."
""" for name, value in (("prod", 9000), ("mid", 7000), ("batch", 5000), ("free", 3000)))
# The sibling examples that define the PriorityClasses some Pods name (verdict_with_prerequisites).
PREREQUISITES = ["job-level-preemption--1.yaml", "job-level-preemption--2.yaml"]


# A field.Error as kubectl prints it: "<path>: <type>".
_FIELD = re.compile(r"(?:^|(?<=[\s\[*,]))([A-Za-z_][\w.\-/\[\]]*?): (?:Required value|Invalid value|Unsupported value"
                    r"|Forbidden|Duplicate value|Too long|Too many|Not found|Internal error)", re.M)
_SERVER = re.compile(r'Error from server|^The \S+ "[^"]*" is invalid', re.M)
_CLIENT = re.compile(r"^(?:error: )?(?:error validating|unable to decode|resource mapping not found"
                     r"|error when retrieving current configuration)", re.M)


def field_paths(message: str) -> Counter:
    return Counter(_FIELD.findall(message))


def http_reasons(message: str) -> Counter:
    return Counter(re.findall(r"Error from server \((\w+)\)", message))


def stage(message: str) -> tuple[bool, bool]:
    """(refused by kubectl itself, refused by the API server) for a kubectl error output."""
    return bool(_CLIENT.search(message)), bool(_SERVER.search(message))


@pytest.fixture(scope="module")
def corpus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServerProcess]:
    server = ApiServerProcess(tmp_path_factory.mktemp("compat"))
    server.start("--crd-dir", str(ROOT / "manifests" / "crds"))
    try:
        server.kubectl("config", "set-context", "--current", f"--namespace={CONTEXT_NAMESPACE}")
        for ns in NAMESPACES:
            server.kubectl("create", "namespace", ns)
        server.kubectl("create", "-f", "-", input=PRIORITY_CLASSES)
        yield server
    finally:
        server.stop()


def kubectl(server: ApiServerProcess, *args: str) -> subprocess.CompletedProcess:
    """kubectl run in the corpus directory, so file names in its messages read as in verdicts.json."""
    cmd = ["kubectl", "--kubeconfig", str(server.kubeconfig), "--cache-dir", str(server.cache_dir), *args]
    return subprocess.run(cmd, cwd=EXAMPLES, capture_output=True, text=True, timeout=60)


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Warning:")]


def _errors(stderr: str) -> str:
    return "\n".join(line for line in stderr.splitlines() if not line.startswith("Warning:")).strip()


@pytest.mark.parametrize("entry", VERDICTS, ids=lambda e: e["file"])
def test_kubectl_apply_dry_run_server(corpus_server, entry):
    proc = kubectl(corpus_server, "apply", "--dry-run=server", "-f", entry["file"])
    ours = "accepted" if proc.returncode == 0 else "rejected"
    assert ours == entry["verdict"], f"real: {entry['verdict']} {entry['message']!r}\nours: {proc.stderr}"
    assert _lines(proc.stdout) == entry["kubectl_stdout"]
    assert _warnings(proc.stderr) == entry["warnings"]

    prerequisites = entry.get("verdict_with_prerequisites")
    if prerequisites:
        created = [kubectl(corpus_server, "create", "-f", f) for f in PREREQUISITES]
        try:
            assert all(p.returncode == 0 for p in created), [p.stderr for p in created]
            rerun = kubectl(corpus_server, "apply", "--dry-run=server", "-f", entry["file"])
            assert ("accepted" if rerun.returncode == 0 else "rejected") == prerequisites["verdict"], rerun.stderr
            assert _lines(rerun.stdout) == prerequisites["output"]
        finally:
            for f in PREREQUISITES:
                kubectl(corpus_server, "delete", "-f", f, "--ignore-not-found")

    if ours == "accepted":
        return
    real, mine = entry["message"], _errors(proc.stderr)
    problems = []
    if stage(mine) != stage(real):
        problems.append(f"rejected at another stage (kubectl, server): real {stage(real)}, ours {stage(mine)}")
    if stage(real)[1]:
        if field_paths(mine) != field_paths(real):
            problems.append(f"field paths differ: real {sorted(field_paths(real).elements())}, "
                            f"ours {sorted(field_paths(mine).elements())}")
        if http_reasons(mine) != http_reasons(real):
            problems.append(f"HTTP reasons differ: real {dict(http_reasons(real))}, ours {dict(http_reasons(mine))}")
    elif mine != real:
        problems.append("kubectl's own message differs")
    if problems:
        pytest.fail("\n".join(problems) + f"\nreal: {real}\nours: {mine}")


def _documents(text: str) -> list[str]:
    """The file's YAML documents as raw text, empty ones dropped (as they were POSTed)."""
    return [doc for doc in re.split(r"(?m)^---[ \t]*$", text) if load_yaml_documents(doc)]


def _collection(server: ApiServerProcess, cache: dict, obj: dict[str, Any]) -> str | None:
    """The URL kubectl's REST mapping would POST ``obj`` to, or None where the server serves no such kind."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind") or ""
    if not api_version:
        return None
    if api_version not in cache:
        status, body, _ = server.request("GET", "/api/v1" if api_version == "v1" else f"/apis/{api_version}")
        cache[api_version] = body.get("resources", []) if status == 200 else []
    found = [r for r in cache[api_version] if "/" not in r["name"] and r["kind"].lower() == kind.lower()]
    if not found:
        return None
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if not found[0]["namespaced"]:
        return f"{base}/{found[0]['name']}"
    ns = (obj.get("metadata") or {}).get("namespace") or CONTEXT_NAMESPACE
    return f"{base}/namespaces/{ns}/{found[0]['name']}"


@pytest.fixture(scope="module")
def discovery_cache() -> dict:
    return {}


@pytest.mark.parametrize("entry", VERDICTS, ids=lambda e: e["file"])
def test_raw_post_matches_server_direct(corpus_server, discovery_cache, entry):
    docs = _documents((EXAMPLES / entry["file"]).read_text())
    assert len(docs) == len(entry["server_direct"])
    problems = []
    for raw, real in zip(docs, entry["server_direct"]):
        url = _collection(corpus_server, discovery_cache, load_yaml_documents(raw)[0])
        status, message = None, "not sent"
        if url is not None:
            status, body, _ = corpus_server.request(
                "POST", f"{url}?dryRun=All&fieldValidation=Strict", raw=raw.encode(),
                headers={"Content-Type": "application/yaml"})
            message = body.get("message", "") if isinstance(body, dict) else str(body)
        if status != real["http_status"]:
            problem = f"{real['object']}: HTTP {status} ({message}), real {real['http_status']} ({real['result']})"
        elif status == 422 and field_paths(message) != field_paths(real["result"]):
            problem = f"{real['object']}: field paths {message!r}, real {real['result']!r}"
        elif status is not None and status >= 400 and status != 422 and message != real["result"]:
            problem = f"{real['object']}: message {message!r}, real {real['result']!r}"
        else:
            continue
        problems.append(problem)
    assert not problems, "\n".join(problems)
