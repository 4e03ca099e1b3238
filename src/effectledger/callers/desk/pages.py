"""The desk's routes: login, the queue, a proposal and its decision, an operation, reviews.

Every handler reads the session, calls one method of the :class:`EffectLedger` in a worker
thread (the ledger is synchronous) and renders one template. Errors of the error tree become a
page that names the stable code and says what to do; nothing else is shown of them.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from effectledger.app import EffectLedger
from effectledger.app.keys import ApiKeys
from effectledger.callers.desk.security import SECURITY_HEADERS
from effectledger.callers.desk.sessions import SESSION_LIFETIME, Session, Sessions

if TYPE_CHECKING:
    from effectledger.callers.desk.sso import OpenIdLogin, SsoSettings
from effectledger.callers.desk.text import hidden_in, marked, shown, shown_json
from effectledger.callers.desk.views import (
    capacity_view,
    manual_reviews,
    operation_view,
    proposal_outcome,
)
from effectledger.errors import ApprovalRefused, EffectLedgerError, InvalidInput
from effectledger.model import Observation
from effectledger.model.review import expiry_phrase

__all__ = ["DESK_PATH", "create_desk", "draws_capacity"]

DESK_PATH = "/desk"
SESSION_COOKIE = "effectledger_desk"
LOGIN_COOKIE = "effectledger_desk_login"
SSO_COOKIE = "effectledger_desk_sso"


def _day(value: str | None, name: str) -> datetime | None:
    """A ``YYYY-MM-DD`` filter as the start of that day, UTC."""
    if value is None:
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise InvalidInput(f"{name} is a date, YYYY-MM-DD", field=name) from None


def draws_capacity(proposal: Any) -> bool:
    """Whether ``proposal``'s action draws capacity: it named a pool (an action that names
    none holds zero units of a pool called after itself, which is no pool to show)."""
    return bool(proposal.units) or proposal.pool != proposal.action


MAX_FORM_BYTES = 16 * 1024
_STATIC = {"desk.css": "text/css; charset=utf-8", "desk.js": "text/javascript; charset=utf-8"}
Handler = Callable[[Request], Awaitable[Response]]


def create_desk(
    ledger: EffectLedger,
    keys: ApiKeys,
    *,
    secure_cookies: bool = True,
    sessions: Sessions | None = None,
    sso: SsoSettings | OpenIdLogin | None = None,
) -> Starlette:
    """The desk as an ASGI application, to mount at :data:`DESK_PATH` beside the HTTP API.

    ``secure_cookies=False`` drops the cookie's ``Secure`` flag, for a desk served on plain
    HTTP to a browser that would otherwise refuse the cookie; keep it on behind TLS. ``sso``
    adds single sign-on through an OpenID provider (:mod:`effectledger.callers.desk.sso`,
    the ``sso`` extra) beside the API-key login.
    """
    desk = _Desk(ledger, sessions or Sessions(keys, clock=ledger.ledger.clock), secure_cookies)
    if sso is not None:
        from effectledger.callers.desk.sso import OpenIdLogin

        desk.sso = sso if isinstance(sso, OpenIdLogin) else OpenIdLogin(sso)
    routes = [
        Route("/sso", desk.sso_start, methods=["GET"]),
        Route("/sso/callback", desk.sso_callback, methods=["GET"]),
        Route("/", desk.queue, methods=["GET"]),
        Route("/login", desk.login_form, methods=["GET"]),
        Route("/login", desk.login, methods=["POST"]),
        Route("/logout", desk.logout, methods=["POST"]),
        Route("/proposals/{proposal_id}", desk.proposal, methods=["GET"]),
        Route("/proposals/{proposal_id}/decide", desk.decide, methods=["POST"]),
        Route("/operations/{operation_id}", desk.operation, methods=["GET"]),
        Route("/operations/{operation_id}/resolve", desk.resolve, methods=["POST"]),
        Route("/operations/{operation_id}/receipt", desk.receipt, methods=["GET"]),
        Route("/reviews", desk.reviews, methods=["GET"]),
        Route("/history", desk.history, methods=["GET"]),
        Route("/capacity", desk.capacity, methods=["GET"]),
        Route("/static/{name}", desk.static, methods=["GET"]),
    ]
    return Starlette(routes=routes)


class _Desk:
    def __init__(self, ledger: EffectLedger, sessions: Sessions, secure: bool) -> None:
        self.ledger = ledger
        self.sessions = sessions
        self.secure = secure
        self.sso: OpenIdLogin | None = None
        self.templates = Environment(
            loader=PackageLoader("effectledger.callers.desk", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
        )
        # Model-derived text shown with every hidden character visible (text.py): JSON as the
        # reviewer reads it (not tojson's \u003c escapes), HTML-escaped, its marks wrapped.
        self.templates.filters["reveal"] = shown
        self.templates.filters["as_json"] = shown_json
        self.templates.filters["marked"] = marked
        self.templates.globals["hidden_in"] = hidden_in
        self.templates.globals["summary"] = self.summary
        self.templates.globals["draws_capacity"] = draws_capacity

    def summary(self, proposal: Any) -> Markup | None:
        """The action's declared summary of ``proposal``'s arguments, its values revealed and
        marked, or ``None`` when the action declares none (the arguments are shown instead)."""
        try:
            display = self.ledger.registry.get(proposal.action).display
        except EffectLedgerError:
            return None
        if display is None:
            return None
        return Markup("").join(
            shown(part.text) if part.from_arguments else escape(part.text)
            for part in display.render(proposal.arguments)
        )

    # -- rendering -----------------------------------------------------------------------

    def render(self, request: Request, name: str, *, status: int = 200, **values: Any) -> Response:
        session = values.pop("session", None)
        body = self.templates.get_template(name).render(
            base=request.scope.get("root_path", ""),
            session=session,
            now=self.ledger.ledger.clock.now(),
            default_ttl=self.ledger.ledger.settings.proposal_ttl,
            **values,
        )
        return self._secured(HTMLResponse(body, status_code=status))

    @staticmethod
    def _secured(response: Response) -> Response:
        for name, value in SECURITY_HEADERS.items():
            response.headers[name] = value
        return response

    def failed(self, request: Request, session: Session | None, exc: EffectLedgerError) -> Response:
        return self.render(
            request,
            "error.html",
            status=exc.status,
            session=session,
            code=exc.code,
            message=exc.message,
            reason=exc.details.get("reason"),
        )

    def redirect(self, request: Request, path: str) -> Response:
        return self._secured(
            RedirectResponse(request.scope.get("root_path", "") + path, status_code=303)
        )

    # -- sessions ------------------------------------------------------------------------

    def session(self, request: Request) -> Session | None:
        return self.sessions.get(request.cookies.get(SESSION_COOKIE))

    async def form(self, request: Request, session: Session | None) -> dict[str, str]:
        """The posted form, once its size and its CSRF token are checked."""
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            raise InvalidInput("the form is too large")
        try:
            parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidInput("the form could not be read") from exc
        fields = {key: values[0] for key, values in parsed.items() if len(values) == 1}
        if session is not None and not session.csrf_matches(fields.get("csrf")):
            raise InvalidInput("the form's CSRF token does not match the session", reason="csrf")
        return fields

    def _cookie(self, response: Response, name: str, value: str, max_age: int) -> None:
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            path=DESK_PATH,
            secure=self.secure,
            httponly=True,
            samesite="strict",
        )

    async def login_form(self, request: Request) -> Response:
        return self._login_page(request, None, 200)

    def _login_page(self, request: Request, error: str | None, status: int) -> Response:
        nonce = secrets.token_urlsafe(32)
        response = self.render(
            request, "login.html", status=status, nonce=nonce, error=error, sso=self.sso
        )
        self._cookie(response, LOGIN_COOKIE, nonce, 600)
        return response

    async def login(self, request: Request) -> Response:
        try:
            fields = await self.form(request, None)
            cookie = request.cookies.get(LOGIN_COOKIE, "")
            presented = fields.get("nonce", "")
            if not cookie and self.secure and request.url.scheme == "http":
                raise InvalidInput(
                    "the browser did not send back the desk's login cookie: it is marked "
                    "Secure and this page came over plain HTTP, so the browser dropped it. "
                    "Reach the desk over HTTPS, or, on a network you trust, start "
                    "`effectledger serve` with --plain-http-cookies",
                    reason="csrf",
                )
            if not cookie or not secrets.compare_digest(cookie, presented):
                raise InvalidInput("the login form expired: load it again", reason="csrf")
            session_id, _ = await run_in_threadpool(self.sessions.login, fields.get("token", ""))
        except EffectLedgerError as exc:
            return self._login_page(request, f"{exc.message} [{exc.code}]", exc.status)
        response = self.redirect(request, "/")
        self._cookie(response, SESSION_COOKIE, session_id, int(SESSION_LIFETIME.total_seconds()))
        response.delete_cookie(LOGIN_COOKIE, path=DESK_PATH)
        return response

    def _sso_redirect_uri(self, request: Request) -> str:
        root = str(request.scope.get("root_path", ""))
        return f"{request.url.scheme}://{request.url.netloc}{root}/sso/callback"

    async def sso_start(self, request: Request) -> Response:
        """Send the person to the identity provider, the login's state in a cookie."""
        if self.sso is None:
            return self.redirect(request, "/login")
        sso = self.sso
        try:
            url, state = await run_in_threadpool(sso.start, self._sso_redirect_uri(request))
        except EffectLedgerError as exc:
            return self._login_page(request, f"{exc.message} [{exc.code}]", exc.status)
        response = self._secured(RedirectResponse(url, status_code=303))
        # Lax, not Strict: the provider sends the person back with a cross-site navigation.
        response.set_cookie(
            SSO_COOKIE,
            state,
            max_age=600,
            path=DESK_PATH,
            secure=self.secure,
            httponly=True,
            samesite="lax",
        )
        return response

    async def sso_callback(self, request: Request) -> Response:
        """Finish a login at the identity provider: a session, or a page saying why not."""
        if self.sso is None:
            return self.redirect(request, "/login")
        sso = self.sso
        query = request.query_params
        if query.get("error"):
            error = f"the identity provider refused the sign-in ({query['error']})"
            return self._login_page(request, f"{error} [not_authenticated]", 401)
        try:
            context, id_token = await run_in_threadpool(
                lambda: sso.finish_login(
                    state=query.get("state", ""),
                    cookie_state=request.cookies.get(SSO_COOKIE),
                    code=query.get("code"),
                )
            )
            session_id, _ = self.sessions.open(context, sso.subject_key(context), id_token=id_token)
        except EffectLedgerError as exc:
            response = self._login_page(request, f"{exc.message} [{exc.code}]", exc.status)
            response.delete_cookie(SSO_COOKIE, path=DESK_PATH)
            return response
        # A page that moves on by itself: the queue then loads as a same-site navigation, so
        # the Strict session cookie set here is sent with it.
        response = self.render(request, "signed_in.html", who=context)
        self._cookie(response, SESSION_COOKIE, session_id, int(SESSION_LIFETIME.total_seconds()))
        response.delete_cookie(SSO_COOKIE, path=DESK_PATH)
        return response

    async def logout(self, request: Request) -> Response:
        session = self.session(request)
        if session is not None:
            try:
                await self.form(request, session)
            except EffectLedgerError as exc:
                return self.failed(request, session, exc)
            self.sessions.logout(request.cookies.get(SESSION_COOKIE))
        response = self.redirect(request, "/login")
        if session is not None and session.id_token is not None and self.sso is not None:
            # Signed in at the provider: end its session too, then come back to the login.
            root = str(request.scope.get("root_path", ""))
            after = f"{request.url.scheme}://{request.url.netloc}{root}/login"
            sso = self.sso
            token = session.id_token
            url = await run_in_threadpool(lambda: sso.logout_url(token, after))
            if url is not None:
                # A page that moves on by itself, not a redirect: the form's CSP (form-action
                # 'self') would stop a browser following a redirect to another origin.
                response = self.render(request, "signed_out.html", provider_logout=url)
        response.delete_cookie(SESSION_COOKIE, path=DESK_PATH)
        return response

    # -- pages ---------------------------------------------------------------------------

    async def queue(self, request: Request) -> Response:
        session = self.session(request)
        if session is None:
            return self.redirect(request, "/login")
        query = request.query_params
        filters = {name: query.get(name) or None for name in ("action", "pool", "proposer")}
        order = query.get("order") or "expiring"
        try:
            page = await run_in_threadpool(
                lambda: self.ledger.pending(
                    session.context,
                    order=order,
                    after=query.get("after") or None,
                    action=filters["action"],
                    pool=filters["pool"],
                    proposer=filters["proposer"],
                )
            )
        except EffectLedgerError as exc:
            return self.failed(request, session, exc)
        kept = {k: v for k, v in {**filters, "order": order}.items() if v}
        return self.render(
            request,
            "queue.html",
            session=session,
            page=page,
            order=order,
            filters=filters,
            expiry=expiry_phrase,
            next_query=None
            if page.next_cursor is None
            else urlencode({**kept, "after": page.next_cursor}),
        )

    async def proposal(self, request: Request) -> Response:
        session = self.session(request)
        if session is None:
            return self.redirect(request, "/login")
        return await self._proposal_page(request, session, None, 200)

    async def _proposal_page(
        self, request: Request, session: Session, refusal: ApprovalRefused | None, status: int
    ) -> Response:
        proposal_id = request.path_params["proposal_id"]
        try:
            review = await run_in_threadpool(self.ledger.review, session.context, proposal_id)
            pool = await run_in_threadpool(
                self.ledger.capacity, session.context, review.proposal.pool
            )
            outcome = await run_in_threadpool(
                proposal_outcome, self.ledger, session.context, review
            )
        except EffectLedgerError as exc:
            return self.failed(request, session, exc)
        return self.render(
            request,
            "proposal.html",
            status=status,
            session=session,
            review=review,
            proposal=review.proposal,
            description=self.ledger.registry.get(review.proposal.action).description,
            pool=pool,
            outcome=outcome,
            hidden=hidden_in(
                [
                    review.proposal.target,
                    review.proposal.arguments,
                    review.proposal.correlation,
                    review.proposal.resource_version,
                    review.denial_reason or "",
                    review.proposal.stated_reason or "",
                ]
            ),
            expiry=expiry_phrase,
            refusal=refusal,
            done=request.query_params.get("done"),
        )

    async def decide(self, request: Request) -> Response:
        session = self.session(request)
        if session is None:
            return self.redirect(request, "/login")
        proposal_id = request.path_params["proposal_id"]
        try:
            fields = await self.form(request, session)
            decision = fields.get("decision")
            if decision not in ("approve", "deny"):
                raise InvalidInput("choose approve or deny", field="decision")
            await run_in_threadpool(
                lambda: self.ledger.decide(
                    session.context,
                    proposal_id,
                    digest=fields.get("digest", ""),
                    approve=decision == "approve",
                    reason=fields.get("reason") or None,
                )
            )
        except ApprovalRefused as exc:
            return await self._proposal_page(request, session, exc, 409)
        except EffectLedgerError as exc:
            return self.failed(request, session, exc)
        done = "approved" if decision == "approve" else "denied"
        return self.redirect(request, f"/proposals/{proposal_id}?done={done}")

    async def operation(self, request: Request) -> Response:
        session = self.session(request)
        if session is None:
            return self.redirect(request, "/login")
        operation_id = request.path_params["operation_id"]
        try:
            view = await run_in_threadpool(
                operation_view, self.ledger, session.context, operation_id
            )
        except EffectLedgerError as exc:
            return self.failed(request, session, exc)
        return self.render(
            request,
            "operation.html",
            session=session,
            view=view,
            done=request.query_params.get("done"),
        )

    async def resolve(self, request: Request) -> Response:
        session = self.session(request)
        if session is None:
            return self.redirect(request, "/login")
        operation_id = request.path_params["operation_id"]
        try:
            fields = await self.form(request, session)
            evidence = fields.get("evidence_reference", "").strip()
            if not evidence:
                raise InvalidInput("name the evidence you checked", field="evidence_reference")
            if fields.get("outcome") == "accepted":
                observation = Observation.accepted(
                    fields.get("provider_reference", "").strip(), evidence
                )
            elif fields.get("outcome") == "rejected":
                observation = Observation.rejected(evidence)
            else:
                raise InvalidInput("choose what the destination's records show", field="outcome")
            await run_in_threadpool(self.ledger.resolve, session.context, operation_id, observation)
        except EffectLedgerError as exc:
            return self.failed(request, session, exc)
        return self.redirect(request, f"/operations/{operation_id}?done=resolved")

    async def receipt(self, request: Request) -> Response:
        session = self.session(request)
        if session is None:
            return self.redirect(request, "/login")
        operation_id = request.path_params["operation_id"]
        try:
            body = await run_in_threadpool(self.ledger.prove, session.context, operation_id)
        except EffectLedgerError as exc:
            return self.failed(request, session, exc)
        response = Response(body, media_type="application/octet-stream")
        self._secured(response)
        response.headers["Content-Disposition"] = f'attachment; filename="{operation_id}.receipt"'
        return response

    async def reviews(self, request: Request) -> Response:
        session = self.session(request)
        if session is None:
            return self.redirect(request, "/login")
        try:
            waiting = await run_in_threadpool(manual_reviews, self.ledger, session.context)
        except EffectLedgerError as exc:
            return self.failed(request, session, exc)
        return self.render(request, "reviews.html", session=session, waiting=waiting)

    async def history(self, request: Request) -> Response:
        """Decisions made, newest first, filtered and searched (the reviewer's History)."""
        session = self.session(request)
        if session is None:
            return self.redirect(request, "/login")
        query = request.query_params
        filters = {
            name: (query.get(name) or "").strip() or None
            for name in ("decider", "action", "outcome", "search", "since", "until")
        }
        try:
            since, until = (_day(filters[name], name) for name in ("since", "until"))
            page = await run_in_threadpool(
                lambda: self.ledger.decisions(
                    session.context,
                    decider=filters["decider"],
                    action=filters["action"],
                    outcome=filters["outcome"],
                    search=filters["search"],
                    since=since,
                    until=None if until is None else until + timedelta(days=1),
                    after=query.get("after") or None,
                )
            )
        except EffectLedgerError as exc:
            return self.failed(request, session, exc)
        kept = {name: value for name, value in filters.items() if value}
        more = None if page.next_cursor is None else urlencode({**kept, "after": page.next_cursor})
        return self.render(
            request, "history.html", session=session, page=page, filters=filters, next_query=more
        )

    async def capacity(self, request: Request) -> Response:
        session = self.session(request)
        if session is None:
            return self.redirect(request, "/login")
        try:
            pools = await run_in_threadpool(capacity_view, self.ledger, session.context)
        except EffectLedgerError as exc:
            return self.failed(request, session, exc)
        return self.render(request, "capacity.html", session=session, pools=pools)

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _STATIC:
            return self._secured(Response("not found", status_code=404, media_type="text/plain"))
        text = resources.files("effectledger.callers.desk").joinpath("static", name).read_bytes()
        response = Response(text, media_type=_STATIC[name])
        self._secured(response)
        response.headers["Cache-Control"] = "max-age=300"
        return response
