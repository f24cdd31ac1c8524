"""A C2SP tlog-witness (c2sp.org/tlog-witness): `charter witness`.

A witness remembers, per log origin, the largest checkpoint it cosigned, and cosigns a
new checkpoint only if it is signed by a known log key and provably extends that one.
Its state is a directory of files, never Charter's database (`state`); the check and
the update happen under one lock per origin (`core`); `server` is the HTTP face.
"""
