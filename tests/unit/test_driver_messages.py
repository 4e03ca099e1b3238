"""PostgreSQL driver errors become one-line effectledger messages a person can read."""

from __future__ import annotations

import psycopg

from effectledger.errors import StorageError
from effectledger.store.postgres_errors import translate


def test_a_libpq_message_with_newlines_and_tabs_reads_as_one_line_of_text() -> None:
    """libpq's ``\\n\\t`` between a failure and its hint becomes a space, nothing escaped."""
    said = psycopg.OperationalError(
        'connection to server at "127.0.0.1", port 1 failed: Connection refused\n'
        "\tIs the server running on that host and accepting TCP/IP connections?"
    )
    error = translate(said, "open")
    assert isinstance(error, StorageError)
    assert error.message == (
        'open: OperationalError: connection to server at "127.0.0.1", port 1 failed: '
        "Connection refused Is the server running on that host and accepting TCP/IP connections?"
    )


def test_a_password_in_the_driver_message_is_still_masked() -> None:
    """Flattening the text keeps the password of a URL the driver echoes hidden."""
    said = psycopg.OperationalError("invalid dsn postgresql://app:s3cret@h/x\n\tcheck it")
    error = translate(said, "open")
    assert "s3cret" not in error.message
    assert "postgresql://app:***@h/x check it" in error.message
