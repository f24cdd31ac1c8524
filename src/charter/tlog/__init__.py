"""The transparency log's pure core (docs/transparency-log.md).

Formats only, no I/O: RFC 6962 Merkle hashing and proofs (`merkle`), the 88-byte log
entry (`entry`), C2SP signed notes (`note`), checkpoints and cosignatures
(`checkpoint`), tlog-tiles paths and contents (`tiles`), tlog-policy (`policy`),
tlog-proof (`proof`) and the tlog-witness wire texts (`witness_protocol`). The one module
with I/O is `witness_client`, the log's side of tlog-witness (HTTP to the witnesses). The
sequencer, the HTTP routes and the witness server (`charter.witness`) build on these.
"""
