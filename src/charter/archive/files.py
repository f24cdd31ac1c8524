"""Bundle files of the archive directory: `<dir>/<yyyy>/<mm>/<process id>.json`, each the
RFC 8785 text of a `charter-export` bundle, written so that a crash leaves either the
whole file or none of it."""

from __future__ import annotations

import hashlib
import os
from datetime import datetime
from pathlib import Path

from charter.core.canonical import canonical_bytes
from charter.core.jsontypes import JsonObject


def bundle_path(process_id: str, when: datetime) -> str:
    """Where a process archived at `when` goes, relative to the archive directory."""
    return f"{when:%Y}/{when:%m}/{process_id}.json"


def write_bundle(directory: Path, relative: str, bundle: JsonObject) -> str:
    """Write `bundle` at `directory/relative`, durably (data and directory entries
    fsynced, the name swapped in by rename); its SHA-256."""
    text = canonical_bytes(bundle)
    target = directory / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    with open(partial, "wb") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, target)
    for folder in (target.parent, target.parent.parent, directory):
        _fsync_directory(folder)
    return hashlib.sha256(text).hexdigest()


def read_bundle(path: Path) -> tuple[bytes, str]:
    """A bundle file's bytes and their SHA-256."""
    data = path.read_bytes()
    return data, hashlib.sha256(data).hexdigest()


def bundle_files(directory: Path) -> list[Path]:
    """Every bundle of an archive directory, in path order (partial files left out)."""
    return sorted(p for p in directory.glob("*/*/*.json") if not p.name.startswith("."))


def _fsync_directory(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
