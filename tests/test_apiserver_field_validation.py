"""Strict field validation sees the whole request body, as kube-apiserver's strict decoder does.

kube-apiserver decodes a body (``fieldValidation=Strict``, kubectl's default) before its strategy
drops what the request may not write: ``status`` on a create or on an update of the main
resource, the rest on a ``status`` update. So unknown fields there are named too.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Iterator

import pytest

from tests.apiserver_process import ApiServerProcess

ROOT = Path(__file__).resolve().parent.parent
NODESLOS = "/apis/slo.koordinator.sh/v1alpha1/nodeslos"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServerProcess]:
    crds = tmp_path_factory.mktemp("crds")
    shutil.copy(ROOT / "manifests" / "crds" / "slo.koordinator.sh_nodeslos.yaml", crds)
    proc = ApiServerProcess(tmp_path_factory.mktemp("field-validation")).start("--crd-dir", str(crds))
    try:
        yield proc
    finally:
        proc.stop()


def nodeslo(name: str, **extra) -> dict:
    return {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": name},
            "spec": {"resourceUsedThresholdWithBE": {"enable": True}}, **extra}


def test_create_names_unknown_status_fields_under_strict(server):
    status, body, _ = server.request("POST", f"{NODESLOS}?fieldValidation=Strict",
                                     nodeslo("strict-create", status={"nodeMetric": {}}))
    assert status == 400, body
    assert body["reason"] == "BadRequest"
    assert 'strict decoding error: unknown field "status.nodeMetric"' in body["message"]
    assert server.request("GET", f"{NODESLOS}/strict-create")[0] == 404


def test_create_lists_spec_and_status_unknown_fields_together(server):
    doc = nodeslo("both", status={"nodeMetric": {}})
    doc["spec"]["bogus"] = 1
    status, body, _ = server.request("POST", f"{NODESLOS}?fieldValidation=Strict", doc)
    assert status == 400, body
    assert body["message"].endswith('strict decoding error: unknown field "spec.bogus", '
                                    'unknown field "status.nodeMetric"')


def test_create_warns_about_unknown_status_fields_and_drops_the_status(server):
    _, made, headers = server.request("POST", NODESLOS, nodeslo("warn-create", status={"nodeMetric": {}}),
                                      expect=201)
    assert 'unknown field \\"status.nodeMetric\\"' in headers["warning"]
    assert "status" not in made  # the status subresource's to write, as before
    _, made, headers = server.request("POST", f"{NODESLOS}?fieldValidation=Ignore",
                                      nodeslo("ignore-create", status={"nodeMetric": {}}), expect=201)
    assert "warning" not in headers and "status" not in made


def test_updates_name_unknown_fields_of_the_dropped_parts(server):
    _, made, _ = server.request("POST", NODESLOS, nodeslo("update"), expect=201)
    put = copy.deepcopy(made)
    put["status"] = {"nodeMetric": {}}
    status, body, _ = server.request("PUT", f"{NODESLOS}/update?fieldValidation=Strict", put)
    assert status == 400 and 'unknown field "status.nodeMetric"' in body["message"], body
    status_put = copy.deepcopy(made)
    status_put["spec"]["bogus"] = 1
    status, body, _ = server.request("PUT", f"{NODESLOS}/update/status?fieldValidation=Strict", status_put)
    assert status == 400 and 'unknown field "spec.bogus"' in body["message"], body
    # The object as read back is accepted as ever.
    _, current, _ = server.request("GET", f"{NODESLOS}/update", expect=200)
    server.request("PUT", f"{NODESLOS}/update?fieldValidation=Strict", current, expect=200)
    server.request("PUT", f"{NODESLOS}/update/status?fieldValidation=Strict", current, expect=200)
