"""Who sent a request: static bearer tokens, then ServiceAccount tokens (signed JWTs).

``Authenticator.authenticate`` returns the user (the AdmissionReview ``userInfo`` shape:
``username``, ``uid``, ``groups``, ``extra``) or None, which the server answers with 401.
Authentication only runs when the server has a ``--token-file``; without one the server is
open (every request is served, as the anonymous user), exactly as before.

ServiceAccount tokens are RS256 JWTs, issued by the TokenRequest subresource
(``POST .../serviceaccounts/NAME/token``) and signed with a key pair generated once per data
directory (``DATA_DIR/service-account.key``, mode 0600). A token is accepted when

* its signature verifies with that key (a token signed by any other key is refused),
* ``exp`` is in the future and ``nbf`` not (both with 60 s of leeway for skewed clocks, as
  kube's JWT validation allows),
* ``iss`` is the server's issuer (``--service-account-issuer``),
* ``aud`` names one of the server's audiences (just the issuer) or is absent/empty (as a
  kube-apiserver whose ``--api-audiences`` defaults to the issuer accepts); a TokenReview may
  ask for other audiences instead (``ServiceAccountTokens.verify``),
* the ServiceAccount still exists with the uid the token names (a token of a deleted
  ServiceAccount, or of an older one of the same name, stops working), and so does the object
  the token was bound to (``spec.boundObjectRef``: a Pod or Secret).

The user is ``system:serviceaccount:NS:NAME`` (uid: the ServiceAccount's uid), in the groups
``system:serviceaccounts``, ``system:serviceaccounts:NS`` and ``system:authenticated``. A refused
token's reason is kube's wording (``service account token has expired``, ...), which TokenReview
answers in ``status.error``.
"""

from __future__ import annotations

import base64
import hmac
import json
import os
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from koordinator.apiserver.store import Store, object_key

Obj = dict[str, Any]
User = dict[str, Any]

DEFAULT_ISSUER = "https://kubernetes.default.svc"
KEY_FILE = "service-account.key"
USER_PREFIX = "system:serviceaccount:"
ANONYMOUS: User = {"username": "system:anonymous", "groups": ["system:unauthenticated"]}
# Leeway for a token whose nbf/iat a client on a slightly skewed clock sees as just ahead.
NBF_LEEWAY_S = 60
# Kinds a TokenRequest may bind its token to (storage key, as kube-apiserver allows; Node omitted).
BOUND_KINDS = {"Pod": "pods", "Secret": "secrets"}


# go-jose's error for a signature that does not verify with the key the token names.
CRYPTO_ERROR = "go-jose/go-jose: error in cryptographic primitive"
# kube's bearer-token authenticator's error when no authenticator recognised a token.
INVALID_TOKEN = "invalid bearer token"


@dataclass
class TokenResult:
    """What an authenticator made of a token: the user (None: refused), the audiences it is valid
    for, and why it was refused ("" when no authenticator had anything to say)."""

    user: User | None
    audiences: list[str] = field(default_factory=list)
    error: str = ""


def _go_quote(values: list[str]) -> str:
    """A list of strings as Go's ``%q`` prints a []string: ``["a" "b"]``."""
    return "[" + " ".join(json.dumps(v) for v in values) + "]"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def ensure_signing_key(directory: str) -> rsa.RSAPrivateKey:
    """The data directory's ServiceAccount signing key, generated (RSA 2048, mode 0600) on first use."""
    path = os.path.join(directory, KEY_FILE)
    if os.path.exists(path):
        with open(path, "rb") as f:
            key = serialization.load_pem_private_key(f.read(), password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValueError(f"{path}: not an RSA private key")
        return key
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    os.makedirs(directory, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    # A rename, so a crash never leaves a half-written key that every later start would refuse.
    os.replace(tmp, path)
    return key


def sign_jwt(key: rsa.RSAPrivateKey, claims: Obj, kid: str = "") -> str:
    """An RS256 JWS compact serialization of ``claims``."""
    header = {"alg": "RS256", "kid": kid} if kid else {"alg": "RS256"}
    signing_input = _b64(json.dumps(header, separators=(",", ":")).encode()) + "." + \
        _b64(json.dumps(claims, separators=(",", ":")).encode())
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return signing_input + "." + _b64(signature)


class ServiceAccountTokens:
    """Issues and verifies ServiceAccount JWTs for one data directory's key and one issuer.

    ``clock`` (seconds since the epoch) is injectable so tests can mint tokens in the past.
    The key is loaded or generated on first use, so a server that never issues or checks a
    ServiceAccount token never writes one. ``data_dir`` None keeps the key in memory only.
    """

    def __init__(self, data_dir: str | None, store: Store, issuer: str = DEFAULT_ISSUER,
                 clock: Callable[[], float] = time.time) -> None:
        self.data_dir = data_dir
        self.store = store
        self.issuer = issuer
        self.clock = clock
        self._key: rsa.RSAPrivateKey | None = None
        self._kid = ""
        # token -> claims whose signature already verified: the RSA check runs once per token,
        # the time, issuer, audience and object checks on every request (they can change).
        self._verified: OrderedDict[str, Obj] = OrderedDict()

    @property
    def audiences(self) -> list[str]:
        """The audiences this server accepts and gives tokens by default: its issuer (kube's default)."""
        return [self.issuer]

    @property
    def key(self) -> rsa.RSAPrivateKey:
        if self._key is None:
            # No data dir (an in-memory store): a key that lives as long as the process.
            self._key = (ensure_signing_key(self.data_dir) if self.data_dir is not None
                         else rsa.generate_private_key(public_exponent=65537, key_size=2048))
            der = self._key.public_key().public_bytes(serialization.Encoding.DER,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo)
            digest = hashes.Hash(hashes.SHA256())
            digest.update(der)
            self._kid = _b64(digest.finalize())
        return self._key

    def issue(self, namespace: str, name: str, uid: str, audiences: list[str], expiration_seconds: int,
              bound: Obj | None = None) -> tuple[str, int]:
        """A signed token for ServiceAccount ``namespace/name`` (``uid``); returns (token, exp)."""
        now = int(self.clock())
        exp = now + expiration_seconds
        private: Obj = {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}}
        if bound:
            private[bound["kind"].lower()] = {"name": bound["name"], "uid": bound["uid"]}
        claims = {"aud": audiences, "exp": exp, "iat": now, "nbf": now, "iss": self.issuer,
                  "jti": str(uuid.uuid4()), "kubernetes.io": private,
                  "sub": f"{USER_PREFIX}{namespace}:{name}"}
        key = self.key
        return sign_jwt(key, claims, self._kid), exp

    @property
    def kid(self) -> str:
        """The key id tokens carry in their header: a digest of the public key, as kube derives it."""
        _ = self.key
        return self._kid

    def _has_key(self) -> bool:
        # No key yet means no token was ever issued: checking one must not create the key.
        return self._key is not None or (self.data_dir is not None
                                          and os.path.exists(os.path.join(self.data_dir, KEY_FILE)))

    def _signed_claims(self, token: str) -> tuple[Obj | None, str]:
        """The claims of a token of this issuer whose signature verifies, or None and kube's error.

        The error is "" for a token that is not one of this issuer's at all (not a JWT, another
        issuer): kube's ServiceAccount authenticator passes on those without an opinion.
        """
        cached = self._verified.get(token)
        if cached is not None and cached.get("iss") == self.issuer:
            self._verified.move_to_end(token)
            return cached, ""
        parts = token.split(".")
        if len(parts) != 3:
            return None, ""
        try:
            # Only the issuer of the unverified payload decides whether the token is ours to check.
            unverified = json.loads(_unb64(parts[1]))
            header = json.loads(_unb64(parts[0]))
        except ValueError:
            return None, ""
        if not isinstance(unverified, dict) or unverified.get("iss") != self.issuer or not isinstance(header, dict):
            return None, ""
        kid = header.get("kid") or ""
        if not self._has_key():
            return None, "invalid signature, no keys found" if kid else CRYPTO_ERROR
        if kid and kid != self.kid:
            return None, "invalid signature, no keys found"
        try:
            if header.get("alg") != "RS256":
                return None, CRYPTO_ERROR
            self.key.public_key().verify(_unb64(parts[2]), f"{parts[0]}.{parts[1]}".encode(),
                                         padding.PKCS1v15(), hashes.SHA256())
        except (ValueError, InvalidSignature):
            return None, CRYPTO_ERROR
        self._verified[token] = unverified
        if len(self._verified) > 4096:
            self._verified.popitem(last=False)
        return unverified, ""

    def _object_uid(self, storage: str, namespace: str, name: Any) -> str | None:
        entry = self.store.get(storage, object_key(namespace, name)) if isinstance(name, str) and name else None
        return (entry.obj().get("metadata") or {}).get("uid") if entry is not None else None

    def verify(self, token: str, audiences: list[str] | None = None) -> TokenResult:
        """Check ``token`` for ``audiences`` (None: the server's own), as kube's ServiceAccount authenticator.

        The result's audiences are those the token and the requested ones share; its error is
        kube's wording of why a token of this issuer was refused ("" when it is not one).
        """
        claims, error = self._signed_claims(token)
        if claims is None:
            return TokenResult(None, [], error)
        aud = claims.get("aud")
        token_auds = [aud] if isinstance(aud, str) else [a for a in aud or [] if isinstance(a, str)]
        if not token_auds:
            # A token without audiences (a legacy one) is valid for the server's own audiences only.
            token_auds = list(self.audiences)
        wanted = list(self.audiences) if audiences is None else list(audiences)
        shared = [a for a in token_auds if a in wanted]
        if not shared:
            return TokenResult(None, [], f"token audiences {_go_quote(token_auds)} is invalid for the target "
                                         f"audiences {_go_quote(wanted)}")
        now = self.clock()
        exp, nbf, iat = claims.get("exp"), claims.get("nbf"), claims.get("iat")
        # As jwt.Claims.Validate: a minute of leeway both ways (and an expiry is required here).
        if isinstance(nbf, (int, float)) and now + NBF_LEEWAY_S < nbf:
            return TokenResult(None, [], "service account token is not valid yet")
        if not isinstance(exp, (int, float)) or now - NBF_LEEWAY_S > exp:
            return TokenResult(None, [], "service account token has expired")
        if isinstance(iat, (int, float)) and now + NBF_LEEWAY_S < iat:
            return TokenResult(None, [], "service account token is issued in the future")
        private = claims.get("kubernetes.io")
        namespace = private.get("namespace") if isinstance(private, dict) else None
        sa = private.get("serviceaccount") if isinstance(private, dict) else None
        if not isinstance(namespace, str) or not isinstance(sa, dict) or not sa.get("uid") or \
                claims.get("sub") != f"{USER_PREFIX}{namespace}:{sa.get('name')}":
            return TokenResult(None, [], "service account token claims could not be validated due to unexpected "
                                         "private claim")
        current = self._object_uid("serviceaccounts", namespace, sa.get("name"))
        if current is None:
            return TokenResult(None, [], f'serviceaccounts "{sa.get("name")}" not found')
        if current != sa["uid"]:
            return TokenResult(None, [], f"service account UID ({current}) does not match claim ({sa['uid']})")
        for kind, storage in BOUND_KINDS.items():
            ref = private.get(kind.lower())
            if ref is None:
                continue
            bound = self._object_uid(storage, namespace, ref.get("name")) if isinstance(ref, dict) else None
            if bound is None:
                return TokenResult(None, [], "service account token has been invalidated")
            if bound != ref.get("uid"):
                return TokenResult(None, [], f"{kind.lower()} UID ({bound}) does not match service account "
                                             f"{kind.lower()} ref claim ({ref.get('uid')})")
        extra: dict[str, list[str]] = {}
        if isinstance(claims.get("jti"), str):
            extra["authentication.kubernetes.io/credential-id"] = [f"JTI={claims['jti']}"]
        pod = private.get("pod")
        if isinstance(pod, dict):
            extra["authentication.kubernetes.io/pod-name"] = [str(pod.get("name"))]
            extra["authentication.kubernetes.io/pod-uid"] = [str(pod.get("uid"))]
        user: User = {"username": f"{USER_PREFIX}{namespace}:{sa['name']}", "uid": sa["uid"],
                      "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}",
                                 "system:authenticated"]}
        if extra:
            user["extra"] = extra
        return TokenResult(user, shared, "")

    def authenticate(self, token: str) -> User | None:
        """The ServiceAccount user ``token`` proves, or None when it is not a valid, live token."""
        return self.verify(token).user

    def jwks(self) -> Obj:
        """The JSON Web Key Set of the signing key (what ``/openid/v1/jwks`` serves)."""
        numbers = self.key.public_key().public_numbers()
        size = (numbers.n.bit_length() + 7) // 8
        return {"keys": [{"use": "sig", "kty": "RSA", "kid": self.kid, "alg": "RS256",
                          "n": _b64(numbers.n.to_bytes(size, "big")),
                          "e": _b64(numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big"))}]}


class StaticTokens:
    """The ``--token-file`` tokens: a token CSV row's user, or the admin for a bare token."""

    def __init__(self, tokens: set[str], users: dict[str, User]) -> None:
        self.tokens = tokens
        self.users = users

    def authenticate(self, token: str) -> User | None:
        """The user of a matching token; None when no token matches."""
        # Constant-time comparison against each token: no early exit reveals a prefix.
        matched = next((t for t in self.tokens if hmac.compare_digest(token, t)), None)
        if matched is None:
            return None
        # A token the CSV reader parsed differently has no row: it is served as the anonymous user,
        # as the server always did for it.
        return self.users.get(matched) or dict(ANONYMOUS)


class Authenticator:
    """The chain: static tokens first, then ServiceAccount tokens."""

    def __init__(self, static: StaticTokens, service_accounts: ServiceAccountTokens | None) -> None:
        self.static = static
        self.service_accounts = service_accounts

    def authenticate(self, authorization: str) -> User | None:
        """The user an ``Authorization`` header value proves; None (answered with 401) when none."""
        token = authorization[7:].strip() if authorization.lower().startswith("bearer ") else ""
        user = self.static.authenticate(token)
        if user is None and self.service_accounts is not None and token.count(".") == 2:
            user = self.service_accounts.authenticate(token)
        return user

    def review(self, token: str, audiences: list[str]) -> TokenResult:
        """What the chain makes of ``token`` for ``audiences`` (a TokenReview's spec.audiences).

        As kube-apiserver: static tokens are audience-agnostic, valid for the server's own
        audiences only (``audiences`` empty means those); a refusal with a reason reads
        ``[invalid bearer token, <reason>]``, one without ``invalid bearer token``.
        """
        own = self.service_accounts.audiences if self.service_accounts is not None else []
        wanted = list(audiences) or list(own)
        user = self.static.authenticate(token) if token else None
        if user is not None:
            shared = [a for a in own if a in wanted]
            if shared or not own:
                return TokenResult(user, shared)
        result = TokenResult(None)
        if self.service_accounts is not None and token.count(".") == 2:
            result = self.service_accounts.verify(token, wanted)
        if result.user is None:
            result.error = f"[{INVALID_TOKEN}, {result.error}]" if result.error else INVALID_TOKEN
        return result
