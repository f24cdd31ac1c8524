"""Audit: everything that checks what the write path recorded.

The pure verifier of a process's evidence (`verify_evidence`), its readers from the
database (`verify_stored`, `verify_pool` for many at once) and from an export bundle
(`bundle`), replay of a chain against its workflow (`replay`), the checks of spawn
geneses and automated events, and the checks of chains against the transparency log
(`bundle_log`, `log_check`). It reads what `engine` and `tlog` wrote and writes nothing
to either.
"""
