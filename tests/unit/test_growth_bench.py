"""The growth benchmark writes envelopes' canonical bytes itself (bench/growth_build.py):
they must be exactly what `rfc8785` makes, and the chains it generates valid."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from charter.core.envelope import Envelope, Submission, verify_submission
from charter.core.timefmt import format_rfc3339

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import growth_build

hex64 = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
moments = st.integers(min_value=0, max_value=10**12).map(
    lambda ms: format_rfc3339(datetime(2000, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms))
)


@given(
    index=st.integers(min_value=0, max_value=99_999_999),
    actor=hex64,
    at=moments,
    n=st.one_of(st.none(), st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)),
    prev=st.one_of(st.none(), hex64),
)
def test_the_direct_encoding_is_rfc8785(
    index: int, actor: str, at: str, n: int | None, prev: str | None
) -> None:
    process = growth_build.process_id(index)
    action = "open" if n is None else "bump"
    envelope = Envelope(
        v=1,
        process=process,
        workflow=growth_build.WORKFLOW,
        action=action,
        input={} if n is None else {"n": n},
        prev=prev,
        actor=actor,
        at=at,
    )
    direct = growth_build.canonical_envelope(process, action, actor, at, n, prev)
    assert direct == envelope.message()


def test_generated_chains_are_signed_and_linked() -> None:
    chunk = growth_build.Chunk(first=7, count=3, events_per_process=4, version="v" * 64)
    events_text, processes_text = growth_build.generate(chunk)
    rows = [line.split("\t") for line in events_text.decode().splitlines()]
    assert len(rows) == 12
    last: dict[str, tuple[str, int]] = {}
    for row in rows:
        process, seq, digest, prev, text, signature = row[0], int(row[1]), *row[2:4], *row[5:7]
        envelope = Envelope.from_json(json.loads(text))
        assert envelope.message() == text.encode()
        assert envelope.hash() == digest
        verify_submission(Submission(envelope, signature))
        before, before_seq = last.get(process, (None, 0))
        assert (envelope.prev, seq) == (before, before_seq + 1)
        assert prev == (before or "\\N")  # COPY's NULL
        last[process] = (digest, seq)
    heads = {}
    for line in processes_text.decode().splitlines():
        fields = line.split("\t")
        heads[fields[0]] = (fields[4], int(fields[5]))
    assert heads == last
