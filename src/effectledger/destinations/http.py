"""An HTTP destination: send an operation's command to a real API, ask it by key, keep its answer.

Configure one :class:`HttpDestination` per account and endpoint, with one :class:`HttpAction` per
action (method, URL template, body, classification contract) and one :class:`HttpLookup` (recovery
knows only the key, so the lookup is per destination). Requires the ``http`` extra (httpx).

What it promises (docs/destinations.md says each in full): the key goes out as
``Idempotency-Key`` (or where the API wants it); every answer is classified by the action's
:class:`~.http_contract.HttpContract`, and anything after which the request may have been acted
on is Unknown; one deadline bounds each whole exchange, resends included; a resend happens only
inside the contract's replay window, and once any send may have acted only an accepted resend
settles the exchange; the answer is kept as redacted evidence with every credential sent scrubbed
from it; an endpoint with userinfo is refused; a lookup record of another key is Unknown.

Sync (:meth:`submit`, :meth:`lookup`) and async (:meth:`submit_async`, :meth:`lookup_async`)
share the classification. A cancelled ``submit_async`` raises ``CancelledError`` to its caller:
record the attempt as Unknown then (:meth:`effectledger.workers.Executor.execute_async` does
this for you by running the submission to its recorded end even when its caller is cancelled).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from effectledger.destinations import BoundDestination
from effectledger.destinations import concurrent_sends as checked_sends
from effectledger.destinations.http_contract import HttpContract, StatusRule
from effectledger.destinations.http_deadline import DeadlineTransport
from effectledger.destinations.http_exchange import (
    Answer,
    Prepared,
    RawAnswer,
    RequestNotSent,
    answer_from_error,
    classified,
    evidence_of,
    prepare,
    read_async,
    read_sync,
    reference_from,
)
from effectledger.destinations.http_lookup import HttpLookup, lookup_observation
from effectledger.destinations.secrets import SecretHeader
from effectledger.errors import DestinationUnavailable, InvalidInput
from effectledger.model.evidence import EvidencePolicy
from effectledger.model.operations import Command, Observation, Outcome

__all__ = [
    "HttpAction",
    "HttpContract",
    "HttpDestination",
    "HttpLookup",
    "LookupNotSent",
    "StatusRule",
]

BodyBuilder = Callable[[Command, str], Any]
"""Builds a request's JSON body from the command and its idempotency key."""


class LookupNotSent(DestinationUnavailable):
    """A lookup could not be sent (no connection): nothing was learned, try again later.

    ``details["reason"]`` says why (``connect``, ``secret_unavailable``, ...).
    """

    code = "lookup_not_sent"

    def __init__(self, reason: str) -> None:
        super().__init__(f"the lookup could not be sent ({reason})", reason=reason)


def _arguments_body(command: Command, key: str) -> Any:
    return dict(command.arguments)


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpAction:
    """How one action is sent: ``path`` is a URL template relative to the destination endpoint.

    ``path`` may name ``{key}``, ``{action}`` and any scalar argument of the command (values are
    percent-encoded). ``body`` builds the JSON body (default: the command's arguments);
    ``reference_field`` names the response field that holds the provider's reference (dotted for
    nested objects); without it the reference is ``idempotency-key/<key>``.
    """

    path: str
    method: str = "POST"
    body: BodyBuilder = _arguments_body
    contract: HttpContract = field(default_factory=HttpContract)
    reference_field: str = "id"


class HttpDestination(BoundDestination):
    """A :class:`~effectledger.destinations.Destination` that speaks HTTP (module docstring).

    ``endpoint`` is the base URL (``https://api.example.com``) and, with ``account_id``, the
    destination binding the ledger checks before every submit and lookup. ``headers`` are sent
    with every request; :class:`~.secrets.SecretHeader` values are read per request.
    ``clock`` (monotonic seconds) measures the replay window; tests may inject one.
    Sync calls use one connection pool per thread (:meth:`close` closes them); async calls use
    one pool bound to the running event loop (:meth:`aclose` it before that loop ends).
    ``concurrent_sends``: how many submissions a worker that claims in batches sends at once
    (1, one after another, unless the system behind the endpoint is known to take more).
    """

    def __init__(
        self,
        *,
        account_id: str,
        endpoint: str,
        actions: Mapping[str, HttpAction],
        lookup: HttpLookup,
        headers: Mapping[str, str | SecretHeader] | None = None,
        idempotency_header: str | None = "Idempotency-Key",
        submit_deadline_s: float = 10.0,
        lookup_deadline_s: float = 10.0,
        connect_timeout_s: float = 3.0,
        evidence_policy: EvidencePolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
        concurrent_sends: int = 1,
    ) -> None:
        if not endpoint.startswith(("http://", "https://")):
            raise InvalidInput("endpoint must be an http:// or https:// URL", field="endpoint")
        if "@" in urlsplit(endpoint).netloc:
            raise InvalidInput(
                "endpoint must not carry credentials (user:password@); use a secret header",
                field="endpoint",
            )
        for name, value in (("submit_deadline_s", submit_deadline_s),
                            ("lookup_deadline_s", lookup_deadline_s),
                            ("connect_timeout_s", connect_timeout_s)):  # fmt: skip
            if not 0 < value <= 600:
                raise InvalidInput(f"{name} must be in (0, 600] seconds", field=name)
        if not actions:
            raise InvalidInput("an HTTP destination needs at least one action", field="actions")
        self.concurrent_sends = concurrent_sends
        checked_sends(self)
        self._account_id = account_id
        self._endpoint = endpoint.rstrip("/")
        self.actions = dict(actions)
        self.lookup_spec = lookup
        self.headers = dict(headers or {})
        self.idempotency_header = idempotency_header
        self.submit_deadline_s = submit_deadline_s
        self.lookup_deadline_s = lookup_deadline_s
        self.connect_timeout_s = connect_timeout_s
        self.evidence_policy = evidence_policy or EvidencePolicy()
        self.clock = clock
        self._transport = transport
        self._async_transport = async_transport
        self._local = threading.local()
        self._clients: list[httpx.Client] = []
        self._clients_lock = threading.Lock()
        self._async_client: httpx.AsyncClient | None = None

    def check_action(self, action: str) -> None:
        """Refuse to be bound to ``action`` without a mapping for it (``invalid_input``)."""
        if action not in self.actions:
            raise InvalidInput(
                f"the HTTP destination at {self._endpoint} has no mapping for action {action!r}",
                field="actions",
                action=action,
            )

    # -- clients ---------------------------------------------------------------------------

    def _client(self) -> httpx.Client:
        # One client (and connection pool) per thread: executors run in many threads.
        client: httpx.Client | None = getattr(self._local, "client", None)
        if client is None:
            transport = self._transport
            if transport is None:
                transport = self._local.deadline = DeadlineTransport()
            client = httpx.Client(transport=transport, follow_redirects=False)
            self._local.client = client
            with self._clients_lock:
                self._clients.append(client)
        return client

    def _aclient(self) -> httpx.AsyncClient:
        if self._async_client is None:
            self._async_client = httpx.AsyncClient(
                transport=self._async_transport, follow_redirects=False
            )
        return self._async_client

    def close(self) -> None:
        """Close every thread's connection pool."""
        with self._clients_lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()
        self._local = threading.local()

    async def aclose(self) -> None:
        """Close the async connection pool (and the sync ones)."""
        if self._async_client is not None:
            await self._async_client.aclose()
            self._async_client = None
        self.close()

    def _timeout(self, deadline_s: float) -> httpx.Timeout:
        return httpx.Timeout(
            deadline_s,
            connect=min(self.connect_timeout_s, deadline_s),
            pool=min(self.connect_timeout_s, deadline_s),
        )

    # -- submit ----------------------------------------------------------------------------

    def _prepare_submit(self, command: Command, key: str) -> tuple[HttpAction, Prepared]:
        action = self.actions.get(command.action)
        if action is None:
            raise RequestNotSent("no_http_action")
        extra = {self.idempotency_header: key} if self.idempotency_header else {}
        try:
            body = action.body(command, key)
        except Exception:
            # A body builder that fails (a missing argument, say) fails before anything is sent.
            raise RequestNotSent("body_builder_failed") from None
        request = prepare(
            self._endpoint,
            action.method,
            action.path,
            command=command,
            key=key,
            headers=self.headers,
            extra_headers=extra,
            body=body,
            credential_headers=self.evidence_policy.redact_headers,
        )
        return action, request

    def submit(self, command: Command, key: str) -> Observation:
        """Send ``command`` under ``key`` and classify the answer (module docstring)."""
        ends = time.monotonic() + self.submit_deadline_s
        exchange = self._submit_exchange(command, key, ends)
        try:
            request = next(exchange)
            while True:
                request = exchange.send(self._read(request, ends))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def submit_async(self, command: Command, key: str) -> Observation:
        """:meth:`submit` on the event loop; the deadline bounds the whole exchange."""
        ends = time.monotonic() + self.submit_deadline_s
        exchange = self._submit_exchange(command, key, ends)
        try:
            request = next(exchange)
            while True:
                request = exchange.send(await self._read_async(request, ends))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def _submit_exchange(
        self, command: Command, key: str, ends: float
    ) -> Generator[Prepared, RawAnswer | Answer, Observation]:
        """A submission without its I/O: yields each request to send and is sent what came back.

        ``ends`` (monotonic seconds) is the deadline of the whole exchange, resends included.
        """
        try:
            action, request = self._prepare_submit(command, key)
        except RequestNotSent as not_sent:
            return self._not_sent_submit(command, key, not_sent)
        first_send = self.clock()
        answers: list[str] = []
        while True:
            answer = classified(action.contract, (yield request))
            answers.append(answer.reason)
            if not self._may_resend(action.contract, answer, first_send, len(answers) - 1, ends):
                return self._submit_observation(action, request, key, _settled(answer, answers),
                                                answers)  # fmt: skip

    def _may_resend(
        self, contract: HttpContract, answer: Answer, first_send: float, resends: int, ends: float
    ) -> bool:
        """Whether an identical resend is allowed now: Unknown, inside the window and the
        exchange's deadline, budget left."""
        if answer.outcome is not Outcome.UNKNOWN or not contract.replays:
            return False
        if resends >= contract.max_resends or time.monotonic() >= ends:
            return False
        window_end = first_send + contract.replay_window.total_seconds()
        # The resend must be over before the window closes: the window is never extended.
        return self.clock() + self.submit_deadline_s <= window_end

    def _read(self, request: Prepared, ends: float) -> RawAnswer | Answer:
        """The answer to ``request`` before ``ends``, or the classified failure of the exchange."""
        left = ends - time.monotonic()
        if left <= 0:
            return answer_from_error(TimeoutError())
        try:
            client = self._client()
            deadline: DeadlineTransport | None = getattr(self._local, "deadline", None)
            if deadline is None:
                return read_sync(client, request, self._timeout(left), ends)
            with deadline.until(ends):
                return read_sync(client, request, self._timeout(left), ends)
        except Exception as exc:
            return answer_from_error(exc)

    async def _read_async(self, request: Prepared, ends: float) -> RawAnswer | Answer:
        """:meth:`_read` on the event loop."""
        left = ends - time.monotonic()
        try:
            # httpx's timeouts bound each phase; asyncio bounds the whole exchange.
            async with asyncio.timeout(left):
                return await read_async(self._aclient(), request, self._timeout(max(left, 1e-3)))
        except Exception as exc:
            return answer_from_error(exc)

    def _not_sent_submit(self, command: Command, key: str, not_sent: RequestNotSent) -> Observation:
        answer = Answer(outcome=Outcome.RETRYABLE_REJECTION, reason=not_sent.reason, sent=False)
        document = {"source": "submit", "action": command.action, "idempotency_key": key}
        return Observation(
            outcome=answer.outcome,
            evidence=evidence_of(document, answer, self.evidence_policy),
            reason=answer.reason,
        )

    def _submit_observation(
        self, action: HttpAction, request: Prepared, key: str, answer: Answer, answers: list[str]
    ) -> Observation:
        document = {
            "source": "submit",
            "method": request.method,
            "url": request.shown_url,
            "idempotency_key": key,
            "resends": len(answers) - 1,
            "answers": answers,
        }
        evidence = evidence_of(document, answer, self.evidence_policy, request.secrets)
        if answer.outcome is not Outcome.ACCEPTED:
            return Observation(outcome=answer.outcome, evidence=evidence, reason=answer.reason)
        return Observation(
            outcome=Outcome.ACCEPTED,
            provider_reference=reference_from(
                answer.body, action.reference_field, key, request.secrets
            ),
            evidence=evidence,
        )

    # -- lookup ----------------------------------------------------------------------------

    def lookup(self, key: str) -> Observation:
        """What the destination did under ``key``: Accepted with its reference, or Unknown.

        Raises :class:`LookupNotSent` when the request could not be sent at all.
        """
        request = self._lookup_request(key)
        answer = self._read(request, time.monotonic() + self.lookup_deadline_s)
        return self._lookup_observation(request, key, answer)

    async def lookup_async(self, key: str) -> Observation:
        """:meth:`lookup` on the event loop; the deadline bounds the whole exchange."""
        request = self._lookup_request(key)
        answer = await self._read_async(request, time.monotonic() + self.lookup_deadline_s)
        return self._lookup_observation(request, key, answer)

    def _lookup_request(self, key: str) -> Prepared:
        spec = self.lookup_spec
        try:
            return prepare(
                self._endpoint, spec.method, spec.path, command=None, key=key, headers=self.headers,
                credential_headers=self.evidence_policy.redact_headers,
            )  # fmt: skip
        except RequestNotSent as not_sent:
            raise LookupNotSent(not_sent.reason) from None

    def _lookup_observation(
        self, request: Prepared, key: str, raw: RawAnswer | Answer
    ) -> Observation:
        if isinstance(raw, Answer) and not raw.sent:
            raise LookupNotSent(raw.reason)
        return lookup_observation(self.lookup_spec, request, key, raw, self.evidence_policy)


def _settled(answer: Answer, answers: list[str]) -> Answer:
    """The exchange's answer: once an earlier send may have been acted on, only an acceptance
    settles it; any refusal of a resend is kept as evidence and the exchange stays Unknown."""
    if len(answers) == 1 or answer.outcome in (Outcome.ACCEPTED, Outcome.UNKNOWN):
        return answer
    return dataclasses.replace(
        answer, outcome=Outcome.UNKNOWN, reason=f"resend_refused:{answer.reason}"
    )
