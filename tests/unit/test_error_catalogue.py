"""The error catalogue: every error class of `charter.core.errors` is in it, each code
names exactly one class, and the API answers each with the class's own status."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import charter.core.errors
from charter.core.errors import CharterError
from charter.core.errors.catalogue import BY_CODE, WIRE_ERRORS


def _defined_under_core_errors() -> set[type[CharterError]]:
    modules = [charter.core.errors] + [
        importlib.import_module(info.name)
        for info in pkgutil.iter_modules(charter.core.errors.__path__, "charter.core.errors.")
    ]
    return {
        cls
        for module in modules
        for cls in vars(module).values()
        if inspect.isclass(cls)
        and issubclass(cls, CharterError)
        and cls.__module__ == module.__name__
    }


def test_every_error_class_of_the_package_is_catalogued() -> None:
    assert _defined_under_core_errors() == set(WIRE_ERRORS)


def test_each_code_names_one_class_of_its_own() -> None:
    codes = [cls.__dict__.get("code") for cls in WIRE_ERRORS]
    assert None not in codes, "every catalogued class sets its own code"
    assert len(codes) == len(set(codes)) == len(BY_CODE)
    assert all(BY_CODE[cls.code] is cls for cls in WIRE_ERRORS)


def test_every_catalogued_class_is_an_error_status() -> None:
    assert all(400 <= cls.http_status <= 599 for cls in WIRE_ERRORS)
