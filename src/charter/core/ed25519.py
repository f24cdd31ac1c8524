"""Ed25519 keys and strict signatures (RFC 8032, docs/wire-format.md and docs/architecture.md).

`cryptography` (OpenSSL) does the curve arithmetic, but it accepts small-order and
non-canonical points (ed25519-speccheck vectors 0, 1, 2 and 11), so the strict checks
here are ours: S < L, R and A canonical and not of small order, A decodes to a point.
They are byte and int operations only, because `verify` is on the hot path.
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import os
import re
import secrets
import stat
import tempfile
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from charter.core.errors import InvalidPublicKey, InvalidSecretKey, KeyFileError

P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493  # order of the base point
_D = -121665 * pow(121666, -1, P) % P
_SQRT_M1 = pow(2, (P - 1) // 4, P)
_Y_MASK = (1 << 255) - 1

# y of the 8 points of small order: 1 (identity), P-1 (order 2), 0 (order 4) and ±Y8
# (order 8: there x² = -y², so d·y⁴ + 2y² - 1 ≡ 0). A canonical encoding is of small
# order iff its y is in this set; tests re-derive it with point arithmetic.
_Y8 = int.from_bytes(
    bytes.fromhex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"), "little"
)
_SMALL_ORDER_Y = frozenset({0, 1, P - 1, _Y8, P - _Y8})

_HEX64 = re.compile("[0-9a-f]{64}")
_HEX128 = re.compile("[0-9a-f]{128}")


def _point_problem(encoded: bytes) -> str | None:
    """Why a 32-byte point encoding is unacceptable (cheap checks only), or None."""
    value = int.from_bytes(encoded, "little")
    y = value & _Y_MASK
    if y >= P:
        return "non-canonical encoding (y is not below p)"
    if value >> 255 and (y == 1 or y == P - 1):
        return "non-canonical encoding (x is 0 but the sign bit is set)"
    if y in _SMALL_ORDER_Y:
        return "a point of small order"
    return None


def _decodes(encoded: bytes) -> bool:
    """RFC 8032 §5.1.3 point decoding for a canonical encoding: is there such an x?"""
    y = int.from_bytes(encoded, "little") & _Y_MASK
    u = (y * y - 1) % P
    v = (_D * y * y + 1) % P
    x = u * pow(v, 3, P) * pow(u * pow(v, 7, P), (P - 5) // 8, P) % P
    v_x2 = v * x * x % P
    # x = 0 with the sign bit set is already refused by _point_problem.
    return v_x2 == u or v_x2 == (-u) % P


def check_public_key(hex_text: str) -> bytes:
    """The 32 bytes of a valid public key, or `InvalidPublicKey` saying why not."""
    if not isinstance(hex_text, str) or not _HEX64.fullmatch(hex_text):
        raise InvalidPublicKey("a public key must be 64 lowercase hex characters")
    encoded = bytes.fromhex(hex_text)
    problem = _point_problem(encoded)
    if problem is None and not _decodes(encoded):
        problem = "not a point on the curve"
    if problem is not None:
        raise InvalidPublicKey(f"invalid public key: {problem}")
    return encoded


@functools.lru_cache(maxsize=4096)
def _verifier(public_key_hex: str) -> Ed25519PublicKey | None:
    # Cached per key: the checks and OpenSSL's key object are built once per actor.
    try:
        return Ed25519PublicKey.from_public_bytes(check_public_key(public_key_hex))
    except InvalidPublicKey:
        return None


def verify(public_key_hex: str, message: bytes, signature_hex: str) -> bool:
    """Strict Ed25519 verification; any malformed argument is simply False."""
    if not isinstance(signature_hex, str) or not _HEX128.fullmatch(signature_hex):
        return False
    if not isinstance(public_key_hex, str) or (key := _verifier(public_key_hex)) is None:
        return False
    signature = bytes.fromhex(signature_hex)
    if int.from_bytes(signature[32:], "little") >= L or _point_problem(signature[:32]):
        return False
    try:
        key.verify(signature, message)
    except InvalidSignature:
        return False
    return True


class SecretKey:
    """An Ed25519 secret key: the 32-byte seed. Its repr shows only the public key."""

    __slots__ = ("_key", "_public_key_hex", "_seed")

    def __init__(self, seed: bytes) -> None:
        if not isinstance(seed, bytes) or len(seed) != 32:
            raise InvalidSecretKey("a secret key is a 32-byte seed")
        self._seed = seed
        self._key = Ed25519PrivateKey.from_private_bytes(seed)
        self._public_key_hex = self._key.public_key().public_bytes_raw().hex()

    @classmethod
    def generate(cls) -> SecretKey:
        """A new random key."""
        return cls(secrets.token_bytes(32))

    @classmethod
    def from_hex(cls, text: str) -> SecretKey:
        """Parse 64 lowercase hex characters."""
        if not isinstance(text, str) or not _HEX64.fullmatch(text):
            raise InvalidSecretKey()
        return cls(bytes.fromhex(text))

    def hex(self) -> str:
        """The seed as 64 lowercase hex characters."""
        return self._seed.hex()

    @property
    def public_key_hex(self) -> str:
        """The public key (the actor id) as 64 lowercase hex characters."""
        return self._public_key_hex

    def private_key(self) -> Ed25519PrivateKey:
        """The key as cryptography's object, built once (for libraries that sign with
        it, such as PyJWT's EdDSA)."""
        return self._key

    def sign(self, message: bytes) -> str:
        """The signature of `message` as 128 lowercase hex characters."""
        return self._key.sign(message).hex()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SecretKey):
            return NotImplemented
        return hmac.compare_digest(self._seed, other._seed)

    def __repr__(self) -> str:
        return f"SecretKey(public_key={self._public_key_hex})"


def write_secret_key_file(
    path: str | os.PathLike[str], key: SecretKey, *, overwrite: bool = False
) -> None:
    """Write `key` to a new file created with mode 0600 (never wider, not even briefly).

    Without `overwrite` an existing file is an error (O_EXCL); with it, a 0600 temporary
    file in the same directory replaces the old one atomically.
    """
    write_private_file(path, (key.hex() + "\n").encode("ascii"), overwrite=overwrite)


def write_private_file(
    path: str | os.PathLike[str], data: bytes, *, overwrite: bool = False
) -> None:
    """Write a secret (a key, a token) to a file that is 0600 from its first byte."""
    target = Path(path)
    try:
        if overwrite:
            fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
            try:
                _write_and_close(fd, data)
                os.replace(temporary, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        else:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
            fd = os.open(target, flags, 0o600)
            try:
                _write_and_close(fd, data)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(target)
                raise
    except FileExistsError:
        raise KeyFileError(f"{target} already exists; not overwriting it") from None
    except OSError as exc:
        raise KeyFileError(f"cannot write {target}: {exc.strerror}") from None


def _write_and_close(fd: int, data: bytes) -> None:
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def read_private_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The first `limit` bytes of a secret file (a key), which must be a regular file
    private to its owner: KeyFileError says what is wrong and never echoes the content."""
    try:
        # O_NONBLOCK: a FIFO planted at the path must not hang us.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise KeyFileError(f"key file {os.fspath(path)} does not exist") from None
    except OSError as exc:
        raise KeyFileError(f"cannot open key file {os.fspath(path)}: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise KeyFileError(f"key file {os.fspath(path)} is not a regular file")
        if mode & 0o077:
            raise KeyFileError(
                f"key file {os.fspath(path)} is accessible by group or others "
                f"(mode {stat.S_IMODE(mode):04o}); run: chmod 600 {os.fspath(path)}"
            )
        return os.read(fd, limit)
    finally:
        os.close(fd)


def read_secret_key_file(path: str | os.PathLike[str]) -> SecretKey:
    """Read a key file: 64 lowercase hex and an optional newline, private to its owner."""
    data = read_private_file(path, 80)  # a valid file is 64 or 65 bytes
    text = data[:-1] if data.endswith(b"\n") else data
    try:
        return SecretKey.from_hex(text.decode("ascii"))
    except (UnicodeDecodeError, InvalidSecretKey):
        # The message never echoes the content: it may be a secret in the wrong format.
        raise KeyFileError(
            f"key file {os.fspath(path)} does not hold a secret key "
            "(expected 64 lowercase hex characters and an optional newline)"
        ) from None
