"""The log-side client in process: honest witnesses are the real Starlette app (over
httpx's ASGI transport); misbehaving ones are handlers that answer what a broken or
hostile witness would. The same client against real processes: tests/acceptance."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx

from charter.tlog.checkpoint import Cosigner
from charter.tlog.policy import Policy, parse_policy
from charter.tlog.witness_client import Witnessed, witness_checkpoint
from charter.witness.core import Witness
from charter.witness.server import create_witness_app
from tests.unit.witnesskit import TestLog, make_witness

Handler = Callable[[httpx.Request], httpx.Response]


class Router(httpx.AsyncBaseTransport):
    """Dispatch by host: a real witness app, or a handler."""

    def __init__(self, routes: Mapping[str, Witness | Handler]) -> None:
        self._routes: dict[str, httpx.AsyncBaseTransport] = {}
        for host, target in routes.items():
            if isinstance(target, Witness):
                self._routes[host] = httpx.ASGITransport(app=create_witness_app(target))
            else:
                self._routes[host] = httpx.MockTransport(target)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._routes[request.url.host].handle_async_request(request)


def _policy(log: TestLog, witnesses: Mapping[str, str], quorum: str) -> Policy:
    lines = [f"log {log.vkey}"]
    lines += [f"witness {name} {vkey} http://{name}.test" for name, vkey in witnesses.items()]
    return parse_policy("\n".join([*lines, quorum, ""]))


def _run(
    policy: Policy,
    routes: Mapping[str, Witness | Handler],
    note: bytes,
    sizes: Mapping[str, int],
    proof: Callable[[int, int], list[bytes]],
) -> Witnessed:
    async def go() -> Witnessed:
        async with httpx.AsyncClient(transport=Router(routes)) as client:
            return await witness_checkpoint(policy, note, sizes, proof, client=client, timeout=30)

    return asyncio.run(go())


def _vkey() -> str:
    return Cosigner.generate("hostile.example/w").verifier().vkey


def test_witnesses_in_step_share_one_proof(tmp_path: Path) -> None:
    log = TestLog()
    a, b = (
        make_witness(tmp_path / "a", log, name="a.test/w"),
        make_witness(tmp_path / "b", log, name="b.test/w"),
    )
    for w in (a, b):
        w.add_checkpoint(log.request(0, 10))
    calls: list[tuple[int, int]] = []

    def proof(old: int, new: int) -> list[bytes]:
        calls.append((old, new))
        return log.proof(old, new)

    vkeys = {"a": a.cosigner.verifier().vkey, "b": b.cosigner.verifier().vkey}
    policy = _policy(log, vkeys, "group both all a b\nquorum both")
    result = _run(policy, {"a.test": a, "b.test": b}, log.note(30), {"a": 10, "b": 10}, proof)
    assert result.quorum
    assert result.cosigned == ("a", "b")
    assert calls == [(10, 30)]
    assert policy.verify_checkpoint(result.note).witnesses == ("a", "b")


def test_quorum_none_waits_for_everyone_and_holds_without_cosignatures(tmp_path: Path) -> None:
    log = TestLog()
    honest = make_witness(tmp_path, log, name="a.test/w")

    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, text="witness_unknown_log: no\n")

    vkeys = {"a": honest.cosigner.verifier().vkey, "b": _vkey()}
    policy = _policy(log, vkeys, "quorum none")
    result = _run(policy, {"a.test": honest, "b.test": refuse}, log.note(5), {}, log.proof)
    assert result.quorum
    assert result.cosigned == ("a",)
    assert result.replies["b"].status == "refused"
    assert result.replies["b"].detail.startswith("404 witness_unknown_log")


def test_a_witness_without_url_is_not_asked(tmp_path: Path) -> None:
    log = TestLog()
    honest = make_witness(tmp_path, log, name="a.test/w")
    policy = parse_policy(
        f"log {log.vkey}\n"
        f"witness a {honest.cosigner.verifier().vkey} http://a.test\n"
        f"witness offline {_vkey()}\n"
        "group g any a offline\nquorum g\n"
    )
    result = _run(policy, {"a.test": honest}, log.note(5), {}, log.proof)
    assert result.quorum
    assert set(result.replies) == {"a"}


def test_hostile_and_broken_answers_are_not_counted() -> None:
    log = TestLog()
    forged = Cosigner.generate("hostile.example/w")  # a key the policy does not name
    answers: dict[str, Handler] = {
        # 409 without the size content type (an older draft, or a proxy's page)
        "nosize": lambda r: httpx.Response(409, text="3\n"),
        # 409 that names the very size sent: a witness that cannot make up its mind
        "same": lambda r: httpx.Response(
            409, content=b"0\n", headers={"content-type": "text/x.tlog.size"}
        ),
        # 200 with text that is no signature line
        "garbage": lambda r: httpx.Response(200, text="hello\n"),
        # 200 with a valid cosignature by a key the policy does not know
        "forged": lambda r: httpx.Response(200, text=forged.cosign(log.checkpoint(5)).line()),
        # 409 with a new size every time: retried twice, then given up
        "moving": _moving_sizes(),
    }
    vkeys = {name: _vkey() for name in answers}
    policy = _policy(log, vkeys, f"group g any {' '.join(answers)}\nquorum g")
    routes: dict[str, Witness | Handler] = {f"{n}.test": h for n, h in answers.items()}
    result = _run(policy, routes, log.note(5), {}, log.proof)
    assert not result.quorum
    assert result.cosigned == ()
    assert result.note == log.note(5)
    statuses = {n: r.status for n, r in result.replies.items()}
    assert statuses == {
        "nosize": "invalid",
        "same": "invalid",
        "garbage": "invalid",
        "forged": "invalid",
        "moving": "refused",
    }
    assert "kept changing" in result.replies["moving"].detail


def _moving_sizes() -> Handler:
    sizes = iter(range(1, 10))

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            409, content=f"{next(sizes)}\n".encode(), headers={"content-type": "text/x.tlog.size"}
        )

    return answer


def test_unknown_lines_beside_the_cosignature_are_ignored(tmp_path: Path) -> None:
    log = TestLog()
    honest = make_witness(tmp_path, log, name="a.test/w")
    stranger = Cosigner.generate("stranger.example/w")

    def with_extra(request: httpx.Request) -> httpx.Response:
        line = honest.add_checkpoint(request.content).response().decode()
        extra = stranger.cosign(log.checkpoint(5)).line()
        return httpx.Response(200, text=extra + line)

    policy = _policy(log, {"a": honest.cosigner.verifier().vkey}, "quorum a")
    result = _run(policy, {"a.test": with_extra}, log.note(5), {}, log.proof)
    assert result.quorum
    assert b"stranger.example/w" not in result.note
