"""PATCH bodies applied to stored objects: JSON patch, JSON merge patch and strategic merge patch.

Everything here is a pure function over plain JSON values (dicts, lists, scalars). Inputs are
never modified and results share no dict or list with them, because callers go on to edit the
patched object (resourceVersion, managedFields, ...) and compare it with the stored one.

Failures are ``StatusError``\\ s with the codes kube-apiserver answers: 400 for a patch that is
malformed in itself, 422 for a well-formed JSON patch that does not apply to this document (a
missing path, a failed ``test``), 413 past the server's limit on JSON-patch operations.

Strategic merge patch follows ``k8s.io/apimachinery/pkg/util/strategicpatch`` as the API server
runs it (merging parallel deletion lists, dropping nulls that match nothing), including how it
orders merged lists: items named in the patch (or in ``$setElementOrder``) keep the patch's order,
items only on the server keep theirs, and the two are interleaved by their position on the
server, so an item that is new to the list goes *before* the server-only items that follow it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Any, NamedTuple

from koordinator.apiserver.errors import StatusError, bad_request, too_large

__all__ = [
    "ListRule",
    "MAX_JSON_PATCH_OPERATIONS",
    "apply_json_patch",
    "apply_merge_patch",
    "apply_strategic_merge_patch",
    "strategy_for",
]

# kube-apiserver refuses longer JSON patches with 413 (maxJSONPatchOperations).
MAX_JSON_PATCH_OPERATIONS = 10000

_MISSING: Any = object()
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _copy(value: Any) -> Any:
    """Deep copy of a JSON value; scalars are immutable and shared."""
    cls = type(value)
    if cls is dict:
        return {k: _copy(v) for k, v in value.items()}
    if cls is list:
        return [_copy(v) for v in value]
    if cls in _SCALARS:
        return value
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copy(v) for v in value]
    return value


def _json_key(value: Any) -> Any:
    """A hashable stand-in with JSON equality: ``1 == 1.0`` but ``true != 1`` and ``"1" != 1``."""
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if value is None:
        return ("z",)
    if isinstance(value, dict):
        return ("o", frozenset((k, _json_key(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("a", tuple(_json_key(v) for v in value))
    return ("?", repr(value))


def _json_equal(a: Any, b: Any) -> bool:
    return _json_key(a) == _json_key(b)


# --------------------------------------------------------------------------------------------
# RFC 6902 JSON patch
# --------------------------------------------------------------------------------------------

_JSON_PATCH_OPS = ("add", "remove", "replace", "move", "copy", "test")
_BAD_ESCAPE = re.compile(r"~(?![01])")


def _invalid(message: str) -> StatusError:
    """422 Invalid, as kube-apiserver answers a JSON patch that does not apply to the object."""
    return StatusError(422, "Invalid", message)


def _parse_pointer(pointer: str, index: int, field: str) -> list[str]:
    """RFC 6901 tokens of ``pointer``; a malformed pointer makes the whole patch a bad request."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise bad_request(f'json patch operation #{index}: "{field}" must be a JSON pointer starting '
                          f'with "/" (or empty for the whole document), got {pointer!r}')
    tokens = pointer[1:].split("/")
    for i, token in enumerate(tokens):
        if "~" in token:
            # Only ~0 and ~1 are escapes; a lone "~" or "~2" is not a valid pointer (RFC 6901 §3).
            if _BAD_ESCAPE.search(token):
                raise bad_request(f"json patch operation #{index}: invalid escape in {field} {pointer!r} "
                                  f'("~" must be followed by 0 or 1)')
            tokens[i] = token.replace("~1", "/").replace("~0", "~")
    return tokens


class _Op(NamedTuple):
    index: int
    op: str
    path: str
    tokens: list[str]
    from_path: str
    from_tokens: list[str]
    value: Any


def _parse_op(index: int, raw: Any) -> _Op:
    if not isinstance(raw, dict):
        raise bad_request(f"json patch operation #{index} must be a JSON object, got {_kind_of(raw)}")
    if "op" not in raw:
        raise bad_request(f'json patch operation #{index} is missing the "op" field')
    op = raw["op"]
    if not isinstance(op, str) or op not in _JSON_PATCH_OPS:
        raise bad_request(f"json patch operation #{index} has an unknown op {op!r}; "
                          f"expected one of {', '.join(_JSON_PATCH_OPS)}")
    if "path" not in raw:
        raise bad_request(f'json patch operation #{index} ({op}) is missing the "path" field')
    path = raw["path"]
    if not isinstance(path, str):
        raise bad_request(f'json patch operation #{index} ({op}): "path" must be a string, got {_kind_of(path)}')
    tokens = _parse_pointer(path, index, "path")
    from_path, from_tokens = "", []
    if op in ("move", "copy"):
        if "from" not in raw:
            raise bad_request(f'json patch operation #{index} ({op}) is missing the "from" field')
        from_path = raw["from"]
        if not isinstance(from_path, str):
            raise bad_request(f'json patch operation #{index} ({op}): "from" must be a string, '
                              f"got {_kind_of(from_path)}")
        from_tokens = _parse_pointer(from_path, index, "from")
    value = _MISSING
    if op in ("add", "replace", "test"):
        # A present null is a value; only an absent member is malformed.
        if "value" not in raw:
            raise bad_request(f'json patch operation #{index} ({op}) is missing the "value" field')
        value = raw["value"]
    return _Op(index, op, path, tokens, from_path, from_tokens, value)


def _kind_of(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "a string"


def _array_index(token: str, size: int, op: _Op, path: str, allow_end: bool) -> int:
    """The index ``token`` names in an array of ``size``; ``allow_end`` admits ``size`` itself (add)."""
    if token == "-":
        if allow_end:
            return size
        raise _invalid(f'json patch operation #{op.index} ({op.op}): "-" in {path!r} names no existing '
                       f"array element")
    # RFC 6901: array indexes are 0 or digits without a leading zero; no sign, no spaces.
    if not (token.isascii() and token.isdigit()) or (len(token) > 1 and token[0] == "0"):
        raise _invalid(f"json patch operation #{op.index} ({op.op}): {token!r} in {path!r} is not a valid "
                       f"array index")
    i = int(token)
    if i > size or (i == size and not allow_end):
        raise _invalid(f"json patch operation #{op.index} ({op.op}): index {i} in {path!r} is out of bounds "
                       f"(array of {size})")
    return i


def _parent(root: Any, tokens: list[str], op: _Op, path: str) -> Any:
    """The container holding the value ``tokens`` point at; every step but the last must exist."""
    node = root
    for depth, token in enumerate(tokens[:-1]):
        if isinstance(node, dict):
            if token not in node:
                raise _missing(op, path, tokens[: depth + 1])
            node = node[token]
        elif isinstance(node, list):
            node = node[_array_index(token, len(node), op, path, allow_end=False)]
        else:
            raise _missing(op, path, tokens[: depth + 1])
    if not isinstance(node, (dict, list)):
        raise _missing(op, path, tokens)
    return node


def _missing(op: _Op, path: str, tokens: list[str]) -> StatusError:
    prefix = "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)
    where = f"{path!r}" if prefix == path else f"{path!r} ({prefix!r} does not exist)"
    return _invalid(f"json patch operation #{op.index} ({op.op}) does not apply: the document has no "
                    f"path {where}")


def _get(root: Any, tokens: list[str], op: _Op, path: str) -> Any:
    if not tokens:
        return root
    parent = _parent(root, tokens, op, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _missing(op, path, tokens)
        return parent[last]
    return parent[_array_index(last, len(parent), op, path, allow_end=False)]


def _add(root: Any, tokens: list[str], value: Any, op: _Op, path: str) -> Any:
    if not tokens:
        return value
    parent = _parent(root, tokens, op, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    else:
        parent.insert(_array_index(last, len(parent), op, path, allow_end=True), value)
    return root


def _remove(root: Any, tokens: list[str], op: _Op, path: str) -> Any:
    """Removes the value at ``tokens`` and returns it."""
    if not tokens:
        raise _invalid(f"json patch operation #{op.index} ({op.op}): the whole document cannot be removed")
    parent = _parent(root, tokens, op, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _missing(op, path, tokens)
        return parent.pop(last)
    return parent.pop(_array_index(last, len(parent), op, path, allow_end=False))


def _replace(root: Any, tokens: list[str], value: Any, op: _Op, path: str) -> Any:
    if not tokens:
        return value
    parent = _parent(root, tokens, op, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _missing(op, path, tokens)
        parent[last] = value
    else:
        parent[_array_index(last, len(parent), op, path, allow_end=False)] = value
    return root


def apply_json_patch(doc: dict, ops: list) -> dict:
    """Apply an RFC 6902 JSON patch to ``doc`` and return the patched copy.

    Operations run in order and all-or-nothing: ``add``, ``remove``, ``replace``, ``move``,
    ``copy`` and ``test``, with RFC 6901 pointers (``~0``/``~1`` escapes, ``-`` to append).
    A malformed patch (not a list, an operation without ``op``/``path``, an unknown op, a missing
    ``value``/``from``, a bad pointer) raises 400 naming the operation's index; an operation that
    does not apply to the document (missing path, bad array index, failed ``test``) raises 422.
    """
    if not isinstance(ops, list):
        raise bad_request(f"json patch must be a JSON array of operations, got {_kind_of(ops)}")
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise too_large(f"Request entity too large: The allowed maximum operations in a JSON patch is "
                        f"{MAX_JSON_PATCH_OPERATIONS}, got {len(ops)}")
    parsed = [_parse_op(i, raw) for i, raw in enumerate(ops)]
    root = _copy(doc)
    for op in parsed:
        if op.op == "add":
            root = _add(root, op.tokens, _copy(op.value), op, op.path)
        elif op.op == "remove":
            _remove(root, op.tokens, op, op.path)
        elif op.op == "replace":
            root = _replace(root, op.tokens, _copy(op.value), op, op.path)
        elif op.op == "move":
            if op.from_tokens == op.tokens:
                _get(root, op.from_tokens, op, op.from_path)
                continue
            if op.tokens[: len(op.from_tokens)] == op.from_tokens:
                raise _invalid(f"json patch operation #{op.index} (move): {op.from_path!r} cannot be moved "
                               f"into its own child {op.path!r}")
            value = _remove(root, op.from_tokens, op, op.from_path)
            root = _add(root, op.tokens, value, op, op.path)
        elif op.op == "copy":
            value = _copy(_get(root, op.from_tokens, op, op.from_path))
            root = _add(root, op.tokens, value, op, op.path)
        else:
            actual = _get(root, op.tokens, op, op.path)
            if not _json_equal(actual, op.value):
                raise _invalid(f"json patch operation #{op.index} (test) failed: the value at {op.path!r} "
                               f"is not the expected value")
    return root


# --------------------------------------------------------------------------------------------
# RFC 7386 JSON merge patch
# --------------------------------------------------------------------------------------------


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return _copy(patch)
    base = target if isinstance(target, dict) else {}
    out: dict[str, Any] = {}
    for key, value in base.items():
        if key in patch:
            change = patch[key]
            if change is not None:
                out[key] = _merge(value, change)
        else:
            out[key] = _copy(value)
    for key, change in patch.items():
        # Nulls inside values that add new members are dropped too (RFC 7386 applies the patch to {}).
        if key not in base and change is not None:
            out[key] = _merge(None, change)
    return out


def apply_merge_patch(doc: dict, patch: dict) -> dict:
    """Apply an RFC 7386 JSON merge patch to ``doc`` and return the patched copy.

    Objects merge recursively, ``null`` deletes a member, and arrays and scalars replace what was
    there. Existing members keep their order; new ones follow in the patch's order.
    """
    return _merge(doc, patch)


# --------------------------------------------------------------------------------------------
# Strategic merge patch: the patch strategies of the built-in kinds
# --------------------------------------------------------------------------------------------


class ListRule(NamedTuple):
    """A list field with ``patchStrategy: merge``.

    ``key`` is its ``patchMergeKey`` (``None`` for a list of primitives, merged as a set) and
    ``item`` the strategies inside its elements (``None`` when they have no merge lists).
    Lists without a ``ListRule`` have no patch strategy and are replaced wholesale.
    """

    key: str | None
    item: Mapping[str, Any] | None


# A strategy is a tree of read-only mappings: field name -> nested mapping (an object field
# with merge lists somewhere below it) or ListRule. Fields absent from it merge as plain maps.
Strategy = Mapping[str, Any]


def _freeze(spec: Mapping[str, Any]) -> Strategy:
    frozen: dict[str, Any] = {}
    for name, value in spec.items():
        if isinstance(value, ListRule):
            frozen[name] = ListRule(value.key, _freeze(value.item) if value.item is not None else None)
        else:
            frozen[name] = _freeze(value)
    return MappingProxyType(frozen)


def _merge_list(key: str | None = None, item: Mapping[str, Any] | None = None) -> ListRule:
    return ListRule(key, item)


# Struct tags of k8s.io/api (patchStrategy / patchMergeKey). Lists tagged only listType=map
# (resizePolicy, tolerations' absent tag, ...) have no patch strategy: SMP replaces them.
_OBJECT_META = {
    "finalizers": _merge_list(),
    "ownerReferences": _merge_list("uid"),
}
_CONTAINER = {
    "ports": _merge_list("containerPort"),
    "env": _merge_list("name"),
    "volumeMounts": _merge_list("mountPath"),
    "volumeDevices": _merge_list("devicePath"),
}
_POD_SPEC = {
    "containers": _merge_list("name", _CONTAINER),
    "initContainers": _merge_list("name", _CONTAINER),
    "ephemeralContainers": _merge_list("name", _CONTAINER),
    "volumes": _merge_list("name"),
    "imagePullSecrets": _merge_list("name"),
    "hostAliases": _merge_list("ip"),
    "topologySpreadConstraints": _merge_list("topologyKey"),
    "schedulingGates": _merge_list("name"),
    "resourceClaims": _merge_list("name"),
}
_POD_STATUS = {
    "conditions": _merge_list("type"),
    "podIPs": _merge_list("ip"),
    "hostIPs": _merge_list("ip"),
    "resourceClaimStatuses": _merge_list("name"),
}
_POD_TEMPLATE = {"metadata": _OBJECT_META, "spec": _POD_SPEC}
_CONDITIONS = {"conditions": _merge_list("type")}
_WORKLOAD = {"spec": {"template": _POD_TEMPLATE}, "status": _CONDITIONS}

_KINDS: dict[tuple[str, str], Mapping[str, Any]] = {
    ("", "Pod"): {"spec": _POD_SPEC, "status": _POD_STATUS},
    ("", "PodTemplate"): {"template": _POD_TEMPLATE},
    ("", "ReplicationController"): _WORKLOAD,
    ("", "Node"): {
        "spec": {"podCIDRs": _merge_list()},
        "status": {"conditions": _merge_list("type"), "addresses": _merge_list("type")},
    },
    ("", "Service"): {"spec": {"ports": _merge_list("port")}, "status": _CONDITIONS},
    ("", "Namespace"): {"status": _CONDITIONS},
    ("", "ServiceAccount"): {"secrets": _merge_list("name")},
    ("apps", "Deployment"): _WORKLOAD,
    ("apps", "DaemonSet"): _WORKLOAD,
    ("apps", "ReplicaSet"): _WORKLOAD,
    ("apps", "StatefulSet"): _WORKLOAD,
    ("batch", "Job"): _WORKLOAD,
    ("batch", "CronJob"): {"spec": {"jobTemplate": {"metadata": _OBJECT_META, "spec": {"template": _POD_TEMPLATE}}}},
    ("policy", "PodDisruptionBudget"): {"status": _CONDITIONS},
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): {"webhooks": _merge_list("name")},
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): {"webhooks": _merge_list("name")},
}


@lru_cache(maxsize=None)
def strategy_for(group: str, kind: str) -> Strategy:
    """The strategic-merge strategy tree of a built-in kind (read-only, shared between calls).

    Maps each field name to either a nested strategy (an object with merge lists below it) or a
    ``ListRule`` for a list with ``patchStrategy: merge``. Every kind gets ``metadata``'s
    (``finalizers`` as a set, ``ownerReferences`` by ``uid``); an unknown kind gets only that.
    """
    return _freeze({"metadata": _OBJECT_META, **_KINDS.get((group, kind), {})})


# --------------------------------------------------------------------------------------------
# Strategic merge patch: applying it
# --------------------------------------------------------------------------------------------

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_SET_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVES = "$deleteFromPrimitiveList/"
# Real field names that start with "$" (JSONSchemaProps in CRDs), merged like any other field.
_DOLLAR_FIELDS = frozenset({"$ref", "$schema"})
_DELETE: Any = object()


def _directive_of(patch: Mapping[str, Any]) -> str | None:
    """The map's ``$patch`` value (None when absent or ``merge``, the default)."""
    directive = patch.get(_DIRECTIVE, _MISSING)
    if directive is _MISSING or directive == "merge":
        return None
    if directive in ("replace", "delete"):
        return directive
    raise bad_request(f"unknown patch type: {directive!r} in map: $patch must be one of merge, replace, delete")


def _smp_map(orig: Mapping[str, Any] | None, patch: Mapping[str, Any], node: Strategy | None) -> Any:
    """Strategic merge of ``patch`` into ``orig`` (None: nothing there); a fresh dict, or _DELETE."""
    directive = _directive_of(patch)
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        orig = None
    out: dict[str, Any] = dict(orig) if orig is not None else {}
    fresh: set[str] = set()  # keys of out holding values built here rather than taken from orig
    retain: list[str] | None = None
    orders: dict[str, Any] = {}
    deletions: list[tuple[str, list[Any]]] = []
    for key, value in patch.items():
        if key.startswith("$") and key not in _DOLLAR_FIELDS:
            if key == _DIRECTIVE:
                continue
            if key == _RETAIN_KEYS:
                if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
                    raise bad_request("invalid patch format of retainKeys: $retainKeys must be a list of "
                                      "field names")
                retain = value
            elif key.startswith(_SET_ORDER):
                # kubectl apply sends this for every merge list it touches; a malformed one must
                # never fail the patch, so anything unusable is ignored.
                field = key[len(_SET_ORDER):]
                if field and isinstance(value, list):
                    orders[field] = value
            elif key.startswith(_DELETE_PRIMITIVES):
                field = key[len(_DELETE_PRIMITIVES):]
                if not field or not isinstance(value, list):
                    raise bad_request(f"invalid patch format of primitive list: {key} must name a field and "
                                      f"hold a list of values")
                deletions.append((field, value))
            else:
                raise bad_request(f"unknown strategic merge patch directive {key!r}: expected one of $patch, "
                                  f"$retainKeys, $setElementOrder/<field>, $deleteFromPrimitiveList/<field>")
    if retain is not None:
        allowed = set(retain)
        for key, value in patch.items():
            if value is not None and key not in allowed and not key.startswith("$"):
                raise bad_request(f"invalid patch format of retainKeys: field {key!r} is in the patch but "
                                  f"not in $retainKeys")
        # The patch only sets listed keys, so pruning before the merge equals pruning after it.
        out = {k: v for k, v in out.items() if k in allowed}

    for key, value in patch.items():
        if key.startswith("$") and key not in _DOLLAR_FIELDS:
            continue
        if value is None:
            # Nulls delete; one that matches nothing is dropped rather than stored.
            out.pop(key, None)
            fresh.discard(key)
            continue
        sub = node.get(key) if node is not None else None
        current = out.get(key, _MISSING)
        if isinstance(value, dict):
            merged = _smp_map(current if isinstance(current, dict) else None, value,
                              sub if isinstance(sub, MappingProxyType) else None)
            if merged is _DELETE:
                # As apimachinery does: "$patch: delete" empties a map that exists and adds nothing
                # where there was none.
                if current is _MISSING:
                    continue
                merged = {}
            out[key] = merged
        elif isinstance(value, list):
            rule = sub if isinstance(sub, ListRule) else None
            order = orders.pop(key, None)
            if rule is not None and isinstance(current, list):
                out[key] = _smp_list(current, value, rule, order)
            else:
                out[key] = _fresh_list(value, rule.item if rule is not None else None)
                if rule is not None and order is not None:
                    out[key] = _reorder(out[key], order, [], rule.key)
        else:
            out[key] = value
        fresh.add(key)

    for field, order in orders.items():
        # $setElementOrder for a list the patch leaves alone: only the order changes.
        rule = node.get(field) if node is not None else None
        current = out.get(field)
        if isinstance(rule, ListRule) and isinstance(current, list):
            out[field] = _reorder(current, order, current, rule.key)
    for field, values in deletions:
        current = out.get(field)
        if isinstance(current, list):
            drop = {_json_key(v) for v in values}
            out[field] = [item for item in current if _json_key(item) not in drop]

    for key, value in out.items():
        if key not in fresh:
            out[key] = _copy(value)
    return out


def _fresh_list(items: list[Any], item_node: Strategy | None) -> list[Any]:
    out = []
    for item in items:
        if isinstance(item, dict):
            # Directive elements only make sense against a list on the server: with nothing there,
            # a deletion deletes nothing and a replace marker replaces with the rest.
            if _directive_of(item) is not None:
                continue
            merged = _smp_map(None, item, item_node)
            out.append(merged)
        else:
            out.append(_copy(item))
    return out


def _smp_list(orig: list[Any], patch: list[Any], rule: ListRule, order: list[Any] | None) -> list[Any]:
    """Strategic merge of a ``patchStrategy: merge`` list; a fresh list."""
    if rule.key is None:
        # Primitives merge as a set union, first occurrence kept.
        seen: set[Any] = set()
        merged = []
        for item in (*orig, *patch):
            k = _json_key(item)
            if k not in seen:
                seen.add(k)
                merged.append(_copy(item))
        return _reorder(merged, patch if order is None else order, orig, None)

    key = rule.key
    plain: list[Mapping[str, Any]] = []
    replace = False
    work: list[Any] = list(orig)
    for item in patch:
        if not isinstance(item, dict):
            raise bad_request(f"the elements of a list merged by {key!r} must be objects, got {_kind_of(item)}")
        directive = _directive_of(item)
        if directive is None:
            plain.append(item)
        elif directive == "delete":
            if key not in item:
                raise bad_request(f"map: {dict(item)!r} does not contain declared merge key: {key}")
            gone = _json_key(item[key])
            work = [w for w in work if not (isinstance(w, dict) and key in w and _json_key(w[key]) == gone)]
        else:
            # {"$patch": "replace"} among the elements: the other elements are the whole list.
            replace = True

    if replace:
        merged = _fresh_list(plain, rule.item)
        return _reorder(merged, order, merged, key) if order is not None else merged

    server = list(work)
    fresh_ids: set[int] = set()
    for item in plain:
        if key not in item:
            raise bad_request(f"map: {dict(item)!r} does not contain declared merge key: {key}")
        wanted = _json_key(item[key])
        for i, existing in enumerate(work):
            if isinstance(existing, dict) and key in existing and _json_key(existing[key]) == wanted:
                merged_item = _smp_map(existing, item, rule.item)
                work[i] = merged_item
                fresh_ids.add(id(merged_item))
                break
        else:
            new_item = _smp_map(None, item, rule.item)
            work.append(new_item)
            fresh_ids.add(id(new_item))
    merged = [w if id(w) in fresh_ids else _copy(w) for w in work]
    return _reorder(merged, plain if order is None else order, server, key)


def _order_key(item: Any, key: str | None) -> Any:
    """What identifies a list item for ordering: its merge key's value, or the item itself."""
    if key is None:
        return _json_key(item)
    if isinstance(item, dict) and key in item:
        return _json_key(item[key])
    return ("unkeyed", id(item))  # never matches anything


def _reorder(merged: list[Any], wanted: list[Any], server: list[Any], key: str | None) -> list[Any]:
    """apimachinery's ordering of a merged list.

    Items named in ``wanted`` (the patch list or ``$setElementOrder``) come in that order; the
    others keep their order. The two sequences are then interleaved: a server-only item goes
    first only when both it and the next named item were on the ``server`` and it came earlier
    there, so an item new to the list lands before the server-only items after it.
    """
    rank: dict[Any, int] = {}
    for i, entry in enumerate(wanted):
        if key is not None and not (isinstance(entry, dict) and key in entry):
            continue  # a malformed $setElementOrder entry is ignored, never an error
        rank.setdefault(_order_key(entry, key), i)
    keyed = [(_order_key(item, key), item) for item in merged]
    named = sorted((pair for pair in keyed if pair[0] in rank), key=lambda pair: rank[pair[0]])
    others = [pair for pair in keyed if pair[0] not in rank]

    position: dict[Any, int] = {}
    for i, item in enumerate(server):
        position.setdefault(_order_key(item, key), i)
    out = []
    i = j = 0
    while i < len(others) and j < len(named):
        left = position.get(others[i][0])
        right = position.get(named[j][0])
        if left is not None and right is not None and left < right:
            out.append(others[i][1])
            i += 1
        else:
            out.append(named[j][1])
            j += 1
    out.extend(item for _, item in others[i:])
    out.extend(item for _, item in named[j:])
    return out


def apply_strategic_merge_patch(doc: dict, patch: dict, group: str, kind: str) -> dict:
    """Apply a Kubernetes strategic merge patch to ``doc`` (a built-in ``group``/``kind``).

    Like a JSON merge patch, except that lists tagged ``patchStrategy: merge`` (see
    ``strategy_for``) merge element by element on their merge key, or as a set for primitives,
    and the directives ``$patch`` (merge, replace, delete; in maps and as list elements),
    ``$retainKeys``, ``$setElementOrder/<field>`` and ``$deleteFromPrimitiveList/<field>`` are
    honoured. An unknown ``$`` directive, an unknown ``$patch`` value or a merge-list element
    without its merge key raises 400.
    """
    if not isinstance(patch, dict):
        raise bad_request(f"a strategic merge patch must be a JSON object, got {_kind_of(patch)}")
    merged = _smp_map(doc if isinstance(doc, dict) else None, patch, strategy_for(group, kind))
    return {} if merged is _DELETE else merged
