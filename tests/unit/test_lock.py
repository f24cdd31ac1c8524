"""Reproducible installs: `make` installs exactly the versions pinned in constraints.txt
(made by `make lock`), which satisfy pyproject.toml's ranges and hold nothing specific to
the machine that made them."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parents[2]
LOCK = ROOT / "constraints.txt"
PIN = re.compile(r"([A-Za-z0-9._-]+)==([A-Za-z0-9.!+_-]+)")


def _pins() -> dict[str, str]:
    """Normalized name → pinned version."""
    pins: dict[str, str] = {}
    for number, line in enumerate(LOCK.read_text().splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        match = PIN.fullmatch(line)
        assert match, f"constraints.txt:{number} is not a name==version pin: {line!r}"
        pins[canonicalize_name(match[1])] = match[2]
    return pins


def _declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [
        Requirement(r) for r in [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    ]


def test_the_lock_pins_names_to_versions_and_nothing_of_this_machine() -> None:
    text = LOCK.read_text()
    assert "file:" not in text
    assert "/" not in "".join(line for line in text.splitlines() if not line.startswith("#"))
    pins = _pins()
    assert "charter" not in pins  # the project itself is installed from the checkout
    # The installer and the build backend too: pip's resolver decides what a range means,
    # setuptools builds the editable install.
    assert {"pip", "setuptools", "wheel"} <= pins.keys()


def test_every_declared_dependency_is_pinned_within_its_range() -> None:
    pins = _pins()
    for requirement in _declared():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement} is not pinned: run `make lock`"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{name}=={pins[name]} is outside {requirement}: run `make lock`"
        )


def test_the_makefile_installs_with_the_lock_and_reinstalls_when_it_changes() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^LOCK := constraints\.txt$", makefile, re.MULTILINE)
    # The runtime stamp (`make run`) depends on the lock, the dev stamp (`make test`) on it.
    runtime_rule = re.search(r"^\$\(RUNTIME\):(.*)$", makefile, re.MULTILINE)
    assert runtime_rule
    assert "$(LOCK)" in runtime_rule[1].split()
    stamp_rule = re.search(r"^\$\(STAMP\):(.*)$", makefile, re.MULTILINE)
    assert stamp_rule
    assert "$(RUNTIME)" in stamp_rule[1].split()
    installs = [line for line in makefile.splitlines() if "$(BIN)/python -m pip install" in line]
    assert installs
    assert all("-c $(LOCK)" in line for line in installs), installs
    assert re.search(r"^lock:", makefile, re.MULTILINE)


def test_this_environment_was_installed_from_the_lock() -> None:
    """What `make` installed is what the lock says (a stale .venv is rebuilt by `make`)."""
    installed: dict[str, str] = {
        canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()
    }
    drifted = {
        name: (installed[name], pinned)
        for name, pinned in _pins().items()
        if name in installed and installed[name] != pinned
    }
    assert not drifted, f"installed vs locked: {drifted}; run `make` to reinstall"
