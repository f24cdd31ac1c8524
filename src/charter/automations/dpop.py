"""DPoP (RFC 9449) for machines: proofs made by `charter machine`, checked by the API.

A machine holds an Ed25519 key pair; the service knows only the RFC 7638 thumbprint of
its public JWK (RFC 8037 `{"kty": "OKP", "crv": "Ed25519", "x": ...}`). Every machine
request carries `DPoP: <proof>`, a JWS compact serialization (made and parsed by PyJWT,
never by hand) whose

- header is exactly `{"typ": "dpop+jwt", "alg": "EdDSA", "jwk": <public JWK>}`;
- claims are `jti` (unique, 16 to 200 characters), `htm` (the request method), `htu` (the
  request URL as the client sees it: scheme://host[:port]/path, no query or fragment)
  and `iat` (a finite number, not a boolean, within ±60 s of the server clock).

Checks fail closed: anything unexpected is `invalid_dpop` (401). The signature is
verified with the embedded key by Charter's pinned strict Ed25519 check (docs/architecture.md:
S < L, canonical points, no small-order keys); the key's thumbprint must be that of a
registered, enabled machine; the `jti` is stored and a second use is refused as a
replay. If the proof store cannot be reached the request is refused too
(`database_unavailable`, 503), never accepted.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import math
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import jwt
from jwt.exceptions import PyJWTError

from charter.core import ijson
from charter.core.ed25519 import SecretKey, check_public_key, verify
from charter.core.errors import InvalidPublicKey, Malformed
from charter.core.errors.automations import InvalidDpop
from charter.core.jsontypes import JsonObject, JsonValue

PROOF_TYPE = "dpop+jwt"
ALGORITHMS = ("EdDSA",)  # the allow-list; never "none", never a MAC
IAT_WINDOW_SECONDS = 60.0
MAX_PROOF_BYTES = 8 * 1024
_HEADER_KEYS = frozenset({"typ", "alg", "jwk"})
_CLAIM_KEYS = frozenset({"jti", "htm", "htu", "iat"})
_JWK_KEYS = frozenset({"kty", "crv", "x"})
_B64URL_32 = re.compile(r"[A-Za-z0-9_-]{43}")
_METHOD = re.compile(r"[A-Z]{1,16}")
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class MachineIdentity:
    """A registered machine, as DPoP authentication resolves it."""

    id: str
    target: str
    principal: str
    thumbprint: str
    disabled: bool


class ProofStore(Protocol):
    """Where machines are looked up and used `jti` values are remembered."""

    def machine_by_thumbprint(self, thumbprint: str) -> MachineIdentity | None:
        """The machine registered with this key thumbprint, if any."""

    def remember_jti(self, jti: str, machine_id: str, expires_at: datetime) -> bool:
        """Record a `jti`; False when it was recorded already (a replay)."""


# --- keys ------------------------------------------------------------------------------


def public_jwk(key: SecretKey) -> JsonObject:
    """The RFC 8037 public JWK of an Ed25519 key."""
    raw = bytes.fromhex(key.public_key_hex)
    return {"kty": "OKP", "crv": "Ed25519", "x": _b64url(raw)}


def check_jwk(jwk: JsonValue) -> bytes:
    """The 32 public key bytes of a valid Ed25519 public JWK, or InvalidPublicKey.

    Exactly `kty`, `crv` and `x` (a private `d` is refused), and the key must pass the
    strict checks every actor key passes: canonical, not of small order.
    """
    if not isinstance(jwk, dict) or set(jwk) != _JWK_KEYS:
        raise InvalidPublicKey("a machine key must be a JWK with exactly kty, crv and x")
    if jwk["kty"] != "OKP" or jwk["crv"] != "Ed25519":
        raise InvalidPublicKey('a machine key must be {"kty": "OKP", "crv": "Ed25519"}')
    x = jwk["x"]
    if not isinstance(x, str) or not _B64URL_32.fullmatch(x):
        raise InvalidPublicKey("jwk.x must be 32 bytes in unpadded base64url")
    return _checked_x(x)


@functools.lru_cache(maxsize=4096)
def _checked_x(x: str) -> bytes:
    # Cached: a machine presents the same key on every request, and the strict point
    # checks cost a few modular exponentiations.
    try:
        raw = base64.urlsafe_b64decode(x + "=")
    except (binascii.Error, ValueError):
        raise InvalidPublicKey("jwk.x is not base64url") from None
    if _b64url(raw) != x:  # non-canonical trailing bits
        raise InvalidPublicKey("jwk.x is not canonical base64url")
    check_public_key(raw.hex())
    return raw


def thumbprint(jwk: JsonValue) -> str:
    """The RFC 7638 thumbprint: base64url SHA-256 of the required members in order."""
    check_jwk(jwk)
    assert isinstance(jwk, dict)
    return _thumbprint(jwk)


def _thumbprint(jwk: dict[str, JsonValue]) -> str:
    # RFC 7638 §3: the required members only, lexicographic order, no whitespace. These
    # values are ASCII, so json.dumps produces exactly the specified bytes.
    members = {"crv": jwk["crv"], "kty": jwk["kty"], "x": jwk["x"]}
    text = json.dumps(members, separators=(",", ":"), sort_keys=True)
    return _b64url(hashlib.sha256(text.encode("ascii")).digest())


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


# --- URLs ------------------------------------------------------------------------------


def normalize_htu(url: str) -> str:
    """scheme://host[:port]/path with RFC 3986 syntax and scheme normalization
    (lowercase scheme and host, default port dropped, empty path as "/"). Raises
    ValueError for a URL that cannot be an `htu` (not http(s), no host, userinfo)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc:
        raise ValueError(f"not an http(s) URL: {url!r}")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port  # ValueError for a bad port
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", "", ""))


def request_htu(public_origin: str, path: str) -> str:
    """The URL a client behind `public_origin` (Settings.api_url) used for `path`."""
    return normalize_htu(public_origin.rstrip("/") + path)


# --- making proofs (the machine side) --------------------------------------------------


def make_proof(key: SecretKey, method: str, url: str, *, iat: float, jti: str | None = None) -> str:
    """A DPoP proof for one request. `url` may carry a query: it is dropped from htu."""
    claims: dict[str, Any] = {
        "jti": jti or secrets.token_urlsafe(24),
        "htm": method.upper(),
        "htu": normalize_htu(url),
        "iat": int(iat),
    }
    headers = {"typ": PROOF_TYPE, "jwk": public_jwk(key)}
    return jwt.encode(claims, key.private_key(), algorithm="EdDSA", headers=headers)


# --- checking proofs (the service side) ------------------------------------------------


@dataclass(frozen=True)
class CheckedProof:
    """A proof whose form, signature, method, URL and time are right."""

    jti: str
    thumbprint: str
    iat: float


def check_proof(
    proof: str, *, method: str, url: str, now: datetime, window: float = IAT_WINDOW_SECONDS
) -> CheckedProof:
    """Everything about a proof that needs no database; InvalidDpop says what is wrong.

    `url` is the request URL as the client addressed it (see `request_htu`).
    """
    if not isinstance(proof, str) or not proof or len(proof) > MAX_PROOF_BYTES:
        raise InvalidDpop("the DPoP header must hold one proof of at most 8 KiB")
    try:
        header = jwt.get_unverified_header(proof)
    except PyJWTError as exc:
        raise InvalidDpop(f"the DPoP proof is not a JWS: {exc}") from None
    if set(header) != _HEADER_KEYS:
        raise InvalidDpop("the DPoP header must have exactly typ, alg and jwk")
    if header["typ"] != PROOF_TYPE:
        raise InvalidDpop(f"the DPoP proof's typ must be {PROOF_TYPE!r}")
    if header["alg"] not in ALGORITHMS:
        raise InvalidDpop(f"the DPoP proof's alg must be one of {list(ALGORITHMS)}")
    try:
        raw_key = check_jwk(header["jwk"])
    except InvalidPublicKey as exc:
        raise InvalidDpop(f"the DPoP proof's jwk is not usable: {exc.message}") from None
    try:
        # PyJWT parses the JWS and checks its alg against the allow-list; the signature
        # is checked once, by Charter's pinned strict Ed25519 (docs/architecture.md: S < L,
        # canonical points), with the key the header carries.
        decoded = jwt.api_jws.PyJWS().decode_complete(
            proof, algorithms=list(ALGORITHMS), options={"verify_signature": False}
        )
    except PyJWTError as exc:
        raise InvalidDpop(f"the DPoP proof is not a valid JWS: {exc}") from None
    signing_input = proof.rsplit(".", 1)[0].encode("ascii")
    if not verify(raw_key.hex(), signing_input, bytes(decoded["signature"]).hex()):
        raise InvalidDpop("the DPoP proof's signature does not verify with its jwk")
    claims = _claims(bytes(decoded["payload"]))
    if claims["htm"] != method.upper():
        raise InvalidDpop(f"the DPoP proof is for {claims['htm']}, not {method.upper()}")
    htu = claims["htu"]
    assert isinstance(htu, str)
    try:
        proven = normalize_htu(htu)
    except ValueError:
        raise InvalidDpop("the DPoP proof's htu is not an http(s) URL") from None
    parts = urlsplit(htu)
    if parts.query or parts.fragment or htu.endswith(("?", "#")):
        raise InvalidDpop("the DPoP proof's htu must not have a query or fragment")
    if proven != normalize_htu(url):
        raise InvalidDpop(f"the DPoP proof is for {proven}, not this request's URL")
    iat = claims["iat"]
    assert isinstance(iat, int | float)
    if abs(iat - now.timestamp()) > window:
        raise InvalidDpop(f"the DPoP proof's iat is not within {window:g} s of the server clock")
    jti = claims["jti"]
    assert isinstance(jti, str)
    return CheckedProof(jti=jti, thumbprint=_thumbprint(header["jwk"]), iat=float(iat))


def _claims(payload: bytes) -> dict[str, JsonValue]:
    try:
        claims = ijson.loads(payload)  # strict: NaN, Infinity, duplicate keys are refused
    except Malformed as exc:
        raise InvalidDpop(f"the DPoP claims are not strict JSON: {exc.message}") from None
    if not isinstance(claims, dict) or not set(claims) >= _CLAIM_KEYS:
        raise InvalidDpop("the DPoP claims must include jti, htm, htu and iat")
    jti, htm, htu, iat = claims["jti"], claims["htm"], claims["htu"], claims["iat"]
    if not isinstance(jti, str) or not 16 <= len(jti) <= 200 or not jti.isascii():
        raise InvalidDpop("the DPoP proof's jti must be 16 to 200 ASCII characters")
    if not isinstance(htm, str) or not _METHOD.fullmatch(htm):
        raise InvalidDpop("the DPoP proof's htm must be an HTTP method")
    if not isinstance(htu, str) or len(htu) > 2048:
        raise InvalidDpop("the DPoP proof's htu must be a URL")
    if isinstance(iat, bool) or not isinstance(iat, int | float) or not math.isfinite(iat):
        raise InvalidDpop("the DPoP proof's iat must be a finite number of seconds")
    return claims


def authenticate(
    store: ProofStore,
    proof: str,
    *,
    method: str,
    url: str,
    now: datetime,
    window: float = IAT_WINDOW_SECONDS,
) -> MachineIdentity:
    """The machine a request comes from, after every DPoP check and the replay check.

    The `jti` is remembered only once everything else holds, for twice the window past
    the later of `iat` and now: as long as any clock in the window could accept it.
    """
    checked = check_proof(proof, method=method, url=url, now=now, window=window)
    return admit(store, checked, now=now, window=window)


def admit(
    store: ProofStore, checked: CheckedProof, *, now: datetime, window: float = IAT_WINDOW_SECONDS
) -> MachineIdentity:
    """The registered, enabled machine of a checked proof, once its `jti` is recorded."""
    machine = store.machine_by_thumbprint(checked.thumbprint)
    if machine is None:
        raise InvalidDpop("the DPoP key is not a registered machine's key")
    if machine.disabled:
        raise InvalidDpop(f"machine {machine.id} is disabled")
    latest = max(now.timestamp(), checked.iat)
    expires_at = now + timedelta(seconds=latest - now.timestamp() + 2 * window)
    if not store.remember_jti(checked.jti, machine.id, expires_at):
        raise InvalidDpop("the DPoP proof was used before (jti replay)")
    return machine
