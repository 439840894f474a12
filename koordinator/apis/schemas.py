"""The schemas in ``schemas/``: loading them and validating objects and config documents.

``schemas/`` is the single source of truth for every kind we serve as a CRD and every
configuration document a role reads (see ``schemas/README.md`` for the layout). Each schema
is a Kubernetes structural schema (the subset of JSON Schema an ``openAPIV3Schema`` may use),
so a CRD is generated from it 1:1 (``scripts/gen_crds.py``). Two conveniences are resolved at
load time and never reach a CRD: ``$ref`` to a shared definition (``common.yaml#/Quantity``,
siblings of the ``$ref`` override the definition's keys) and the ``x-koordinator-*`` blocks
that describe the CRD or the ConfigMap key a document lives in.

Validation runs the same structural-schema engine as the embedded API server, so an object
this module accepts is one the server accepts, with the same wording for the failures. On top
of that, for people editing a config document by hand, it

* reports every field the schema does not know (the server would silently prune it from a
  custom object; a role would silently ignore it in a ConfigMap), suggesting the real field
  when the name differs only in case or by a typo, and
* checks the ``quantity`` and ``duration`` formats, which Kubernetes does not know:
  ``spec.min.cpu: Invalid value: "abc": is not a valid quantity``.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

import yaml

from koordinator.apis import quantity
# The engine the API server uses too, so this module and the server can never disagree on a verdict.
from koordinator.apis.crdschema import StructuralSchema

Obj = dict[str, Any]

CRD_EXTENSION = "x-koordinator-crd"
CONFIG_EXTENSION = "x-koordinator-config"
_EXTENSIONS = (CRD_EXTENSION, CONFIG_EXTENSION, "$schema", "$id")

# Go's time.ParseDuration: one or more <number><unit>, or a bare 0.
_GO_DURATION = re.compile(r"[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+\Z|[-+]?0\Z")
_PATH_PART = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


class SchemaNotFound(LookupError):
    """No schema exists for the kind or document asked for; the message lists what exists."""


@dataclass(frozen=True)
class FieldError:
    """One problem with a document, at a JSON path such as ``spec.containers[0].resources.requests.cpu``."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass(frozen=True)
class CRDSchema:
    """A served kind: its group/version/kind, the CRD settings and the resolved ``openAPIV3Schema``."""

    group: str
    version: str
    kind: str
    crd: Obj
    schema: Obj
    source: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @functools.cached_property
    def engine(self) -> StructuralSchema:
        return StructuralSchema(self.schema)


@dataclass(frozen=True)
class ConfigSchema:
    """A configuration document: where it lives (ConfigMap and key), its encoding and schema."""

    name: str
    version: str
    config: Obj
    schema: Obj
    source: str

    @property
    def encoding(self) -> str:
        return self.config.get("encoding", "json")

    @functools.cached_property
    def engine(self) -> StructuralSchema:
        return StructuralSchema(self.schema)


def schema_root() -> Path:
    """The ``schemas`` folder, installed as the package ``koordinator_schemas`` (so it ships inside wheels and images)."""
    return Path(str(resources.files("koordinator_schemas")))


_FAST_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=None)
def _read(relpath: str) -> Any:
    path = schema_root() / relpath
    try:
        with open(path, encoding="utf-8") as f:
            # Our own files: libyaml's loader when present (every role reads them all at start).
            return yaml.load(f, Loader=_FAST_SAFE_LOADER)
    except FileNotFoundError:
        raise SchemaNotFound(f"schema file {relpath!r} does not exist under {schema_root()}") from None


def _pointer(doc: Any, pointer: str, ref: str) -> Any:
    cur = doc
    for part in (p for p in pointer.split("/") if p):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(cur, dict) or part not in cur:
            raise SchemaNotFound(f"$ref {ref!r}: {part!r} not found")
        cur = cur[part]
    return cur


def _resolve(node: Any, here: str, seen: tuple[str, ...] = ()) -> Any:
    """``node`` with every ``$ref`` replaced by a copy of its target (refs are relative to ``schemas/``)."""
    if isinstance(node, list):
        return [_resolve(x, here, seen) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"]
        file, _, pointer = ref.partition("#")
        file = file or here
        key = f"{file}#{pointer}"
        if key in seen:
            raise SchemaNotFound(f"$ref cycle: {' -> '.join(seen + (key,))}")
        target = _resolve(copy.deepcopy(_pointer(_read(file), pointer, ref)), file, seen + (key,))
        siblings = {k: _resolve(v, here, seen) for k, v in node.items() if k != "$ref"}
        return {**target, **siblings}
    return {k: _resolve(v, here, seen) for k, v in node.items()}


def load(relpath: str) -> Obj:
    """The schema file at ``relpath`` (relative to ``schemas/``) with its ``$ref``s resolved."""
    return _resolve(_read(relpath), relpath)


def openapi_schema(doc: Obj) -> Obj:
    """The schema as it goes into a CRD: our ``x-koordinator-*`` blocks and ``$schema`` removed."""
    return {k: v for k, v in doc.items() if k not in _EXTENSIONS}


def _files(sub: str) -> list[str]:
    root = schema_root()
    return sorted(str(p.relative_to(root)) for p in (root / sub).rglob("*.yaml"))


def _documents(sub: str, layout: str, extension: str) -> Iterable[tuple[str, tuple[str, ...], Obj]]:
    """Each ``schemas/<sub>`` file as (path, the path's parts after ``sub`` with the stem last, doc)."""
    depth = layout.count("/")
    for rel in _files(sub):
        parts = Path(rel).parts
        if len(parts) != depth + 2:  # sub, the layout's folders, the file
            raise SchemaNotFound(f"{rel}: expected {sub}/{layout}")
        doc = load(rel)
        if extension not in doc:
            raise SchemaNotFound(f"{rel}: missing the {extension} block")
        yield rel, (*parts[1:-1], Path(parts[-1]).stem), doc


@functools.lru_cache(maxsize=None)
def crd_schemas() -> tuple[CRDSchema, ...]:
    """Every served kind, from ``schemas/crds/<group>/<version>/<Kind>.yaml``."""
    return tuple(CRDSchema(group, version, kind, doc[CRD_EXTENSION], openapi_schema(doc), rel)
                 for rel, (group, version, kind), doc in _documents("crds", "<group>/<version>/<Kind>.yaml",
                                                                    CRD_EXTENSION))


@functools.lru_cache(maxsize=None)
def config_schemas() -> tuple[ConfigSchema, ...]:
    """Every configuration document, from ``schemas/config/<name>/<version>.yaml``."""
    return tuple(ConfigSchema(name, version, doc[CONFIG_EXTENSION], openapi_schema(doc), rel)
                 for rel, (name, version), doc in _documents("config", "<name>/<version>.yaml", CONFIG_EXTENSION))


def object_schema(api_version: str, kind: str) -> CRDSchema:
    """The schema of a served kind, by the ``apiVersion`` and ``kind`` an object carries."""
    for s in crd_schemas():
        if s.api_version == api_version and s.kind == kind:
            return s
    known = ", ".join(sorted(f"{s.api_version} {s.kind}" for s in crd_schemas()))
    raise SchemaNotFound(f"no schema for apiVersion {api_version!r} kind {kind!r}; known kinds: {known}")


def config_schema(name: str, version: str | None = None) -> ConfigSchema:
    """The schema of config document ``name`` (e.g. ``colocation-config``); the newest version if none is given."""
    found = [s for s in config_schemas() if s.name == name and (version is None or s.version == version)]
    if not found:
        known = ", ".join(sorted({f"{s.name}/{s.version}" for s in config_schemas()}))
        raise SchemaNotFound(f"no schema for config document {name!r}"
                             f"{f' version {version!r}' if version else ''}; known documents: {known}")
    return max(found, key=lambda s: version_order(s.version))


def version_order(v: str) -> tuple[int, int, int]:
    """Sort key for API versions by Kubernetes priority: GA > beta > alpha, then by number."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", v)
    if not m:
        return (-1, 0, 0)
    stage = {"alpha": 0, "beta": 1, None: 2}[m.group(2)]
    return (stage, int(m.group(1)), int(m.group(3) or 0))


def crd_manifests() -> dict[str, Obj]:
    """The CustomResourceDefinition of every kind, keyed by file name (``<group>_<plural>.yaml``, as controller-gen)."""
    by_kind: dict[tuple[str, str], list[CRDSchema]] = {}
    for s in crd_schemas():
        by_kind.setdefault((s.group, s.kind), []).append(s)
    out: dict[str, Obj] = {}
    for (group, kind), versions in sorted(by_kind.items()):
        first = versions[0].crd
        plural = first["plural"]
        names: Obj = {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                      "singular": first.get("singular", kind.lower())}
        for k in ("shortNames", "categories"):
            if first.get(k):
                names[k] = list(first[k])
        metadata: Obj = {"name": f"{plural}.{group}"}
        if first.get("annotations"):
            metadata["annotations"] = dict(first["annotations"])
        crd_versions = []
        for s in sorted(versions, key=lambda v: v.version):
            v: Obj = {"name": s.version}
            if s.crd.get("additionalPrinterColumns"):
                v["additionalPrinterColumns"] = s.crd["additionalPrinterColumns"]
            v["schema"] = {"openAPIV3Schema": s.schema}
            v["served"] = s.crd.get("served", True)
            v["storage"] = s.crd.get("storage", True)
            if s.crd.get("subresources"):
                v["subresources"] = s.crd["subresources"]
            crd_versions.append(v)
        if sum(1 for v in crd_versions if v["storage"]) != 1:
            raise SchemaNotFound(f"{group} {kind}: exactly one version must have storage: true")
        out[f"{group}_{plural}.yaml"] = {
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": metadata,
            "spec": {"group": group, "names": names, "scope": first.get("scope", "Namespaced"),
                     "versions": crd_versions}}
    return out


# -- validation ------------------------------------------------------------------------------


def validate_object(obj: Any) -> list[FieldError]:
    """Validate a custom object (one of our kinds) as the API server would, plus unknown fields and formats."""
    if not isinstance(obj, dict):
        return [FieldError("", f"must be an object, got {_type_name(obj)}")]
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not api_version or not kind:
        missing = [k for k, v in (("apiVersion", api_version), ("kind", kind)) if not v]
        return [FieldError(k, "Required value") for k in missing]
    cs = object_schema(api_version, kind)
    return _validate(cs.engine, cs.schema, obj)[1]


def with_defaults(obj: Obj) -> Obj:
    """A custom object (one of our kinds) as the API server stores it: schema defaults applied.

    Controllers compare what they derive with what is stored through this, so that fields the
    server defaults do not look like a difference on every reconcile.
    """
    cs = object_schema(obj["apiVersion"], obj["kind"])
    return cs.engine.process(obj).obj


def validate_config(name: str, document: Any, version: str | None = None) -> tuple[Any, list[FieldError]]:
    """Validate config document ``name``; ``document`` may be parsed data or the text of a ConfigMap key.

    Returns the document as a role would use it (parsed, defaults applied) and the errors;
    a document with errors must not be put into force.
    """
    cs = config_schema(name, version)
    if isinstance(document, (str, bytes)):
        try:
            document = json.loads(document) if cs.encoding == "json" else yaml.safe_load(document)
        except (ValueError, yaml.YAMLError) as exc:
            return None, [FieldError("", f"{name} is not valid {cs.encoding.upper()}: {_parse_error(exc)}")]
    return _validate(cs.engine, cs.schema, document)


def validate(schema: Obj, document: Any) -> tuple[Any, list[FieldError]]:
    """Prune-check, default and validate ``document`` against a resolved schema."""
    return _validate(StructuralSchema(schema), schema, document)


def _validate(engine: StructuralSchema, schema: Obj, document: Any) -> tuple[Any, list[FieldError]]:
    result = engine.process(document)
    format_errors = _format_errors(schema, result.obj, "")
    format_paths = {e.path for e in format_errors}
    # A value our format check refuses is reported once, in its words ("not a valid quantity"),
    # not also as the engine's pattern or format failure.
    errors = [FieldError(c["field"], c["message"]) for c in result.causes if c["field"] not in format_paths]
    errors += format_errors
    errors += [_unknown_field(schema, p) for p in result.unknown_fields]
    return result.obj, errors


def _parse_error(exc: Exception) -> str:
    """What is wrong and where (1-based line and column), from a JSON or YAML parser error."""
    mark = getattr(exc, "problem_mark", None)
    if isinstance(exc, yaml.MarkedYAMLError) and mark is not None:
        return f"{exc.problem} at line {mark.line + 1}, column {mark.column + 1}"
    return str(exc).splitlines()[0]


def _format_errors(node: Any, value: Any, path: str) -> list[FieldError]:
    if not isinstance(node, dict):
        return []
    fmt = node.get("format")
    if (fmt == "quantity" or node.get("pattern") == _quantity_pattern()) and value is not None:
        try:
            quantity.parse(value)
        except quantity.QuantityError:
            return [FieldError(path, f"Invalid value: {_render(value)}: is not a valid quantity")]
        return []
    if fmt == "duration" and isinstance(value, str) and not _GO_DURATION.match(value):
        return [FieldError(path, f"Invalid value: {_render(value)}: is not a valid duration (e.g. 30s, 10m, 1h30m)")]
    out: list[FieldError] = []
    if isinstance(value, dict):
        props = node.get("properties") or {}
        extra = node.get("additionalProperties")
        for k, v in value.items():
            sub = props.get(k, extra if isinstance(extra, dict) else None)
            if sub is not None:
                out += _format_errors(sub, v, f"{path}.{k}" if path else k)
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, v in enumerate(value):
            out += _format_errors(node["items"], v, f"{path}[{i}]")
    return out


@functools.lru_cache(maxsize=1)
def _quantity_pattern() -> str:
    """The pattern controller-gen gives ``resource.Quantity`` fields (CRDs carry it instead of a format)."""
    return _read("common.yaml")["Quantity"]["pattern"]


def value_at(document: Any, path: str) -> tuple[bool, Any]:
    """The value at a :class:`FieldError` path (``a.b[0].c``) in ``document``: ``(found, value)``."""
    node = document
    for name, index in _PATH_PART.findall(path):
        if index and isinstance(node, list) and int(index) < len(node):
            node = node[int(index)]
        elif name and isinstance(node, dict) and name in node:
            node = node[name]
        else:
            return False, None
    return True, node


def _node_at(schema: Obj, path: str) -> Obj | None:
    """The schema node describing the value at ``path`` (``a.b[0].c``), or None."""
    node: Any = schema
    for name, index in _PATH_PART.findall(path):
        if not isinstance(node, dict):
            return None
        if index:
            node = node.get("items")
        elif name in (node.get("properties") or {}):
            node = node["properties"][name]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return None
    return node if isinstance(node, dict) else None


def _unknown_field(schema: Obj, path: str) -> FieldError:
    parent_path, _, name = path.rpartition(".")
    if "[" in name:  # "items[0]" style tails cannot be unknown fields, but be safe
        parent_path, name = path, ""
    parent = _node_at(schema, parent_path) if parent_path else schema
    known = sorted((parent or {}).get("properties") or {})
    hint = suggest(name, known)
    return FieldError(path, "unknown field" + (f", did you mean {hint!r}?" if hint else ""))


def suggest(name: str, known: Iterable[str]) -> str | None:
    """The name in ``known`` that ``name`` probably meant: same but for case, else a close typo."""
    known = list(known)
    for k in known:
        if k.lower() == name.lower():
            return k
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    return close[0] if close else None


def _render(value: Any) -> str:
    return json.dumps(value)


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)
