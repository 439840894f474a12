"""``/validate-configmap``: the ``slo-controller-config`` ConfigMap (reference B.2.11).

Only ``<config-namespace>/<slo-config-name>`` is judged; DELETE is allowed. Each key whose value is
non-empty and differs from the old ConfigMap is checked; Koordinator's five checked keys, in its
order (colocation, resource-threshold, resource-qos, system, cpu-burst), go through:

1. JSON parsing (``ParseConfigFail``);
2. every ``nodeConfigs``/``nodeStrategies`` entry needs a non-empty, parseable ``nodeSelector``;
3. the document's schema (``schemas/config/<key>``, the role's own rules; stands in for Koordinator's
   struct validator tags) — paths are named ``data.<key>.<field>``;
4. resource-qos-config only: the network QoS values (int 0–100 or quantity, one format per
   strategy, requests summing to ≤ 100 and ≤ system-config's totalNetworkBandwidth);
5. with ``--node-strategy-name-need-check``: a non-empty, unique ``name`` per entry;
6. the overlap check over "virtual nodes" built from each selector. As in Koordinator the
   expressions' operators are ignored when building them (a ``NotIn [v]`` selector makes a node
   WITH ``key=v``, which that selector itself rejects), so some real overlaps go unnoticed here
   (``a NotIn [x]`` vs ``a Exists``); the node conflict check below still catches them on real
   nodes. Kept as is so existing ConfigMaps are judged exactly as koord-manager judges them.

The other known keys (host-application, cpu-normalization, resource-amplification) are schema-checked
only (Koordinator has no checker for them); keys no document claims are ignored, as koord-manager does.
Finally, when some checked key has more than one node entry, every Node must be matched by at most one
entry per key. Rejections are answered with code 400 and Koordinator's ``___{json}___`` texts.

Deviation: Koordinator's resource-qos checker fails to parse an absent ``system-config`` key
(``unexpected end of JSON input``) and so rejects every network-QoS edit on a ConfigMap without one;
here an absent system-config counts as ``{}`` (no bandwidth configured).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Iterable

from koordinator.apis import config_documents, quantity, schemas
from koordinator.apis.selectors import SelectorError, label_selector_from_dict
from koordinator.runtime.webhook import AdmissionResponse, allowed, errored
from koordinator_roles.manager.webhooks import _request as rq
from koordinator_roles.manager.webhooks.listers import Listers

log = logging.getLogger("koordinator.manager.webhooks.configmap")

Obj = dict[str, Any]

REASON_OVERLAP = "NodeStrategiesOverlap"
REASON_NODE_CONFLICT = "ExistNodeConfict"  # (sic)
REASON_PARSE_FAIL = "ParseConfigFail"
REASON_PARAM_INVALID = "ConfigParamInvalid"

# key -> (name in Koordinator's parse messages, field holding the node entries)
CHECKED_KEYS = {
    "colocation-config": ("Colocation", "nodeConfigs"),
    "resource-threshold-config": ("ResourceThreshold", "nodeStrategies"),
    "resource-qos-config": ("ResourceQOS", "nodeStrategies"),
    "system-config": ("SystemConfig", "nodeStrategies"),
    "cpu-burst-config": ("CPUBurst", "nodeStrategies"),
}
SYSTEM_KEY = "system-config"
QOS_KEY = "resource-qos-config"
NET_CLASSES = (("lsrClass", "LSRClass"), ("lsClass", "LSClass"), ("beClass", "BEClass"))
NET_FIELDS = (("ingressRequest", "IngressRequest"), ("ingressLimit", "IngressLimit"),
              ("egressRequest", "EgressRequest"), ("egressLimit", "EgressLimit"))
PERCENT_MSG = "must be percentage value just in 0-100'"  # (sic, Koordinator's text)


class ConfigRejected(Exception):
    """A ConfigMap the webhook refuses; ``str()`` is the message sent back."""


def json_error(reason: str, message: Any) -> str:
    """Koordinator's ``JsonFormatError``: ``___{"reason": ..., "message": ...}___``."""
    body = json.dumps({"reason": reason, "message": message}, ensure_ascii=False, separators=(",", ":"))
    # Go's encoder escapes HTML characters.
    body = body.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f"___{body}___"


class NodeProfiles:
    """The node entries of one key: names and compiled selectors (``nodeConfigProfileChecker``)."""

    def __init__(self, key: str, entries: list[tuple[str, Obj, Any]]) -> None:
        self.key = key
        self.entries = entries  # (name, raw selector, compiled selector)

    @classmethod
    def from_document(cls, key: str, doc: Obj, field: str) -> "NodeProfiles":
        entries: list[tuple[str, Obj, Any]] = []
        raw_entries = doc.get(field)
        for entry in raw_entries if isinstance(raw_entries, list) else []:
            if not isinstance(entry, dict):
                continue  # the schema reports it
            name = entry.get("name") if isinstance(entry.get("name"), str) else ""
            sel = entry.get("nodeSelector")
            if sel is not None and not isinstance(sel, dict):
                continue
            if not sel or (not sel.get("matchLabels") and not sel.get("matchExpressions")):
                raise ConfigRejected(json_error(REASON_PARAM_INVALID, (
                    f"nodeConfigs NodeSelector must not empty error! configType: {key},nodeConfig name:{name}")))
            try:
                compiled = label_selector_from_dict(sel)
            except (SelectorError, TypeError, AttributeError, ValueError) as exc:
                raise ConfigRejected(json_error(REASON_PARAM_INVALID, (
                    f"failed to parse node selector {json.dumps(sel, sort_keys=True)},configType: {key},"
                    f"nodeConfig name:{name}, err: {exc}"))) from None
            entries.append((name, sel, compiled))
        return cls(key, entries)

    def has_multiple(self) -> bool:
        return len(self.entries) > 1

    def check_names(self) -> None:
        seen: set[str] = set()
        for name, _, _ in self.entries:
            if not name:
                raise ConfigRejected(json_error(REASON_PARAM_INVALID, f"nodeConfig Name need! configType:{self.key}"))
            if name in seen:
                raise ConfigRejected(json_error(REASON_PARAM_INVALID, (
                    f"nodeConfig Name confilict, configType:{self.key},nodeConfig Name:{name}! ")))
            seen.add(name)

    def check_overlap(self) -> None:
        for node in (n for _, sel, _ in self.entries for n in virtual_nodes(sel)):
            matched = [name for name, _, compiled in self.entries if compiled.matches(node)]
            if len(matched) > 1:
                raise ConfigRejected(json_error(REASON_OVERLAP, {"config": self.key, "strategies": matched}))

    def check_node(self, node: Obj) -> None:
        if not self.has_multiple():
            return
        labels = rq.labels(node)
        matched = [name for name, _, compiled in self.entries if compiled.matches(labels)]
        if len(matched) > 1:
            raise ConfigRejected(json_error(REASON_NODE_CONFLICT, {
                "config": self.key, "strategies": matched, "exampleNodes": [rq.name(node)]}))


def virtual_nodes(selector: Obj) -> list[dict[str, str]]:
    """Label sets standing for the nodes a selector aims at (operators ignored, as in Koordinator).

    One node per combination: their number is the product of the value counts of the expressions
    that have values; node i takes ``values[i mod len(values)]`` of each such expression and every
    matchLabels pair. Exists/DoesNotExist expressions add nothing.
    """
    expressions = [e for e in selector.get("matchExpressions") or [] if isinstance(e, dict)]
    count = 1
    for e in expressions:
        if e.get("values"):
            count *= len(e["values"])
    nodes: list[dict[str, str]] = [dict(selector.get("matchLabels") or {}) for _ in range(count)]
    for e in expressions:
        values = e.get("values") or []
        if values:
            for i, node in enumerate(nodes):
                node[e.get("key", "")] = values[i % len(values)]
    return nodes


class ConfigMapValidatingHandler:
    """The ``/validate-configmap`` handler for ``<namespace>/<name>``."""

    def __init__(self, listers: Listers, *, namespace: str = "koordinator-system",
                 name: str = "slo-controller-config", node_strategy_name_need_check: bool = False) -> None:
        self.listers = listers
        self.namespace = namespace
        self.name = name
        self.name_check = node_strategy_name_need_check

    def __call__(self, request: Obj) -> AdmissionResponse:
        if rq.ignored(request, "configmaps"):
            return allowed()
        op = rq.operation(request)
        if op not in (rq.CREATE, rq.UPDATE):
            if op == rq.DELETE and request.get("name") == self.name and request.get("namespace") == self.namespace:
                log.warning("%s/%s deleted by user %s", self.namespace, self.name,
                            (request.get("userInfo") or {}).get("username", ""))
            return allowed()
        try:
            config, old = rq.object_and_old(request)
        except rq.BadObject as exc:
            return errored(400, str(exc))
        namespace = rq.meta(config).get("namespace") or request.get("namespace") or ""
        if namespace != self.namespace or rq.name(config) != self.name:
            return allowed()
        try:
            self.check(config, old)
        except ConfigRejected as exc:
            log.warning("rejected %s/%s: %s", namespace, self.name, exc)
            return errored(400, str(exc))
        return allowed()

    def check(self, config: Obj, old: Obj | None) -> None:
        """Raise :class:`ConfigRejected` when ``config`` may not replace ``old``."""
        data = config.get("data") or {}
        old_data = None if old is None else (old.get("data") or {})
        if not isinstance(data, dict):
            raise ConfigRejected(json_error(REASON_PARSE_FAIL, "data: must be an object of strings"))
        changed = [k for k, v in data.items()
                   if isinstance(v, str) and v and (old_data is None or old_data.get(k) != v)]
        profiles: list[NodeProfiles] = []
        for key, (label, entries_field) in CHECKED_KEYS.items():
            if key not in changed:
                continue
            doc = self._parse(config, key, data[key], label)
            checker = NodeProfiles.from_document(key, doc, entries_field)
            _schema_check(key, data[key])
            if key == QOS_KEY:
                system = self._parse(config, SYSTEM_KEY, data.get(SYSTEM_KEY) or "{}", "System")
                net_qos_check(doc, system)
            if self.name_check:
                checker.check_names()
            checker.check_overlap()
            profiles.append(checker)
        # (The documents are looked up by Koordinator's name: --slo-config-name may rename the ConfigMap.)
        known = {d.config.get("key") for d in config_documents.documents_of("slo-controller-config")}
        for key in sorted(k for k in changed if k in known and k not in CHECKED_KEYS):
            _schema_check(key, data[key])
        if any(p.has_multiple() for p in profiles):
            for node in sorted(self.listers.nodes(), key=rq.name):
                for checker in profiles:
                    checker.check_node(node)

    def _parse(self, config: Obj, key: str, text: str, label: str) -> Obj:
        try:
            doc = json.loads(text)
            if not isinstance(doc, dict):
                raise ValueError(f"json: cannot unmarshal {type(doc).__name__} into Go value of type {label}Cfg")
        except ValueError as exc:
            md = rq.meta(config)
            raise ConfigRejected(json_error(REASON_PARSE_FAIL, (
                f"Failed to parse {label} config in configmap {md.get('namespace') or self.namespace}/"
                f"{md.get('name')}, err: {exc}"))) from None
        return doc


def _schema_check(key: str, text: str) -> None:
    try:
        _, errors = schemas.validate_config(key, text)
    except schemas.SchemaNotFound:
        return
    if errors:
        texts = [f"data.{key}.{e.path}: {e.message}" if e.path else f"data.{key}: {e.message}" for e in errors]
        message = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
        raise ConfigRejected(json_error(REASON_PARAM_INVALID, message))


# -- network QoS ---------------------------------------------------------------------------------

def _strategies(doc: Obj) -> Iterable[tuple[str, int | None, Obj]]:
    """(label, node index or None, strategy) for the cluster strategy and each node strategy."""
    cluster = doc.get("clusterStrategy")
    if isinstance(cluster, dict):
        yield "ClusterStrategy", None, cluster
    for i, node in enumerate(doc.get("nodeStrategies") or []):
        if isinstance(node, dict):
            yield f"nodeStrategy.{i}", i, node


def _net(strategy: Obj, cls: str) -> Obj:
    value = (strategy.get(cls) or {}).get("networkQOS") if isinstance(strategy.get(cls), dict) else None
    return value if isinstance(value, dict) else {}


def net_qos_check(doc: Obj, system: Obj) -> None:
    """Koordinator's ``CheckNetQosCfg``: element validity, one format, percent sum, bandwidth sum."""
    for label, _, strategy in _strategies(doc):
        for cls, cls_label in NET_CLASSES:
            net = _net(strategy, cls)
            for fld, fld_label in NET_FIELDS:
                value = net.get(fld)
                path = f"ResourceQOSCfg.{label}.{cls_label}.{fld_label}"
                if isinstance(value, str):
                    try:
                        quantity.parse_quantity(value)
                    except quantity.QuantityError as exc:
                        raise ConfigRejected(f'{path}: Invalid value: {json.dumps(value)}: {exc}') from None
                elif isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= 100:
                    raise ConfigRejected(f"{path}: Invalid value: {value}: {PERCENT_MSG}")
    for label, index, strategy in _strategies(doc):
        kinds = {type(v) for cls, _ in NET_CLASSES for v in (_net(strategy, cls).get("ingressRequest"),
                                                             _net(strategy, cls).get("egressRequest"))
                 if v is not None}
        if len(kinds) > 1:
            where = "clusterStrategy" if index is None else f"nodeStrategy[{index}]"
            raise ConfigRejected(f"only one type can be used for percentages or quantity in {where}")
    for label, index, strategy in _strategies(doc):
        ingress, egress = _left(strategy, 100)
        if ingress < 0 or egress < 0:
            where = "ClusterStrategy" if index is None else f"cfg.NodeStrategies[{index}]"
            raise ConfigRejected(f"{where} total net bandwidth percentage already over 100")
    sys_cluster = system.get("clusterStrategy") if isinstance(system.get("clusterStrategy"), dict) else None
    sys_nodes = [s for s in system.get("nodeStrategies") or [] if isinstance(s, dict)]
    for label, index, strategy in _strategies(doc):
        if index is None:
            if sys_cluster is None:
                continue
            total = _bandwidth(sys_cluster)
        elif not sys_nodes and sys_cluster is not None:
            total = _bandwidth(sys_cluster)
        else:
            same = next((s for s in sys_nodes if s.get("nodeSelector") == strategy.get("nodeSelector")), None)
            total = _bandwidth(same) if same is not None else 0
        ingress, egress = _left(strategy, total)
        if ingress < 0 or egress < 0:
            if index is None:
                raise ConfigRejected("total net bandwidth over total network bandwidth in clusterStrategy")
            raise ConfigRejected(
                f"total net bandwidth quantity already over total network bandwidth in cfg.NodeStrategies[{index}]")


def _bandwidth(strategy: Obj) -> int:
    raw = strategy.get("totalNetworkBandwidth")
    try:
        return quantity.value(raw) if raw is not None else 0
    except quantity.QuantityError:
        return 0


def _left(strategy: Obj, total: int) -> tuple[int, int]:
    """``doSubstration``: total minus every class's requests (ints and quantity values alike)."""
    ingress = egress = total
    for cls, _ in NET_CLASSES:
        net = _net(strategy, cls)
        ingress -= _amount(net.get("ingressRequest"))
        egress -= _amount(net.get("egressRequest"))
    return ingress, egress


def _amount(value: Any) -> int:
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return quantity.value(value)
        except quantity.QuantityError:
            return 0
    return 0
