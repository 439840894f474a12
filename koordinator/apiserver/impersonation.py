"""User impersonation (``kubectl --as``, ``--as-group``, ``--as-uid``, ``--as-user-extra``), as kube's filter.

A request carrying ``Impersonate-User`` (and optionally any number of ``Impersonate-Group``
headers, an ``Impersonate-Uid`` and ``Impersonate-Extra-<key>`` headers) is served as the user
those headers describe, once the authorizer lets the requester ``impersonate`` each attribute:

=========================================  =====================================================
header                                     attributes authorized (verb ``impersonate``)
=========================================  =====================================================
Impersonate-User: NAME                     ``users`` NAME (API group "")
Impersonate-User: system:serviceaccount:   ``serviceaccounts`` NAME in namespace NS
  NS:NAME
Impersonate-Group: G (each header)         ``groups`` G
Impersonate-Extra-KEY: V (each value)      ``userextras/KEY`` V (authentication.k8s.io)
Impersonate-Uid: U                         ``uids`` U (authentication.k8s.io)
=========================================  =====================================================

The first refusal is answered with kube's 403 (``users "x" is forbidden: User "y" cannot
impersonate resource "users" in API group "" at the cluster scope``); groups, uid or extras
without a user are a 500, as kube-apiserver answers them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from koordinator.apiserver import errors
from koordinator.apiserver.authorization import Attributes, forbidden

USER, GROUP, UID = "impersonate-user", "impersonate-group", "impersonate-uid"
EXTRA_PREFIX = "impersonate-extra-"
SA_PREFIX = "system:serviceaccount:"
AUTHENTICATION_GROUP = "authentication.k8s.io"
AUTHENTICATED, UNAUTHENTICATED, ANONYMOUS = "system:authenticated", "system:unauthenticated", "system:anonymous"
# A namespace is a DNS label, a ServiceAccount name a DNS subdomain (kube validates both before
# taking a user for a ServiceAccount).
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@dataclass(frozen=True)
class _Target:
    """One impersonated attribute (kube's ObjectReference of the filter): what is authorized."""

    kind: str
    name: str
    namespace: str = ""
    api_version: str = ""
    field_path: str = ""

    def __str__(self) -> str:
        # Go's %v of a v1.ObjectReference, which kube prints in its "without a user" error.
        return (f"{{{self.kind} {self.namespace} {self.name}  {self.api_version}  {self.field_path}}}")


def requested(headers: dict[str, str]) -> bool:
    """Whether a request carries any impersonation header."""
    return any(h in (USER, GROUP, UID) or h.startswith(EXTRA_PREFIX) for h in headers)


def _split_service_account(name: str) -> tuple[str, str] | None:
    """(namespace, name) of a ``system:serviceaccount:NS:NAME`` user, as kube's SplitUsername; None for
    any other user (a malformed one included, which is then impersonated as a plain user)."""
    if not name.startswith(SA_PREFIX):
        return None
    parts = name[len(SA_PREFIX):].split(":")
    if len(parts) != 2 or not _DNS_LABEL.fullmatch(parts[0]) or len(parts[0]) > 63 \
            or not _DNS_SUBDOMAIN.fullmatch(parts[1]) or len(parts[1]) > 253:
        return None
    return parts[0], parts[1]


def _targets(req: Any) -> list[_Target]:
    """The attributes the headers ask for, in kube's order: user, groups, extras, uid."""
    targets: list[_Target] = []
    user = req.header(USER)
    if user:
        sa = _split_service_account(user)
        targets.append(_Target("ServiceAccount", sa[1], sa[0]) if sa else _Target("User", user))
    targets += [_Target("Group", g) for g in req.header_values(GROUP)]
    for header in sorted(h for h in req.headers if h.startswith(EXTRA_PREFIX)):
        # Keys are %-encoded by clients (client-go) so any character survives a header name.
        key = unquote(header[len(EXTRA_PREFIX):])
        targets += [_Target("UserExtra", v, api_version=f"{AUTHENTICATION_GROUP}/v1", field_path=key)
                    for v in req.header_values(header)]
    uid = req.header(UID)
    if uid:
        targets.append(_Target("UID", uid, api_version=f"{AUTHENTICATION_GROUP}/v1"))
    if targets and not user:
        raise errors.internal("requested [" + " ".join(str(t) for t in targets) + "] without impersonating a user")
    return targets


def _attributes(requester: dict[str, Any], target: _Target) -> Attributes:
    """The ``impersonate`` request one target stands for."""
    name, groups = requester.get("username", ""), tuple(requester.get("groups") or ())
    if target.kind == "ServiceAccount":
        return Attributes(name, groups, "impersonate", True, "", "", "serviceaccounts", "", target.namespace,
                          target.name)
    if target.kind == "UserExtra":
        return Attributes(name, groups, "impersonate", True, AUTHENTICATION_GROUP, "v1", "userextras",
                          target.field_path, "", target.name)
    if target.kind == "UID":
        return Attributes(name, groups, "impersonate", True, AUTHENTICATION_GROUP, "v1", "uids", "", "", target.name)
    resource = "users" if target.kind == "User" else "groups"
    return Attributes(name, groups, "impersonate", True, "", "", resource, "", "", target.name)


def impersonate(authorizer: Any, req: Any, requester: dict[str, Any]) -> dict[str, Any]:
    """The user ``req`` acts as: ``requester`` itself, or the one its Impersonate-* headers describe.

    Raises the 403 of the first attribute the authorizer does not let ``requester`` impersonate,
    or a 500 when groups, a uid or extras come without Impersonate-User.
    """
    targets = _targets(req)
    if not targets:
        return requester
    username, uid = "", ""
    groups: list[str] = []
    extra: dict[str, list[str]] = {}
    groups_given = bool(req.header_values(GROUP))
    for target in targets:
        attrs = _attributes(requester, target)
        decision = authorizer.authorize(attrs)
        if not decision.allowed:
            raise forbidden(attrs, decision.reason)
        if target.kind == "ServiceAccount":
            username = f"{SA_PREFIX}{target.namespace}:{target.name}"
            if not groups_given:
                # A ServiceAccount's groups are a fixed mapping of its namespace.
                groups = ["system:serviceaccounts", f"system:serviceaccounts:{target.namespace}"]
        elif target.kind == "User":
            username = target.name
        elif target.kind == "Group":
            groups.append(target.name)
        elif target.kind == "UserExtra":
            extra.setdefault(target.field_path, []).append(target.name)
        else:
            uid = target.name
    if username != ANONYMOUS:
        if AUTHENTICATED not in groups and UNAUTHENTICATED not in groups:
            groups.append(AUTHENTICATED)
    elif UNAUTHENTICATED not in groups:
        groups.append(UNAUTHENTICATED)
    acting: dict[str, Any] = {"username": username, "groups": groups}
    if uid:
        acting["uid"] = uid
    if extra:
        acting["extra"] = extra
    return acting
