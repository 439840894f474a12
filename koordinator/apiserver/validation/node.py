"""node.k8s.io/v1: RuntimeClass."""

from __future__ import annotations

from koordinator.apiserver.validation.causes import IMMUTABLE, Causes, Obj, as_dict, as_str, invalid
from koordinator.apiserver.validation.core import validate_resource_list
from koordinator.apiserver.validation.formats import name_is_dns_label
from koordinator.apiserver.validation.meta import validate_labels, validate_object_meta
from koordinator.apiserver.validation.podspec import validate_tolerations


# -- node.k8s.io/v1 ---------------------------------------------------------------------------


def validate_runtime_class(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    handler = as_str(obj.get("handler"))
    causes.extend(invalid("handler", handler, m) for m in name_is_dns_label(handler, False))
    overhead = as_dict(as_dict(obj.get("overhead")).get("podFixed"))
    causes.extend(validate_resource_list(overhead, "overhead.podFixed"))
    scheduling = as_dict(obj.get("scheduling"))
    causes.extend(validate_labels(scheduling.get("nodeSelector"), "scheduling.nodeSelector"))
    causes.extend(validate_tolerations(scheduling.get("tolerations"), "scheduling.tolerations"))
    if old is not None and obj.get("handler") != old.get("handler"):
        causes.append(invalid("handler", handler, IMMUTABLE))
    return causes
