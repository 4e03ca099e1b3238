"""The reviewer's desk: server-rendered pages over the one :class:`~effectledger.app.EffectLedger`.

``create_desk(ledger, keys)`` returns an ASGI application that ``effectledger serve`` mounts at
``/desk`` beside the HTTP API. People log in with their API key (the same keys and roles as the
API) and get a session cookie (``HttpOnly``, ``SameSite=Strict``, ``Secure`` unless the server is
told it runs on plain HTTP); every form carries the session's CSRF token; every response carries
a content security policy that allows only the desk's own stylesheet and script. Nothing is
loaded from anywhere else.

Pages: the queue of proposals waiting for the reviewer (:meth:`EffectLedger.pending`), a
proposal with everything a decision rests on and approve / deny bound to the digest shown
(:meth:`EffectLedger.decide`, which refuses a proposal that expired, changed or was decided
meanwhile and says why), an operation's timeline, state machine, explanation and chain check,
the manual-review queue with its resolution form, and each pool's capacity.

Requires the ``server`` extra (Starlette and Jinja2).
"""

from effectledger.callers.desk.pages import DESK_PATH, create_desk
from effectledger.callers.desk.sessions import SESSION_LIFETIME, Session, Sessions

__all__ = ["DESK_PATH", "SESSION_LIFETIME", "Session", "Sessions", "create_desk"]
