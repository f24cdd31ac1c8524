"""Which policy makes the sequencer ask witnesses, and the mistakes refused at start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from charter.core.errors import ConfigurationError
from charter.tlog.checkpoint import Cosigner
from charter.tlog.logdir import WITNESS_SIZES, LogDirectory
from charter.tlog.note import Ed25519Signer
from charter.tlog.witnessing import SIZES_EVERY, WitnessPublisher, load_policy

LOG = Ed25519Signer.generate("charter.test/log")
W1 = Cosigner.generate("w1.example.org/witness").verifier().vkey
W2 = Cosigner.generate("w2.example.org/witness").verifier().vkey


def _load(tmp_path: Path, text: str) -> object:
    path = tmp_path / "charter.policy"
    path.write_text(text)
    return load_policy(path, LOG.verifier())


def test_no_policy_file_or_quorum_none_publishes_with_the_log_key_alone(tmp_path: Path) -> None:
    assert load_policy(tmp_path / "absent.policy", LOG.verifier()) is None
    vkey = LOG.verifier().vkey
    assert _load(tmp_path, f"log {vkey}\nwitness w1 {W1} http://w1\nquorum none\n") is None


def test_a_witnessed_policy_is_loaded(tmp_path: Path) -> None:
    vkey = LOG.verifier().vkey
    policy = _load(
        tmp_path,
        f"log {vkey}\nwitness w1 {W1} http://w1\nwitness w2 {W2}\ngroup g any w1 w2\nquorum g\n",
    )
    assert policy is not None  # w2 has no URL, but w1 alone can meet `any`


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("log {other}\nwitness w1 {w1} http://w1\nquorum w1\n", "has no `log"),
        ("log {vkey}\nwitness w1 {w1}\nquorum w1\n", "cannot be met"),
        ("log {vkey}\nwitness w1 {w1} http://w1\nwitness w2 {w2}\ngroup g all w1 w2\n"
         "quorum g\n", "cannot be met"),
        ("log {vkey}\nquorum w9\n", "malformed"),
    ],
)  # fmt: skip
def test_a_policy_the_sequencer_cannot_publish_under_is_refused(
    tmp_path: Path, text: str, message: str
) -> None:
    other = Ed25519Signer.generate("other.test/log").verifier().vkey
    filled = text.format(vkey=LOG.verifier().vkey, other=other, w1=W1, w2=W2)
    with pytest.raises(ConfigurationError, match=message):
        _load(tmp_path, filled)


def test_witness_sizes_are_read_back_and_garbage_is_ignored(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path / "log")
    policy = load_policy(_write(tmp_path), LOG.verifier())
    assert policy is not None
    log.state.mkdir(parents=True)
    (log.state / WITNESS_SIZES).write_text('{"w1": 7, "w2": -1, "w3": "x"}')
    publisher = WitnessPublisher(policy, log)
    try:
        assert publisher.sizes == {"w1": 7}
    finally:
        publisher.close()
    (log.state / WITNESS_SIZES).write_text("not json")
    publisher = WitnessPublisher(policy, log)
    try:
        assert publisher.sizes == {}
    finally:
        publisher.close()


def test_witness_sizes_are_written_at_most_every_few_seconds_and_on_close(
    tmp_path: Path,
) -> None:
    log = LogDirectory(tmp_path / "log")
    policy = load_policy(_write(tmp_path), LOG.verifier())
    assert policy is not None
    now = [100.0]
    publisher = WitnessPublisher(policy, log, clock=lambda: now[0])

    def kept() -> object:
        return json.loads((log.state / WITNESS_SIZES).read_text())

    try:
        publisher._keep_sizes({"w1": 3})  # the first change: at once
        assert kept() == {"w1": 3}
        now[0] += SIZES_EVERY - 1
        publisher._keep_sizes({"w1": 4})
        assert kept() == {"w1": 3}  # too soon: one 409 at most if we crashed now
        now[0] += 1
        publisher._keep_sizes({"w1": 5})
        assert kept() == {"w1": 5}
        publisher._keep_sizes({"w1": 6})
    finally:
        publisher.close()
    assert kept() == {"w1": 6}  # what the next start sends as `old`


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "w.policy"
    path.write_text(f"log {LOG.verifier().vkey}\nwitness w1 {W1} http://127.0.0.1:9\nquorum w1\n")
    return path
