"""The transparency log's pure core (design: transparency-log.md §1b).

Formats only, no I/O: RFC 6962 Merkle hashing and proofs (`merkle`), the 88-byte log
entry (`entry`), C2SP signed notes (`note`), checkpoints and cosignatures
(`checkpoint`), tlog-tiles paths and contents (`tiles`), tlog-policy (`policy`) and
tlog-proof (`proof`). The sequencer, the HTTP routes and the witness server build on
these.
"""
