"""Admission webhooks: calling Mutating/ValidatingWebhookConfigurations as kube-apiserver does.

The server's write paths ask ``Webhooks.match`` which webhooks apply to a request (a cheap
lookup, cached per resource and operation until a configuration changes). When some do, the
write suspends and ``Webhooks.run`` performs the calls: each HTTPS POST of an
``admission.k8s.io/v1`` AdmissionReview runs on a worker thread, never on the event loop,
because a webhook server commonly reads this very API server while it answers.

What follows kube-apiserver: rule matching (operations, groups, versions, resources with
``*``/subresource forms, scope), namespaceSelector (a Namespace's own labels for namespace
requests, ignored for other cluster-scoped objects) and objectSelector (object or old
object), configurations in name order, mutating webhooks one after another with
reinvocation (``reinvocationPolicy: IfNeeded``), validating webhooks in parallel, failure
policies, ``sideEffects`` on dry runs, ``?timeout=Ns``, service clientConfig resolved
through the Service and its Endpoints with TLS verified for ``<service>.<namespace>.svc``,
and the error texts clients see.

Left out: ``matchPolicy: Equivalent`` conversion (requests match on the version they were
made in), ``matchConditions`` (CEL; ignored), audit annotations, and in-tree plugins being
reinvoked after webhook mutations.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import logging
import socket
import ssl
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson

from koordinator.apiserver import errors, patch
from koordinator.apiserver.resources import ResourceType
from koordinator.apiserver.store import Store
from koordinator.apis.selectors import LabelSelector, SelectorError, label_selector_from_dict

log = logging.getLogger("koordinator.apiserver.webhooks")

Obj = dict[str, Any]

GROUP = "admissionregistration.k8s.io"
MUTATING_STORAGE = f"{GROUP}/mutatingwebhookconfigurations"
VALIDATING_STORAGE = f"{GROUP}/validatingwebhookconfigurations"
# Never sent to webhooks, so a broken webhook can always be removed.
EXEMPT_RESOURCES = frozenset({"mutatingwebhookconfigurations", "validatingwebhookconfigurations",
                              "validatingadmissionpolicies", "validatingadmissionpolicybindings",
                              "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"})
DEFAULT_TIMEOUT = 10
MAX_WORKERS = 32


@dataclass
class Attributes:
    """One admission request: what is written, by which operation, on which resource."""

    operation: str  # CREATE, UPDATE or DELETE
    group: str
    version: str
    resource: str
    subresource: str
    kind: Obj  # {"group", "version", "kind"} of the object sent
    name: str
    namespace: str
    obj: Obj | None
    old: Obj | None
    options: Obj
    dry_run: bool


@dataclass
class Hook:
    """One webhook of a configuration, with its selectors compiled."""

    configuration: str
    mutating: bool
    spec: Obj
    namespace_selector: LabelSelector
    object_selector: LabelSelector

    @property
    def name(self) -> str:
        return self.spec.get("name", "")

    @property
    def ignore_failures(self) -> bool:
        return self.spec.get("failurePolicy") == "Ignore"

    @property
    def timeout(self) -> int:
        value = self.spec.get("timeoutSeconds")
        return value if isinstance(value, int) and value > 0 else DEFAULT_TIMEOUT

    def matches_object(self, attrs: Attributes) -> bool:
        sel = self.object_selector
        if sel.empty:
            return True
        return any(o is not None and sel.matches((o.get("metadata") or {}).get("labels") or {})
                   for o in (attrs.obj, attrs.old))


@dataclass
class Call:
    """What a suspended write waits for: these webhooks, called about ``attrs``."""

    mutating: bool
    hooks: list[Hook]
    attrs: Attributes
    warnings: list[str] = field(default_factory=list)


class CallFailed(Exception):
    """The webhook could not be called or answered nonsense (kube's ErrCallingWebhook)."""

    def __init__(self, hook: Hook, reason: str) -> None:
        super().__init__(f'failed calling webhook "{hook.name}": {reason}')
        self.hook = hook


@dataclass
class Target:
    """Where one call goes: the address to dial, the TLS name to verify, the URL to name in errors."""

    host: str
    port: int
    server_hostname: str
    path: str  # path and query, ?timeout= included
    url: str  # as the error messages print it
    context: ssl.SSLContext


def internal_error(message: str) -> errors.StatusError:
    """500 InternalError with the cause, as apierrors.NewInternalError builds it."""
    return errors.StatusError(500, "InternalError", f"Internal error occurred: {message}",
                              {"causes": [{"message": message}]})


def denial(hook: Hook, result: Any) -> errors.StatusError:
    """A webhook's refusal as the client sees it (code < 400 becomes 400)."""
    result = result if isinstance(result, dict) else {}
    code = result.get("code") if isinstance(result.get("code"), int) else 0
    if code < 400:
        code = 400
    denied_by = f'admission webhook "{hook.name}" denied the request'
    message, reason = result.get("message") or "", result.get("reason") or ""
    if message:
        text = f"{denied_by}: {message}"
    elif reason:
        text = f"{denied_by}: {reason}"
    else:
        text = f"{denied_by} without explanation"
    details = result.get("details") if isinstance(result.get("details"), dict) else None
    return errors.StatusError(code, reason, text, details)


# -- matching ---------------------------------------------------------------------------------


def _split(resource: str) -> tuple[str, str]:
    res, _, sub = resource.partition("/")
    return res, sub


def rule_matches(rule: Obj, operation: str, group: str, version: str, resource: str, subresource: str,
                 cluster_scoped: bool) -> bool:
    """Whether one RuleWithOperations covers the request (``cluster_scoped``: a cluster-scoped object
    or a Namespace)."""
    ops = rule.get("operations") or []
    if "*" not in ops and operation not in ops:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and group not in groups:
        return False
    versions = rule.get("apiVersions") or []
    if "*" not in versions and version not in versions:
        return False
    for pattern in rule.get("resources") or []:
        res, sub = _split(pattern)
        if (res == "*" or res == resource) and (sub == "*" or sub == subresource):
            break
    else:
        return False
    scope = rule.get("scope") or "*"
    if scope == "Cluster":
        return cluster_scoped
    if scope == "Namespaced":
        return not cluster_scoped
    return True


def _compile(configuration: str, mutating: bool, spec: Obj) -> Hook | None:
    try:
        ns_sel = label_selector_from_dict(spec.get("namespaceSelector"), nil_matches_nothing=False)
        obj_sel = label_selector_from_dict(spec.get("objectSelector"), nil_matches_nothing=False)
    except SelectorError as exc:  # validation refuses these; a stored one from before is skipped
        log.warning("webhook %s of %s has an invalid selector, skipped: %s", spec.get("name"), configuration, exc)
        return None
    return Hook(configuration, mutating, spec, ns_sel, obj_sel)


class Webhooks:
    """The configured webhooks of one API server: matching, and the calls on worker threads."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._hooks: dict[bool, list[Hook]] | None = None
        self._by_request: dict[tuple, list[Hook]] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._contexts: dict[str, ssl.SSLContext] = {}

    def invalidate(self) -> None:
        """A configuration changed: rebuild the index on the next match."""
        self._hooks = None
        self._by_request.clear()

    def _all(self) -> dict[bool, list[Hook]]:
        if self._hooks is None:
            hooks: dict[bool, list[Hook]] = {True: [], False: []}
            for mutating, storage in ((True, MUTATING_STORAGE), (False, VALIDATING_STORAGE)):
                for entry in self.store.sorted_entries(storage):
                    config = entry.obj()
                    for spec in config.get("webhooks") or []:
                        if isinstance(spec, dict):
                            hook = _compile(config["metadata"]["name"], mutating, spec)
                            if hook is not None:
                                hooks[mutating].append(hook)
            self._hooks = hooks
        return self._hooks

    def match(self, mutating: bool, operation: str, rt: ResourceType, subresource: str, namespace: str,
              obj: Obj | None, old: Obj | None) -> list[Hook]:
        """The webhooks to call, in order, for this request; [] when none (the common, cheap case)."""
        hooks = self._all()[mutating]
        if not hooks or (rt.group == GROUP and rt.plural in EXEMPT_RESOURCES):
            return []
        is_namespace = rt.group == "" and rt.plural == "namespaces"
        key = (mutating, operation, rt.group, rt.version, rt.plural, subresource, rt.namespaced)
        candidates = self._by_request.get(key)
        if candidates is None:
            cluster_scoped = not rt.namespaced or is_namespace
            candidates = [h for h in hooks if any(
                isinstance(r, dict) and rule_matches(r, operation, rt.group, rt.version, rt.plural, subresource,
                                                     cluster_scoped)
                for r in h.spec.get("rules") or [])]
            self._by_request[key] = candidates
        if not candidates:
            return []
        ns_labels: dict[str, str] | None = None
        out = []
        for h in candidates:
            if not h.namespace_selector.empty and (rt.namespaced or is_namespace):
                if ns_labels is None:
                    ns_labels = self._namespace_labels(is_namespace, operation, subresource, namespace, obj)
                if not h.namespace_selector.matches(ns_labels):
                    continue
            if not h.object_selector.empty and not any(
                    o is not None and h.object_selector.matches((o.get("metadata") or {}).get("labels") or {})
                    for o in (obj, old)):
                continue
            out.append(h)
        return out

    def admission_call(self, admit: bool, mutating: bool, operation: str, rt: ResourceType, sub: str | None,
                       name: str, namespace: str | None, obj: Obj | None, old: Obj | None, query: dict[str, str],
                       options: Obj | None = None, kind: Obj | None = None) -> Call | None:
        """The webhooks a write must call now, or None (a write of the server's own, or none matches)."""
        if not admit:
            return None
        if rt.group == "" and rt.plural == "namespaces":
            namespace = name  # kube names the namespace itself as the request's namespace
        hooks = self.match(mutating, operation, rt, sub or "", namespace or "", obj, old)
        if not hooks:
            return None
        if options is None:
            options = {"kind": "CreateOptions" if operation == "CREATE" else "UpdateOptions",
                       "apiVersion": "meta.k8s.io/v1"}
            if query.get("fieldManager"):
                options["fieldManager"] = query["fieldManager"]
            if query.get("dryRun") == "All":
                options["dryRun"] = ["All"]
        dry_run = query.get("dryRun") == "All" or options.get("dryRun") == ["All"]
        attrs = Attributes(
            operation, rt.group, rt.version, rt.plural, sub or "",
            kind or {"group": rt.group, "version": rt.version, "kind": rt.kind},
            name, namespace or "", obj, old, options, dry_run)
        return Call(mutating, hooks, attrs)

    def _namespace_labels(self, is_namespace: bool, operation: str, subresource: str, namespace: str,
                          obj: Obj | None) -> dict[str, str]:
        # A Namespace being created or updated is judged by the labels it will have.
        if is_namespace and not subresource and operation in ("CREATE", "UPDATE") and obj is not None:
            return (obj.get("metadata") or {}).get("labels") or {}
        entry = self.store.get("namespaces", namespace)
        return entry.labels if entry is not None else {}

    # -- calling ---------------------------------------------------------------------------

    async def run(self, call: Call, user: Obj) -> Obj | None:
        """Call the webhooks of ``call``; the mutated object for a mutating call.

        Raises the StatusError the client gets on a denial or a failure under ``failurePolicy:
        Fail``. Runs on the event loop; each HTTP exchange runs on a worker thread.
        """
        if call.mutating:
            return await self._mutate(call, user)
        await self._validate(call, user)
        return None

    async def _mutate(self, call: Call, user: Obj) -> Obj | None:
        attrs = call.attrs
        obj = attrs.obj
        invoked: list[Hook] = []
        reinvoke: list[Hook] = []
        for round_hooks in (call.hooks, None):
            if round_hooks is None:
                # A later webhook changed the object: earlier ones that asked to see the final
                # object run once more (reinvocationPolicy: IfNeeded).
                round_hooks = [h for h in call.hooks if any(h is r for r in reinvoke)]
                reinvoke = []
                if not round_hooks:
                    break
            for hook in round_hooks:
                attrs.obj = obj
                if not hook.matches_object(attrs):
                    continue
                changed = await self._call_one(hook, attrs, user, call.warnings)
                if changed is not None and changed != obj:
                    obj = changed
                    reinvoke = [h for h in invoked if h.spec.get("reinvocationPolicy") == "IfNeeded"]
                if hook not in invoked:
                    invoked.append(hook)
        attrs.obj = obj
        return obj

    async def _validate(self, call: Call, user: Obj) -> None:
        results = await asyncio.gather(*(self._call_one(h, call.attrs, user, call.warnings) for h in call.hooks),
                                       return_exceptions=True)
        # Validating webhooks run in parallel; the first refusal in configuration order is reported.
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _call_one(self, hook: Hook, attrs: Attributes, user: Obj, warnings: list[str]) -> Obj | None:
        """One webhook; the patched object (mutating, when it sent a patch) or None."""
        if attrs.dry_run and hook.spec.get("sideEffects") not in ("None", "NoneOnDryRun"):
            raise errors.bad_request(f'admission webhook "{hook.name}" does not support dry run')
        loop = asyncio.get_running_loop()
        try:
            target = self.resolve(hook)
            review_uid = str(uuid.uuid4())
            body = orjson.dumps(review(review_uid, attrs, user))
            if self._executor is None:
                self._executor = ThreadPoolExecutor(MAX_WORKERS, thread_name_prefix="admission-webhook")
            response = await loop.run_in_executor(self._executor, post, hook, target, body, hook.timeout)
            result = verify_response(hook, review_uid, response)
        except CallFailed as exc:
            if hook.ignore_failures:
                log.warning("Failed calling webhook, failing open %s: %s", hook.name, exc)
                return None
            log.warning("Failed calling webhook, failing closed %s: %s", hook.name, exc)
            raise internal_error(str(exc)) from None
        warnings.extend(w for w in result.get("warnings") or [] if isinstance(w, str))
        if not result.get("allowed"):
            raise denial(hook, result.get("status"))
        if not hook.mutating or not result.get("patch"):
            return None
        try:
            ops = orjson.loads(base64.b64decode(result["patch"], validate=True))
        except Exception as exc:
            return self._failed(hook, f"received undecodable patch in webhook response: {exc}")
        if result.get("patchType") != "JSONPatch":
            return self._failed(hook, f'unsupported patch type "{result.get("patchType")}"')
        if not ops:
            return None
        if attrs.obj is None:
            raise internal_error(f'admission webhook "{hook.name}" attempted to modify the object, which is not '
                                 f'supported for this operation')
        try:
            patched = patch.apply_json_patch(attrs.obj, ops)
        except errors.StatusError as exc:
            raise internal_error(exc.message) from None
        if not isinstance(patched, dict):
            raise internal_error(f'admission webhook "{hook.name}" patched the object into a non-object')
        return patched

    @staticmethod
    def _failed(hook: Hook, reason: str) -> None:
        exc = CallFailed(hook, reason)
        if hook.ignore_failures:
            log.warning("Failed calling webhook, failing open %s: %s", hook.name, exc)
            return None
        raise internal_error(str(exc))

    def close(self) -> None:
        """Stop the worker threads (calls in flight finish on their own)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    # -- where a call goes -------------------------------------------------------------------

    def _context(self, ca_bundle: str | None) -> ssl.SSLContext:
        ctx = self._contexts.get(ca_bundle or "")
        if ctx is None:
            if ca_bundle:
                pem = base64.b64decode(ca_bundle).decode("ascii", errors="replace")
                ctx = ssl.create_default_context(cadata=pem)
            else:
                ctx = ssl.create_default_context()
            self._contexts[ca_bundle or ""] = ctx
        return ctx

    def resolve(self, hook: Hook) -> Target:
        """The address and TLS identity of a webhook (on the loop: it reads Services and Endpoints)."""
        cc = hook.spec.get("clientConfig") or {}
        query = f"timeout={hook.timeout}s"
        svc = cc.get("service")
        if isinstance(svc, dict):
            name, namespace = svc.get("name", ""), svc.get("namespace", "")
            port = svc.get("port") or 443
            path = svc.get("path") or "/"
            hostname = f"{name}.{namespace}.svc"
            url = f"https://{hostname}:{port}{path}?{query}"
            try:
                context = self._context(cc.get("caBundle"))
            except (ValueError, ssl.SSLError) as exc:
                raise CallFailed(hook, f"could not get REST client: {exc}") from None
            host, target_port = self._service_endpoint(hook, url, namespace, name, port)
            return Target(host, target_port, hostname, f"{path}?{query}", url, context)
        raw = cc.get("url") or ""
        parts = urlsplit(raw)
        sep = "&" if parts.query else "?"
        url = f"{raw}{sep}{query}"
        try:
            context = self._context(cc.get("caBundle"))
            port = parts.port or 443
        except (ValueError, ssl.SSLError) as exc:
            raise CallFailed(hook, f"could not get REST client: {exc}") from None
        path = (parts.path or "/") + (f"?{parts.query}&{query}" if parts.query else f"?{query}")
        return Target(parts.hostname or "", port, parts.hostname or "", path, url, context)

    def _service_endpoint(self, hook: Hook, url: str, namespace: str, name: str, port: int) -> tuple[str, int]:
        """Resolve like the API server's endpoint routing: Service port -> Endpoints address."""

        def fail(cause: str) -> CallFailed:
            return CallFailed(hook, f'failed to call webhook: Post "{url}": {cause}')

        svc_entry = self.store.get("services", f"{namespace}/{name}")
        if svc_entry is None:
            raise fail(f'service "{name}" not found')
        svc = svc_entry.obj()
        svc_port = next((p for p in (svc.get("spec") or {}).get("ports") or []
                         if isinstance(p, dict) and p.get("port") == port), None)
        if svc_port is None:
            raise fail(f'no service port {port} found for service "{name}"')
        target_port = svc_port.get("targetPort", port)
        ep_entry = self.store.get("endpoints", f"{namespace}/{name}")
        if ep_entry is None:
            raise fail(f'endpoints "{name}" not found')
        port_name = svc_port.get("name") or ""
        for subset in ep_entry.obj().get("subsets") or []:
            addresses = [a for a in subset.get("addresses") or [] if isinstance(a, dict) and a.get("ip")]
            if not addresses:
                continue
            ports = [p for p in subset.get("ports") or [] if isinstance(p, dict)]
            chosen = next((p for p in ports if (p.get("name") or "") == port_name), None)
            if chosen is None and isinstance(target_port, int):
                chosen = next((p for p in ports if p.get("port") == target_port), None)
            if chosen is not None and chosen.get("port"):
                return addresses[0]["ip"], int(chosen["port"])
        raise fail(f'no endpoints available for service "{name}"')


# -- the exchange (worker threads) -------------------------------------------------------------


def review(review_uid: str, attrs: Attributes, user: Obj) -> Obj:
    """The AdmissionReview v1 request body."""
    gvr = {"group": attrs.group, "version": attrs.version, "resource": attrs.resource}
    request: Obj = {
        "uid": review_uid, "kind": attrs.kind, "resource": gvr, "requestKind": attrs.kind, "requestResource": gvr,
        "name": attrs.name, "namespace": attrs.namespace, "operation": attrs.operation, "userInfo": user,
        "object": attrs.obj, "oldObject": attrs.old, "dryRun": attrs.dry_run, "options": attrs.options,
    }
    if attrs.subresource:
        request["subResource"] = request["requestSubResource"] = attrs.subresource
    if not attrs.namespace:
        del request["namespace"]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


_CODE_TEXTS = {
    400: "the server rejected our request for an unknown reason",
    401: "the server has asked for the client to provide credentials",
    403: "the server does not allow access to the requested resource",
    404: "the server could not find the requested resource",
    405: "the server does not allow this method on the requested resource",
    415: "the server responded with the status code 415 but did not return more information",
    429: "the server has received too many requests and has asked us to try again later",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted, but may still be processing the request",
}


def _dial_cause(target: Target, exc: BaseException) -> str:
    """Go's wording for a failed exchange, as far as Python exceptions tell it."""
    addr = f"{target.host}:{target.port}"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "context deadline exceeded"
    if isinstance(exc, ssl.SSLCertVerificationError):
        if exc.verify_code == 62:  # X509_V_ERR_HOSTNAME_MISMATCH
            return f"tls: failed to verify certificate: x509: certificate is not valid for {target.server_hostname}"
        if exc.verify_code in (9, 10):
            return "tls: failed to verify certificate: x509: certificate has expired or is not yet valid"
        return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    if isinstance(exc, ssl.SSLError):
        return f"remote error: tls: {exc.reason or exc}".lower()
    if isinstance(exc, ConnectionRefusedError):
        return f"dial tcp {addr}: connect: connection refused"
    if isinstance(exc, (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected)):
        return "EOF"
    if isinstance(exc, socket.gaierror):
        return f"dial tcp: lookup {target.host}: no such host"
    if isinstance(exc, OSError):
        return f"dial tcp {addr}: connect: {(exc.strerror or str(exc)).lower()}"
    return str(exc)


def post(hook: Hook, target: Target, body: bytes, timeout: float) -> Any:
    """POST the review; the decoded response document. Blocking: runs on a worker thread."""
    deadline = time.monotonic() + timeout

    def remaining() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return left

    def failed(cause: str) -> CallFailed:
        return CallFailed(hook, f'failed to call webhook: Post "{target.url}": {cause}')

    sock = None
    try:
        sock = socket.create_connection((target.host, target.port), timeout=remaining())
        tls = target.context.wrap_socket(sock, server_hostname=target.server_hostname)
        sock = tls
        tls.settimeout(remaining())
        conn = http.client.HTTPConnection(target.server_hostname, target.port, timeout=remaining())
        conn.sock = tls
        conn.request("POST", target.path, body=body, headers={
            "Content-Type": "application/json", "Accept": "application/json, */*",
            "User-Agent": "koordinator-apiserver"})
        tls.settimeout(remaining())
        resp = conn.getresponse()
        data = resp.read()
        status = resp.status
    except CallFailed:
        raise
    except Exception as exc:
        raise failed(_dial_cause(target, exc)) from None
    finally:
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
    if status != 200:
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            doc = None
        if isinstance(doc, dict) and doc.get("kind") == "Status" and doc.get("message"):
            raise failed(doc["message"])
        text = _CODE_TEXTS.get(status)
        if text is None:
            snippet = data[:256].decode("utf-8", errors="replace").strip()
            text = (f'an error on the server ("{snippet}") has prevented the request from succeeding'
                    if status >= 500 else f"the server responded with the status code {status} but did not "
                    "return more information")
        raise failed(text)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise failed(f"couldn't get version/kind; json parse error: {exc}") from None


def verify_response(hook: Hook, review_uid: str, doc: Any) -> Obj:
    """The AdmissionReview's ``response``, checked as the API server checks it."""

    def invalid(detail: str) -> CallFailed:
        return CallFailed(hook, f"received invalid webhook response: {detail}")

    if not isinstance(doc, dict):
        raise invalid("webhook response was absent")
    response = doc.get("response")
    if not isinstance(response, dict):
        raise invalid("webhook response was absent")
    if response.get("uid") != review_uid:
        raise invalid(f'expected response.uid="{review_uid}", got "{response.get("uid") or ""}"')
    if doc.get("apiVersion") != "admission.k8s.io/v1" or doc.get("kind") != "AdmissionReview":
        group, _, version = (doc.get("apiVersion") or "").rpartition("/")
        raise invalid(f"expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got "
                      f"{group}/{version}, Kind={doc.get('kind') or ''}")
    has_patch, has_type = bool(response.get("patch")), response.get("patchType") is not None
    if hook.mutating:
        if has_patch and not has_type:
            raise invalid("webhook returned response.patch but not response.patchType")
        if has_type and not has_patch:
            raise invalid("webhook returned response.patchType but not response.patch")
        if has_type and not response.get("patchType"):
            raise invalid('webhook returned invalid response.patchType of ""')
    else:
        if has_patch:
            raise invalid("validating webhook may not return response.patch")
        if has_type:
            raise invalid("validating webhook may not return response.patchType")
    return response
