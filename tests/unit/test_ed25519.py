"""Strict Ed25519: speccheck vectors, key validation, signing, and 0600 key files."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charter.core.ed25519 import (
    L,
    P,
    SecretKey,
    check_public_key,
    read_secret_key_file,
    verify,
    write_secret_key_file,
)
from charter.core.errors import InvalidPublicKey, InvalidSecretKey, KeyFileError

SPECCHECK = json.loads(
    (Path(__file__).parents[1] / "vectors" / "ed25519-speccheck" / "cases.json").read_text()
)
SEED = bytes(range(32))
SEED_PUBLIC = "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"

# --- Independent curve arithmetic (test only) to re-derive the small-order points -------

D = -121665 * pow(121666, -1, P) % P
Point = tuple[int, int]
IDENTITY: Point = (0, 1)


def _sqrt(a: int) -> int | None:
    x = pow(a, (P + 3) // 8, P)
    if (x * x - a) % P:
        x = x * pow(2, (P - 1) // 4, P) % P
    return x if (x * x - a) % P == 0 else None


def _add(p: Point, q: Point) -> Point:
    (x1, y1), (x2, y2) = p, q
    t = D * x1 * x2 * y1 * y2 % P
    return (
        (x1 * y2 + x2 * y1) * pow(1 + t, -1, P) % P,
        (y1 * y2 + x1 * x2) * pow(1 - t, -1, P) % P,
    )


def _x_for(y: int) -> int | None:
    """A root of x² = (y² - 1) / (d·y² + 1), if any (the curve -x² + y² = 1 + d·x²·y²)."""
    return _sqrt((y * y - 1) * pow(D * y * y + 1, -1, P) % P)


def _encode(x: int, y: int) -> str:
    return (y | (x & 1) << 255).to_bytes(32, "little").hex()


def _small_order_points() -> list[Point]:
    # Order 1, 2, 4: y = 1, -1, 0. Order 8: x² = -y², so d·y⁴ + 2y² - 1 = 0 (solve for y²).
    root = _sqrt((1 + D) % P)
    assert root is not None
    y_squares = [(-1 + sign * root) * pow(D, -1, P) % P for sign in (1, -1)]
    ys = [0, 1, P - 1]
    for t in y_squares:
        root_t = _sqrt(t)
        if root_t is not None:  # exactly one of the two y² values is a square
            ys += [root_t, P - root_t]
    points: list[Point] = []
    for y in ys:
        x = _x_for(y)
        assert x is not None
        points.extend({(x, y), ((P - x) % P, y)})
    return points


def _order(point: Point) -> int:
    current, order = point, 1
    while current != IDENTITY:
        current, order = _add(current, point), order + 1
        assert order <= 8
    return order


SMALL_ORDER = _small_order_points()


def test_small_order_points_are_the_eight_expected() -> None:
    assert len(SMALL_ORDER) == 8
    assert sorted(_order(point) for point in SMALL_ORDER) == [1, 2, 4, 4, 8, 8, 8, 8]
    encodings = {_encode(x, y) for x, y in SMALL_ORDER}
    # The order-8 encodings of libsodium's blocklist are among them.
    assert "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a" in encodings
    assert "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05" in encodings


# --- ed25519-speccheck -------------------------------------------------------------------


def test_speccheck_has_twelve_cases() -> None:
    assert len(SPECCHECK) == 12


@pytest.mark.parametrize("index", range(12))
def test_speccheck_accepts_vector_3_only(index: int) -> None:
    case = SPECCHECK[index]
    accepted = verify(case["pub_key"], bytes.fromhex(case["message"]), case["signature"])
    assert accepted is (index == 3)


# --- check_public_key --------------------------------------------------------------------


def _first_y_off_curve() -> int:
    y = 2
    while _x_for(y) is not None:
        y += 1
    return y


@pytest.mark.parametrize(("x", "y"), SMALL_ORDER)
def test_small_order_public_keys_rejected(x: int, y: int) -> None:
    with pytest.raises(InvalidPublicKey, match=r"small order|non-canonical"):
        check_public_key(_encode(x, y))


@pytest.mark.parametrize(
    ("hex_text", "expected"),
    [
        # y ≥ p: p itself, p + 1 (≡ 1) and 2**255 - 1, each with both sign bits.
        (P.to_bytes(32, "little").hex(), "y is not below p"),
        ((P + 1).to_bytes(32, "little").hex(), "y is not below p"),
        ((2**255 - 1).to_bytes(32, "little").hex(), "y is not below p"),
        ((P | 1 << 255).to_bytes(32, "little").hex(), "y is not below p"),
        ((2**256 - 1).to_bytes(32, "little").hex(), "y is not below p"),
        # x = 0 (y = ±1) with the sign bit set.
        ((1 | 1 << 255).to_bytes(32, "little").hex(), "x is 0 but the sign bit is set"),
        ((P - 1 | 1 << 255).to_bytes(32, "little").hex(), "x is 0 but the sign bit is set"),
        # Off the curve: (y² - 1) / (d·y² + 1) is not a square.
        (_first_y_off_curve().to_bytes(32, "little").hex(), "not a point on the curve"),
        # Shape.
        (SEED_PUBLIC.upper(), "64 lowercase hex"),
        (SEED_PUBLIC[:62], "64 lowercase hex"),
        (SEED_PUBLIC + "00", "64 lowercase hex"),
        (SEED_PUBLIC[:63] + "g", "64 lowercase hex"),
        (SEED_PUBLIC[:62] + " 1", "64 lowercase hex"),
        (SEED_PUBLIC + "\n", "64 lowercase hex"),
        ("", "64 lowercase hex"),
    ],
)
def test_check_public_key_rejects(hex_text: str, expected: str) -> None:
    with pytest.raises(InvalidPublicKey, match=expected):
        check_public_key(hex_text)


def test_check_public_key_rejects_non_strings() -> None:
    with pytest.raises(InvalidPublicKey):
        check_public_key(bytes.fromhex(SEED_PUBLIC))  # type: ignore[arg-type]


def test_check_public_key_accepts_real_keys() -> None:
    assert check_public_key(SEED_PUBLIC) == bytes.fromhex(SEED_PUBLIC)
    for _ in range(20):
        public = SecretKey.generate().public_key_hex
        assert check_public_key(public).hex() == public


# --- SecretKey, sign, verify ------------------------------------------------------------


def test_secret_key_from_seed() -> None:
    key = SecretKey.from_hex(SEED.hex())
    assert key.hex() == SEED.hex()
    assert key.public_key_hex == SEED_PUBLIC
    assert key == SecretKey(SEED)
    assert key != SecretKey.generate()
    assert SEED.hex() not in repr(key)
    assert SEED_PUBLIC in repr(key)


@pytest.mark.parametrize(
    "text", [SEED.hex().upper(), SEED.hex()[:62], SEED.hex() + "00", "zz" * 32, "", " " * 64]
)
def test_secret_key_from_hex_rejects(text: str) -> None:
    with pytest.raises(InvalidSecretKey):
        SecretKey.from_hex(text)


def test_secret_key_needs_32_bytes() -> None:
    with pytest.raises(InvalidSecretKey):
        SecretKey(bytes(31))


def test_sign_is_deterministic_lowercase_hex_and_verifies() -> None:
    key = SecretKey(SEED)
    signature = key.sign(b"hello")
    assert signature == key.sign(b"hello")
    assert len(signature) == 128
    assert signature == signature.lower()
    assert verify(key.public_key_hex, b"hello", signature)
    assert not verify(key.public_key_hex, b"hello!", signature)
    assert not verify(SecretKey.generate().public_key_hex, b"hello", signature)


def test_verify_rejects_s_not_below_l() -> None:
    key = SecretKey(SEED)
    signature = bytes.fromhex(key.sign(b"m"))
    s = int.from_bytes(signature[32:], "little")
    malleated = signature[:32] + (s + L).to_bytes(32, "little")
    assert not verify(key.public_key_hex, b"m", malleated.hex())


@pytest.mark.parametrize(
    "mangle",
    [
        str.upper,
        lambda s: s[:126],
        lambda s: s + "00",
        lambda s: s[:127] + "g",
        lambda s: "",
    ],
)
def test_verify_rejects_malformed_signature_text(mangle: Callable[[str], str]) -> None:
    key = SecretKey(SEED)
    assert not verify(key.public_key_hex, b"m", mangle(key.sign(b"m")))


def test_verify_rejects_malformed_public_keys_and_non_strings() -> None:
    key = SecretKey(SEED)
    signature = key.sign(b"m")
    assert not verify(key.public_key_hex.upper(), b"m", signature)
    assert not verify(bytes.fromhex(key.public_key_hex), b"m", signature)  # type: ignore[arg-type]
    assert not verify(key.public_key_hex, b"m", bytes.fromhex(signature))  # type: ignore[arg-type]


@pytest.mark.parametrize(("x", "y"), SMALL_ORDER)
def test_verify_rejects_small_order_r(x: int, y: int) -> None:
    # Any signature whose R is of small order is refused before the curve math.
    key = SecretKey(SEED)
    signature = _encode(x, y) + key.sign(b"m")[64:]
    assert not verify(key.public_key_hex, b"m", signature)


class _AcceptAll:
    """Stands in for OpenSSL's key object: accepts every signature."""

    def verify(self, signature: bytes, message: bytes) -> None:
        return None


def test_strict_checks_do_not_rely_on_openssl(monkeypatch: pytest.MonkeyPatch) -> None:
    # With the library's verification accepting everything, the checks that are ours
    # must still refuse S ≥ L and a small-order or non-canonical R.
    monkeypatch.setattr("charter.core.ed25519._verifier", lambda public_key_hex: _AcceptAll())
    key = SecretKey(SEED)
    signature = bytes.fromhex(key.sign(b"m"))
    assert verify(key.public_key_hex, b"m", signature.hex())
    s = int.from_bytes(signature[32:], "little")
    r_hex = signature[:32].hex()
    for big_s in (L, s + L, 2**256 - 1):
        assert not verify(key.public_key_hex, b"m", r_hex + big_s.to_bytes(32, "little").hex())
    small_r = _encode(*SMALL_ORDER[-1])
    assert not verify(key.public_key_hex, b"m", small_r + signature[32:].hex())
    non_canonical_r = (P + 5).to_bytes(32, "little").hex()
    assert not verify(key.public_key_hex, b"m", non_canonical_r + signature[32:].hex())


@settings(max_examples=100)
@given(
    seed=st.binary(min_size=32, max_size=32),
    message=st.binary(min_size=1, max_size=200),
    data=st.data(),
)
def test_any_flipped_byte_fails(seed: bytes, message: bytes, data: st.DataObject) -> None:
    key = SecretKey(seed)
    signature = bytes.fromhex(key.sign(message))
    assert verify(key.public_key_hex, message, signature.hex())
    mask = data.draw(st.integers(1, 255), label="mask")
    at = data.draw(st.integers(0, len(message) - 1), label="message byte")
    flipped = bytearray(message)
    flipped[at] ^= mask
    assert not verify(key.public_key_hex, bytes(flipped), signature.hex())
    at = data.draw(st.integers(0, 63), label="signature byte")
    flipped = bytearray(signature)
    flipped[at] ^= mask
    assert not verify(key.public_key_hex, message, flipped.hex())


# --- Key files ---------------------------------------------------------------------------


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask that would let a careless writer create a world-readable file."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("open_umask")
def test_write_creates_0600_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "actor.key"
    key = SecretKey.generate()
    write_secret_key_file(path, key)
    assert _mode(path) == 0o600
    assert path.read_text() == key.hex() + "\n"
    assert read_secret_key_file(path) == key


def test_write_refuses_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "actor.key"
    first = SecretKey.generate()
    write_secret_key_file(path, first)
    with pytest.raises(KeyFileError, match="already exists"):
        write_secret_key_file(path, SecretKey.generate())
    assert read_secret_key_file(path) == first


@pytest.mark.usefixtures("open_umask")
def test_overwrite_replaces_atomically_at_0600(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "actor.key"
    path.write_text("old")
    path.chmod(0o644)
    modes_at_rename: list[int] = []
    real_replace = os.replace

    def spy(source: str, target: Path) -> None:
        modes_at_rename.append(stat.S_IMODE(os.stat(source).st_mode))
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", spy)
    key = SecretKey.generate()
    write_secret_key_file(path, key, overwrite=True)
    assert modes_at_rename == [0o600]
    assert _mode(path) == 0o600
    assert read_secret_key_file(path) == key
    assert sorted(p.name for p in tmp_path.iterdir()) == ["actor.key"]  # no temp left


def test_write_into_a_missing_directory_is_a_key_file_error(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="cannot write"):
        write_secret_key_file(tmp_path / "nope" / "k", SecretKey.generate())


def test_read_accepts_no_trailing_newline(tmp_path: Path) -> None:
    path = tmp_path / "k"
    path.write_text(SEED.hex())
    path.chmod(0o600)
    assert read_secret_key_file(path).public_key_hex == SEED_PUBLIC


def test_read_missing_file(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="does not exist"):
        read_secret_key_file(tmp_path / "missing")


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660, 0o610])
def test_read_refuses_group_or_other_access(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "k"
    path.write_text(SEED.hex() + "\n")
    path.chmod(mode)
    with pytest.raises(KeyFileError, match=f"group or others \\(mode 0{mode:o}\\)"):
        read_secret_key_file(path)


@pytest.mark.parametrize(
    "content",
    [
        SEED.hex().upper() + "\n",
        SEED.hex()[:63] + "\n",
        SEED.hex() + "\n\n",
        SEED.hex() + "\r\n",
        " " + SEED.hex(),
        SEED.hex() + "00",
        "",
        "é" * 32,
    ],
)
def test_read_refuses_bad_content_without_echoing_it(tmp_path: Path, content: str) -> None:
    path = tmp_path / "k"
    path.write_text(content)
    path.chmod(0o600)
    with pytest.raises(KeyFileError, match="does not hold a secret key") as caught:
        read_secret_key_file(path)
    assert SEED.hex()[:16] not in caught.value.message.lower()


def test_read_refuses_a_directory(tmp_path: Path) -> None:
    tmp_path.chmod(0o700)
    with pytest.raises(KeyFileError, match="not a regular file"):
        read_secret_key_file(tmp_path)


def test_read_refuses_a_fifo_without_hanging(tmp_path: Path) -> None:
    path = tmp_path / "fifo"
    os.mkfifo(path, 0o600)
    with pytest.raises(KeyFileError, match="not a regular file"):
        read_secret_key_file(path)
