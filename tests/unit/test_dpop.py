"""DPoP proofs (RFC 9449) as the machine API checks them: every rule fails closed."""

from __future__ import annotations

import base64
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from charter.automations.dpop import (
    MachineIdentity,
    authenticate,
    check_jwk,
    make_proof,
    normalize_htu,
    public_jwk,
    request_htu,
    thumbprint,
)
from charter.core.ed25519 import L, SecretKey
from charter.core.errors import DatabaseUnavailable, InvalidPublicKey
from charter.core.errors.automations import InvalidDpop
from charter.core.jsontypes import JsonValue

NOW = datetime(2026, 6, 18, 10, 0, tzinfo=UTC)
URL = "https://charter.example/v1/machine/runs/claim"


class Store:
    """An in-memory proof store: machines by thumbprint and the jti values seen."""

    def __init__(self) -> None:
        self.machines: dict[str, MachineIdentity] = {}
        self.seen: dict[str, datetime] = {}
        self.unavailable = False

    def add(self, key: SecretKey, *, disabled: bool = False, machine_id: str = "m1") -> None:
        print_ = thumbprint(public_jwk(key))
        self.machines[print_] = MachineIdentity(machine_id, "laptop", "alice", print_, disabled)

    def machine_by_thumbprint(self, thumbprint: str) -> MachineIdentity | None:
        if self.unavailable:
            raise DatabaseUnavailable("the proof store is down")
        return self.machines.get(thumbprint)

    def remember_jti(self, jti: str, machine_id: str, expires_at: datetime) -> bool:
        if self.unavailable:
            raise DatabaseUnavailable("the proof store is down")
        if jti in self.seen:
            return False
        self.seen[jti] = expires_at
        return True


@pytest.fixture
def key() -> SecretKey:
    return SecretKey.generate()


@pytest.fixture
def store(key: SecretKey) -> Store:
    registered = Store()
    registered.add(key)
    return registered


def private(key: SecretKey) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(bytes.fromhex(key.hex()))


def forge(
    key: SecretKey,
    *,
    claims: dict[str, Any] | None = None,
    drop: tuple[str, ...] = (),
    headers: dict[str, Any] | None = None,
    signer: SecretKey | None = None,
) -> str:
    """A proof with chosen claims and headers, signed with EdDSA by `signer` (or `key`)."""
    body: dict[str, Any] = {
        "jti": "jti-" + base64.urlsafe_b64encode(b"0123456789abcdef").decode(),
        "htm": "POST",
        "htu": URL,
        "iat": int(NOW.timestamp()),
    }
    body.update(claims or {})
    for name in drop:
        body.pop(name)
    header = {"typ": "dpop+jwt", "jwk": public_jwk(key), **(headers or {})}
    return jwt.encode(body, private(signer or key), algorithm="EdDSA", headers=header)


def check(store: Store, proof: str, *, method: str = "POST", url: str = URL) -> MachineIdentity:
    return authenticate(store, proof, method=method, url=url, now=NOW)


# --- the accepted proof ----------------------------------------------------------------


def test_a_valid_proof_names_the_registered_machine(key: SecretKey, store: Store) -> None:
    proof = make_proof(key, "POST", URL, iat=NOW.timestamp())
    machine = check(store, proof)
    assert machine.id == "m1"
    assert len(store.seen) == 1
    # Remembered for as long as a clock in the window could accept the proof.
    (expires_at,) = store.seen.values()
    assert expires_at >= NOW + timedelta(seconds=60)


def test_make_proof_drops_the_query_from_htu(key: SecretKey, store: Store) -> None:
    proof = make_proof(key, "post", URL + "?x=1#frag", iat=NOW.timestamp())
    assert jwt.decode(proof, options={"verify_signature": False})["htu"] == URL
    assert check(store, proof).id == "m1"


@pytest.mark.parametrize("offset", [-60, 0, 60])
def test_iat_at_the_edges_of_the_window_is_accepted(
    key: SecretKey, store: Store, offset: int
) -> None:
    proof = make_proof(key, "POST", URL, iat=NOW.timestamp() + offset)
    assert check(store, proof).id == "m1"


def test_the_request_url_is_normalized(key: SecretKey, store: Store) -> None:
    proof = make_proof(key, "POST", "HTTPS://Charter.Example:443/v1/machine/runs/claim", iat=0)
    assert jwt.decode(proof, options={"verify_signature": False})["htu"] == URL
    with_port = make_proof(key, "POST", URL, iat=NOW.timestamp())
    assert check(store, with_port, url="https://charter.example:443/v1/machine/runs/claim")


def test_request_htu_joins_the_public_origin_and_the_path() -> None:
    assert request_htu("https://charter.example/", "/v1/machine/runs/claim") == URL
    assert normalize_htu("http://127.0.0.1:8420/a") == "http://127.0.0.1:8420/a"
    assert normalize_htu("http://[::1]:80/a") == "http://[::1]/a"
    with pytest.raises(ValueError, match="http"):
        normalize_htu("ftp://charter.example/a")


# --- replay ----------------------------------------------------------------------------


def test_a_replayed_jti_is_refused(key: SecretKey, store: Store) -> None:
    proof = make_proof(key, "POST", URL, iat=NOW.timestamp())
    check(store, proof)
    with pytest.raises(InvalidDpop, match="replay"):
        check(store, proof)


def test_the_same_jti_in_a_fresh_proof_is_a_replay_too(key: SecretKey, store: Store) -> None:
    check(store, make_proof(key, "POST", URL, iat=NOW.timestamp(), jti="j" * 20))
    again = make_proof(key, "POST", URL, iat=NOW.timestamp() + 1, jti="j" * 20)
    with pytest.raises(InvalidDpop, match="replay"):
        check(store, again)


def test_an_unavailable_store_never_accepts(key: SecretKey, store: Store) -> None:
    store.unavailable = True
    with pytest.raises(DatabaseUnavailable):
        check(store, make_proof(key, "POST", URL, iat=NOW.timestamp()))


def test_a_refused_proof_spends_no_jti(key: SecretKey, store: Store) -> None:
    with pytest.raises(InvalidDpop):
        check(store, make_proof(key, "GET", URL, iat=NOW.timestamp()))
    assert store.seen == {}


# --- method and URL --------------------------------------------------------------------


def test_a_wrong_htm_is_refused(key: SecretKey, store: Store) -> None:
    proof = make_proof(key, "GET", URL, iat=NOW.timestamp())
    with pytest.raises(InvalidDpop, match="GET, not POST"):
        check(store, proof)


@pytest.mark.parametrize(
    "htu",
    [
        "https://charter.example/v1/machine/runs/other",  # another path
        "https://evil.example/v1/machine/runs/claim",  # another host
        "http://charter.example/v1/machine/runs/claim",  # another scheme
        "https://charter.example:8443/v1/machine/runs/claim",  # another port
    ],
)
def test_a_wrong_htu_is_refused(key: SecretKey, store: Store, htu: str) -> None:
    with pytest.raises(InvalidDpop, match="not this request's URL"):
        check(store, forge(key, claims={"htu": htu}))


@pytest.mark.parametrize("suffix", ["?run=1", "#part", "?"])
def test_an_htu_with_a_query_or_fragment_is_refused(
    key: SecretKey, store: Store, suffix: str
) -> None:
    with pytest.raises(InvalidDpop, match="query or fragment"):
        check(store, forge(key, claims={"htu": URL + suffix}))


@pytest.mark.parametrize("htu", ["/v1/machine/runs/claim", "ftp://charter.example/x", 7])
def test_an_htu_that_is_not_an_http_url_is_refused(key: SecretKey, store: Store, htu: Any) -> None:
    with pytest.raises(InvalidDpop):
        check(store, forge(key, claims={"htu": htu}))


# --- time ------------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [-61, 61, -3600, 86400])
def test_stale_and_future_iat_are_refused(key: SecretKey, store: Store, offset: int) -> None:
    proof = make_proof(key, "POST", URL, iat=NOW.timestamp() + offset)
    with pytest.raises(InvalidDpop, match="iat is not within"):
        check(store, proof)


@pytest.mark.parametrize(
    "iat", [math.nan, math.inf, -math.inf, "1", str(int(NOW.timestamp())), True, False, None, []]
)
def test_an_iat_that_is_not_a_finite_number_is_refused(
    key: SecretKey, store: Store, iat: Any
) -> None:
    # NaN and Infinity are not even JSON: the strict parser refuses the claims.
    with pytest.raises(InvalidDpop, match=r"iat|strict JSON"):
        check(store, forge(key, claims={"iat": iat}))


@pytest.mark.parametrize("claim", ["jti", "htm", "htu", "iat"])
def test_every_claim_is_required(key: SecretKey, store: Store, claim: str) -> None:
    with pytest.raises(InvalidDpop, match="must include"):
        check(store, forge(key, drop=(claim,)))


@pytest.mark.parametrize("jti", ["short", "x" * 201, 1234, "é" * 20])
def test_a_bad_jti_is_refused(key: SecretKey, store: Store, jti: Any) -> None:
    with pytest.raises(InvalidDpop, match="jti"):
        check(store, forge(key, claims={"jti": jti}))


def test_duplicate_claims_are_refused(key: SecretKey, store: Store) -> None:
    header = base64.urlsafe_b64encode(
        b'{"alg":"EdDSA","jwk":' + _json(public_jwk(key)) + b',"typ":"dpop+jwt"}'
    ).rstrip(b"=")
    payload = base64.urlsafe_b64encode(
        b'{"jti":"aaaaaaaaaaaaaaaaaaaa","htm":"POST","htu":"%s","iat":%d,"iat":0}'
        % (URL.encode(), int(NOW.timestamp()))
    ).rstrip(b"=")
    signing_input = header + b"." + payload
    signature = base64.urlsafe_b64encode(private(key).sign(signing_input)).rstrip(b"=")
    with pytest.raises(InvalidDpop, match="strict JSON"):
        check(store, (signing_input + b"." + signature).decode())


# --- header and algorithm --------------------------------------------------------------


@pytest.mark.parametrize("typ", ["JWT", "dpop+JWT", "at+jwt", None])
def test_a_wrong_typ_is_refused(key: SecretKey, store: Store, typ: str | None) -> None:
    with pytest.raises(InvalidDpop, match="typ"):
        check(store, forge(key, headers={"typ": typ}))


def test_alg_none_is_refused(key: SecretKey, store: Store) -> None:
    claims = {"jti": "a" * 20, "htm": "POST", "htu": URL, "iat": int(NOW.timestamp())}
    proof = jwt.encode(
        claims, "", algorithm="none", headers={"typ": "dpop+jwt", "jwk": public_jwk(key)}
    )
    with pytest.raises(InvalidDpop, match="alg"):
        check(store, proof)


def test_alg_hs256_is_refused(key: SecretKey, store: Store) -> None:
    claims = {"jti": "a" * 20, "htm": "POST", "htu": URL, "iat": int(NOW.timestamp())}
    # The classic confusion: a MAC keyed with the public key the header carries.
    mac_key = public_jwk(key)["x"]
    assert isinstance(mac_key, str)
    proof = jwt.encode(
        claims,
        mac_key.encode() * 2,
        algorithm="HS256",
        headers={"typ": "dpop+jwt", "jwk": public_jwk(key)},
    )
    with pytest.raises(InvalidDpop, match="alg"):
        check(store, proof)


def test_extra_header_parameters_are_refused(key: SecretKey, store: Store) -> None:
    with pytest.raises(InvalidDpop, match="exactly typ, alg and jwk"):
        check(store, forge(key, headers={"kid": "k1"}))
    with pytest.raises(InvalidDpop, match="exactly typ, alg and jwk"):
        check(store, forge(key, headers={"crit": ["b64"], "b64": False}))


@pytest.mark.parametrize(
    "change",
    [
        {"crv": "Ed448"},
        {"kty": "EC"},
        {"x": "AAAA"},
        {"d": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
        # The all-zero point has small order (docs/architecture.md): never a machine key.
        {"x": "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
    ],
)
def test_an_unusable_jwk_is_refused(key: SecretKey, store: Store, change: dict[str, str]) -> None:
    with pytest.raises(InvalidDpop, match="jwk"):
        check(store, forge(key, headers={"jwk": {**public_jwk(key), **change}}))


def test_not_a_jws_is_refused(store: Store) -> None:
    for proof in ["", "abc", "a.b.c", "x" * 9000]:
        with pytest.raises(InvalidDpop):
            check(store, proof)


# --- keys ------------------------------------------------------------------------------


def test_a_key_whose_thumbprint_is_not_registered_is_refused(store: Store) -> None:
    stranger = SecretKey.generate()
    with pytest.raises(InvalidDpop, match="not a registered machine"):
        check(store, make_proof(stranger, "POST", URL, iat=NOW.timestamp()))


def test_a_disabled_machine_is_refused(key: SecretKey) -> None:
    store = Store()
    store.add(key, disabled=True)
    with pytest.raises(InvalidDpop, match="disabled"):
        check(store, make_proof(key, "POST", URL, iat=NOW.timestamp()))


def test_a_signature_by_another_key_is_refused(key: SecretKey, store: Store) -> None:
    other = SecretKey.generate()
    with pytest.raises(InvalidDpop, match="signature"):
        check(store, forge(key, signer=other))


def test_a_registered_jwk_with_another_signer_is_refused_even_if_both_registered(
    key: SecretKey, store: Store
) -> None:
    other = SecretKey.generate()
    store.add(other, machine_id="m2")
    with pytest.raises(InvalidDpop, match="signature"):
        check(store, forge(key, signer=other))


def test_a_tampered_payload_is_refused(key: SecretKey, store: Store) -> None:
    header, _payload, signature = make_proof(key, "POST", URL, iat=NOW.timestamp()).split(".")
    other = make_proof(key, "GET", URL, iat=NOW.timestamp()).split(".")[1]
    with pytest.raises(InvalidDpop, match="signature"):
        check(store, f"{header}.{other}.{signature}")


def test_a_signature_with_s_at_least_l_is_refused(key: SecretKey, store: Store) -> None:
    header, payload, signature = make_proof(key, "POST", URL, iat=NOW.timestamp()).split(".")
    raw = base64.urlsafe_b64decode(signature + "==")
    s = int.from_bytes(raw[32:], "little") + L
    malleated = raw[:32] + s.to_bytes(32, "little")
    forged = base64.urlsafe_b64encode(malleated).decode().rstrip("=")
    with pytest.raises(InvalidDpop, match="signature"):
        check(store, f"{header}.{payload}.{forged}")


# --- RFC 7638 / RFC 8037 ---------------------------------------------------------------


def test_thumbprint_matches_rfc_8037_appendix_a3() -> None:
    jwk: dict[str, JsonValue] = {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
    }
    assert thumbprint(jwk) == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"


def test_public_jwk_matches_rfc_8037_appendix_a() -> None:
    seed = base64.urlsafe_b64decode("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A=")
    jwk = public_jwk(SecretKey(seed))
    assert jwk == {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
    }


def test_check_jwk_refuses_non_canonical_base64url() -> None:
    # The last character carries 2 spare bits; setting them names the same bytes.
    x = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURp"
    with pytest.raises(InvalidPublicKey, match="canonical"):
        check_jwk({"kty": "OKP", "crv": "Ed25519", "x": x})


def _json(value: Any) -> bytes:
    import json

    return json.dumps(value, separators=(",", ":")).encode()
