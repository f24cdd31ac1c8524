"""tools/async_to_sync.py: the blocking SDK client is the asyncio one with `async` and
`await` gone, a few names changed and each `if ASYNC:` replaced by its `else:` body, its
comments and docstrings kept; and the committed client.py is what it writes today."""

from __future__ import annotations

import importlib.util
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("async_to_sync", ROOT / "tools/async_to_sync.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _tool()


def _body(source: str) -> str:
    """What `convert` makes of `source`, without the header."""
    convert: Callable[[str], str] = TOOL.convert
    out = convert(textwrap.dedent(source))
    header: str = TOOL.HEADER
    assert out.startswith(header)
    return out[len(header) :]


def test_async_and_await_go_and_the_names_change_in_code_comments_and_docstrings() -> None:
    source = '''
        class AsyncClient:
            """Use `async with AsyncClient() as c:` and `await c.aclose()`."""

            async def __aenter__(self) -> AsyncClient:  # the AsyncClient itself
                return self

            async def run(self) -> None:
                async with self.http.stream() as response:
                    async for line in response.aiter_lines():
                        await asyncio.sleep(await self.wait(anext(line)))
    '''
    assert _body(source) == textwrap.dedent('''
        class Client:
            """Use `with Client() as c:` and `c.close()`."""

            def __enter__(self) -> Client:  # the Client itself
                return self

            def run(self) -> None:
                with self.http.stream() as response:
                    for line in response.iter_lines():
                        time.sleep(self.wait(next(line)))
    ''')


def test_the_else_of_an_if_async_is_kept_dedented_and_the_marker_goes() -> None:
    source = """
        x = 1
        # Why ASYNC is there.
        ASYNC = True


        def f() -> None:
            if ASYNC:
                # asyncio only
                a()
            else:
                # blocking only
                b()
                c()
            if ASYNC:
                d()
            e()
    """
    assert _body(source) == textwrap.dedent("""
        x = 1


        def f() -> None:
            # blocking only
            b()
            c()
            e()
    """)


@pytest.mark.parametrize(
    "source",
    [
        "flag = ASYNC\n",
        "if ASYNC:\n    a()\nelif other:\n    b()\n",
        "if ASYNC:\n    if ASYNC:\n        a()\n",
    ],
    ids=["used as a value", "with an elif", "nested"],
)
def test_the_marker_is_refused_anywhere_but_an_if_of_its_own(source: str) -> None:
    with pytest.raises(SystemExit, match=r"aio\.py:"):
        _body(source)


def test_client_py_is_what_the_tool_writes_from_aio_py() -> None:
    generate: Callable[[], str] = TOOL.generate
    target: Path = TOOL.TARGET
    assert target.read_text() == generate(), "run `python tools/async_to_sync.py`"
