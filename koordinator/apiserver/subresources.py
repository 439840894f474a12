"""Subresources that are not a part of the object: ``scale``, and the connect-style POSTs
(``pods/binding``, ``pods/eviction``, ``bindings``) whose body admission webhooks see."""

from __future__ import annotations

from typing import Any, Callable

from koordinator.apiserver import errors, patch
from koordinator.apiserver.encoding import decode
from koordinator.apiserver.http import Request, Response
from koordinator.apiserver.resources import ResourceType
from koordinator.apiserver.routes import Route
from koordinator.apiserver.store import Entry
from koordinator.apiserver.webhooks import Webhooks
from koordinator.apiserver.writer import ObjectWriter, Steps, run_steps

Obj = dict[str, Any]


def scale(writer: ObjectWriter, req: Request, rt: ResourceType, key: str, route: Route) -> Response:
    """GET, PUT or PATCH of ``/scale``: an autoscaling/v1 Scale over the kind's replica paths."""
    entry = writer.get(rt, key, route.name or "")
    obj = entry.obj()
    spec_path, status_path, selector_path = (
        rt.crd.scale_paths(rt.version) if rt.crd is not None
        else (".spec.replicas", ".status.replicas", ".status.selector"))

    def read(path: str) -> Any:
        cur: Any = obj
        for p in path.lstrip(".").split("."):
            cur = cur.get(p) if isinstance(cur, dict) else None
        return cur

    def scale_obj(o: Obj) -> Obj:
        nonlocal obj
        obj = o
        sel = read(selector_path) if selector_path else None
        if isinstance(sel, dict):
            sel = ",".join(f"{k}={v}" for k, v in (sel.get("matchLabels") or {}).items())
        return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {k: o["metadata"][k] for k in ("name", "namespace", "uid", "resourceVersion",
                                                            "creationTimestamp") if k in o["metadata"]},
                "spec": {"replicas": read(spec_path) or 0},
                "status": {"replicas": read(status_path) or 0, **({"selector": sel} if sel else {})}}

    if req.method == "GET":
        return Response.json(200, scale_obj(obj))
    if req.method in ("PUT", "PATCH"):
        body = decode(req, None)
        if req.method == "PATCH":
            body = patch.apply_merge_patch(scale_obj(obj), body) if isinstance(body, dict) else \
                patch.apply_json_patch(scale_obj(obj), body)
        replicas = (body.get("spec") or {}).get("replicas") if isinstance(body, dict) else None
        if not isinstance(replicas, int) or replicas < 0:
            raise errors.invalid("Scale", "autoscaling", route.name or "", [
                errors.invalid_value("spec.replicas", replicas, "must be greater than or equal to 0")])
        new = entry.obj()
        cur = new
        parts = spec_path.lstrip(".").split(".")
        for p in parts[:-1]:
            cur = cur.setdefault(p, {})
        cur[parts[-1]] = replicas
        _, result, _ = run_steps(writer.update_steps(rt, entry, entry.obj(), new, None, req.query))
        stored = result.obj() if isinstance(result, Entry) else result
        return Response.json(200, scale_obj(stored))
    raise errors.method_not_allowed(req.method, f"{rt.plural}/scale")


def connect_steps(hooks: Webhooks, req: Request, rt: ResourceType, sub: str | None, namespace: str | None,
                  name: str, body: Any, kind: Obj, perform: Callable[[Any], Response]) -> Steps:
    """A pods/binding, pods/eviction or bindings POST: webhooks see the body (CREATE), then it is done."""
    if isinstance(body, dict):
        call = hooks.admission_call(True, True, "CREATE", rt, sub, name, namespace, body, None, req.query, kind=kind)
        if call is not None:
            body = yield call
        call = hooks.admission_call(True, False, "CREATE", rt, sub, name, namespace, body, None, req.query, kind=kind)
        if call is not None:
            yield call
    return perform(body)
