"""The reference receiver: an HTTP service that implements the destination contract.

It performs each request once per idempotency key in its own SQLite database, answers lookups by
key, and has fault switches for the hard cases (see :mod:`effectledger.receiver.app`). Run it with
``effectledger receiver --port P --db FILE``, or in a thread with
:func:`effectledger.receiver.server.serve`.
:func:`effectledger.receiver.contract.reference_destination` is an HTTP destination configured
for it.

Needs the ``receiver`` extra (Starlette, uvicorn); the destination needs the ``http`` extra.
Submodules are imported on use, so ``effectledger.receiver.cli`` loads without either.
"""
