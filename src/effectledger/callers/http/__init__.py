"""The HTTP API: the FastAPI application (:mod:`~effectledger.callers.http.app`), its request and
response models (:mod:`~effectledger.callers.http.models`) and its error answers
(:mod:`~effectledger.callers.http.errors`). Needs the ``server`` extra; see docs/http-api.md.
"""
