"""Single sign-on through a real OpenID provider: the certified ``oidc-provider`` under Node.

A fixture installs the provider from npm (``tests/desk/oidc``, once) and runs it on 127.0.0.1
with the desk registered as a confidential client that must use PKCE; the person signs in
through the provider's own login and consent pages, over real HTTP. A person the provider
vouches for gets a session with the tenant, actor and roles of their claims; a tenant the desk
does not serve, no role, a callback replayed or started in another browser, an expired ID
token, a provider that names another issuer, and an ID token issued to another client are each
refused with a page saying why and no session.
"""

from __future__ import annotations

import contextlib
import fcntl
import html
import json
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import pytest

from effectledger.app.keys import ApiKeys
from effectledger.callers.desk.sessions import Sessions
from effectledger.callers.desk.sso import OpenIdLogin, SsoSettings
from effectledger.callers.http.app import create_app
from effectledger.errors import NotAuthenticated
from tests.acceptance.test_authority_matrix import REFUND_30
from tests.callers.scenarios import AGENT, World, fresh_world
from tests.conftest import in_ci

FOLDER = Path(__file__).parent / "oidc"
SECRET = "desk-client-secret-for-tests-only"
ACCOUNTS = {
    "rita": {"tenant": "acme", "roles": ["approver"]},
    "gus": {"tenant": "globex", "roles": ["approver"]},
    "nora": {"tenant": "acme"},
}


def _node() -> str:
    """Node, with the provider installed from the lock file once: concurrent test processes
    wait for one install (a lock), and a marker written after it finishes tells a complete
    install from one still being unpacked."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        if in_ci():
            pytest.fail("node and npm are needed for the single sign-on tests")
        pytest.skip("node and npm are needed for the single sign-on tests")
    marker = FOLDER / "node_modules" / ".effectledger-installed"
    with open(FOLDER / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            installed = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=FOLDER,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert installed.returncode == 0, installed.stderr
            marker.write_text("installed from package-lock.json\n")
    return node


@contextmanager
def provider(
    redirect_uris: list[str], *, id_token_ttl: int = 3600, logged_out: list[str] | None = None
) -> Iterator[str]:
    """The OpenID provider on a free port of 127.0.0.1, with the desk (and another application)
    as clients; yields its issuer URL."""
    node = _node()
    config = {
        "clients": [
            {
                "client_id": client_id,
                "client_secret": SECRET,
                "redirect_uris": redirect_uris,
                "post_logout_redirect_uris": logged_out or [],
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "client_secret_basic",
            }
            for client_id in ("desk", "other-app")
        ],
        "accounts": ACCOUNTS,
        "idTokenTtl": id_token_ttl,
    }
    with tempfile.TemporaryFile("w+") as errors:
        process = subprocess.Popen(
            [node, str(FOLDER / "provider.mjs")],
            cwd=FOLDER,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
        try:
            assert process.stdin is not None
            assert process.stdout is not None
            process.stdin.write(json.dumps(config))
            process.stdin.close()
            line = process.stdout.readline()
            if not line:
                process.wait(10)
                errors.seek(0)
                raise AssertionError(f"the provider did not start: {errors.read()}")
            yield str(json.loads(line)["issuer"])
        finally:
            process.terminate()
            process.wait(10)
            if process.stdout is not None:
                process.stdout.close()


def settings(issuer: str, client_id: str = "desk", **options: Any) -> SsoSettings:
    """The desk's SSO settings for the provider at ``issuer``, serving tenant acme."""
    return SsoSettings(
        issuer=issuer,
        client_id=client_id,
        client_secret=SECRET,
        tenants=frozenset({"acme"}),
        scopes=("openid", "effectledger"),
        **options,
    )


def through_provider(
    start: str, account: str, desk: str, browser: httpx.Client | None = None
) -> str:
    """Sign ``account`` in at the provider from the authorization URL ``start`` (its login,
    then its consent page, in ``browser`` or a fresh one); the URL the provider sends the
    browser back to."""
    with contextlib.nullcontext(browser) if browser else httpx.Client(timeout=30) as browser:
        url = start
        for _ in range(16):
            if url.startswith(desk):
                return url
            page = browser.get(url)
            if page.status_code in (302, 303):
                url = urljoin(url, page.headers["location"])
                continue
            assert page.status_code == 200, page.text
            prompt = re.search(r'name="prompt" value="(\w+)"', page.text)
            action = re.search(r'<form[^>]*action="([^"]+)"', page.text)
            assert prompt is not None, page.text
            assert action is not None, page.text
            fields = {"prompt": prompt.group(1)}
            if prompt.group(1) == "login":
                fields |= {"login": account, "password": "any"}
            sent = browser.post(urljoin(url, action.group(1)), data=fields)
            assert sent.status_code in (302, 303), sent.text
            url = urljoin(url, sent.headers["location"])
    raise AssertionError("the provider never sent the browser back")


@dataclass
class Desk:
    """A desk served with single sign-on, over a fresh world, and its provider."""

    world: World
    base: str
    issuer: str
    sessions: Sessions


@contextmanager
def desk_with_sso(
    store_url: str,
    tmp_path: Path,
    *,
    as_localhost: bool = False,
    now: Any = None,
    **options: Any,
) -> Iterator[Desk]:
    """The refund world's desk with SSO at a provider that knows its callback: the desk's
    socket is bound first, so its address is known and no other process can take it."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    port = int(listening.getsockname()[1])
    with listening, fresh_world(store_url, tmp_path) as world:
        keys = ApiKeys(world.ledger.store)
        sessions = Sessions(keys)
        callback = f"http://127.0.0.1:{port}/desk/sso/callback"
        with provider(
            [callback],
            id_token_ttl=options.pop("id_token_ttl", 3600),
            logged_out=[f"http://127.0.0.1:{port}/desk/login"],
        ) as issuer:
            shown = issuer.replace("127.0.0.1", "localhost") if as_localhost else issuer
            configured = settings(shown, **options)
            login = OpenIdLogin(configured) if now is None else OpenIdLogin(configured, now=now)
            from effectledger.callers.desk.pages import create_desk

            app = create_app(world.app, keys, desk=False, secure_cookies=False)
            app.app.mount(
                "/desk",
                create_desk(world.app, keys, secure_cookies=False, sessions=sessions, sso=login),
            )
            with serving_on(app, listening) as base:
                yield Desk(world, base, issuer, sessions)


@contextmanager
def serving_on(app: Any, listening: socket.socket) -> Iterator[str]:
    """``serving`` on a socket bound beforehand (the provider must know the callback)."""
    import threading

    import uvicorn

    port = int(listening.getsockname()[1])
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive(), "the desk did not start"
        assert time.monotonic() < deadline, "the desk did not start in time"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def sign_in(desk: Desk, account: str, client: httpx.Client) -> httpx.Response:
    """The whole sign-in of ``account`` in the desk's browser ``client``; the callback's page."""
    started = client.get("/desk/sso")
    assert started.status_code == 303, started.text
    assert "effectledger_desk_sso" in started.headers["set-cookie"]
    back = through_provider(started.headers["location"], account, desk.base)
    return client.get(back)


def test_a_person_the_provider_vouches_for_gets_a_session_with_their_claims(
    store_url: str, tmp_path: Path
) -> None:
    """rita signs in through the provider: a session as rita of acme with the approver role,
    and the queue shows what waits for her."""
    with desk_with_sso(store_url, tmp_path) as desk:
        proposal = desk.world.app.propose(AGENT, "refund_order", REFUND_30)
        with httpx.Client(base_url=desk.base, timeout=30) as client:
            login = client.get("/desk/login")
            assert "Sign in with your identity provider" in login.text
            done = sign_in(desk, "rita", client)
            assert done.status_code == 200, done.text
            assert "Signed in as <strong>rita</strong> of <code>acme</code> (approver)" in done.text
            assert 'http-equiv="refresh"' in done.text
            queue = client.get("/desk/")
            assert queue.status_code == 200
            assert proposal.proposal_id in queue.text
        assert desk.sessions.count() == 1


@pytest.mark.parametrize(
    ("account", "reason", "said"),
    [
        ("gus", "sso_tenant_not_served", "names no tenant this desk serves"),
        ("nora", "sso_no_roles", "gives you no role on this desk"),
    ],
)
def test_a_person_outside_the_desks_tenants_or_without_a_role_is_refused(
    store_url: str, tmp_path: Path, account: str, reason: str, said: str
) -> None:
    """The provider vouches for them, but their claims give no tenant here or no role."""
    with (
        desk_with_sso(store_url, tmp_path) as desk,
        httpx.Client(base_url=desk.base, timeout=30) as client,
    ):
        done = sign_in(desk, account, client)
        assert done.status_code == 401
        assert said in done.text
        assert "effectledger_desk=" not in done.headers.get("set-cookie", "")
        assert client.get("/desk/", follow_redirects=False).status_code == 303
        assert desk.sessions.count() == 0
        assert reason.startswith("sso_")


def test_a_replayed_callback_or_one_from_another_browser_is_refused(
    store_url: str, tmp_path: Path
) -> None:
    """The same callback twice: the second is unknown; a callback in a browser that did not
    start the sign-in: refused before any code is exchanged."""
    with desk_with_sso(store_url, tmp_path) as desk:
        with httpx.Client(base_url=desk.base, timeout=30) as client:
            started = client.get("/desk/sso")
            back = through_provider(started.headers["location"], "rita", desk.base)
            with httpx.Client(base_url=desk.base, timeout=30) as elsewhere:
                other = elsewhere.get(back)
                assert other.status_code == 401
                assert "did not start in this browser" in other.text
            first = client.get(back)
            assert first.status_code == 200
        with httpx.Client(base_url=desk.base, timeout=30) as replaying:
            replaying.cookies.set(
                "effectledger_desk_sso", parse_qs(urlsplit(back).query)["state"][0], path="/desk"
            )
            again = replaying.get(back)
            assert again.status_code == 401
            assert "unknown, used already or too old" in again.text
        assert desk.sessions.count() == 1


def test_an_expired_id_token_is_refused(store_url: str, tmp_path: Path) -> None:
    """The desk's clock two hours on: the provider's ID token (one hour) has expired when the
    desk checks it, and nothing is signed in."""
    with (
        desk_with_sso(store_url, tmp_path, now=lambda: time.time() + 7200, leeway_s=0) as desk,
        httpx.Client(base_url=desk.base, timeout=30) as client,
    ):
        done = sign_in(desk, "rita", client)
        assert done.status_code == 401
        assert "the ID token has expired" in done.text
        assert desk.sessions.count() == 0


def test_a_provider_naming_another_issuer_is_refused(store_url: str, tmp_path: Path) -> None:
    """Configured as localhost, the provider calls itself 127.0.0.1: no sign-in starts."""
    with (
        desk_with_sso(store_url, tmp_path, as_localhost=True) as desk,
        httpx.Client(base_url=desk.base, timeout=30) as client,
    ):
        started = client.get("/desk/sso")
        assert started.status_code == 401
        assert "names its issuer" in started.text
        assert "SSO issuer" in started.text
        assert desk.sessions.count() == 0


def test_an_id_token_issued_to_another_client_is_refused(store_url: str, tmp_path: Path) -> None:
    """A genuine ID token the provider issued to another application is not the desk's."""
    with desk_with_sso(store_url, tmp_path) as desk:
        callback = f"{desk.base}/desk/sso/callback"
        other = OpenIdLogin(settings(desk.issuer, client_id="other-app"))
        url, state = other.start(callback)
        back = through_provider(url, "rita", desk.base)
        code = parse_qs(urlsplit(back).query)["code"][0]
        pending = other._pending[state]
        id_token = other._exchange(code, pending)
        ours = OpenIdLogin(settings(desk.issuer))
        with pytest.raises(NotAuthenticated) as refused:
            ours._claims(id_token, pending)
        assert refused.value.details["reason"] == "sso_aud_mismatch"
        assert other._claims(id_token, pending)["sub"] == "rita"  # genuine for its client


def test_settings_refuse_a_plain_http_issuer_off_loopback_and_keep_the_secret_out_of_repr() -> None:
    """An http issuer elsewhere than loopback, no tenants: refused; the secret is never shown."""
    from effectledger.errors import InvalidInput

    with pytest.raises(InvalidInput):
        settings("http://idp.example")
    with pytest.raises(InvalidInput):
        SsoSettings(
            issuer="https://idp.example",
            client_id="desk",
            client_secret=SECRET,
            tenants=frozenset(),
        )
    assert SECRET not in repr(settings("https://idp.example"))


def test_serve_takes_single_sign_on_from_the_configuration(tmp_path: Path) -> None:
    """[desk] in the TOML file and the secret from the environment make the settings; an issuer
    without a secret or tenants is refused naming what is missing; the secret is never shown."""
    from effectledger.app.config import load_config
    from effectledger.cli.http_api import sso_settings
    from effectledger.errors import InvalidInput

    toml = tmp_path / "effectledger.toml"
    toml.write_text(
        '[desk]\nsso_issuer = "https://idp.example"\nsso_client_id = "desk"\n'
        'sso_tenants = ["acme"]\nsso_roles_claim = "groups"\n'
    )
    with pytest.raises(InvalidInput, match="sso_client_secret"):
        sso_settings(load_config(toml, environ={}))
    made = sso_settings(load_config(toml, environ={"EFFECTLEDGER_SSO_CLIENT_SECRET": SECRET}))
    assert made is not None
    assert (made.issuer, made.client_id, made.tenants, made.roles_claim) == (
        "https://idp.example",
        "desk",
        frozenset({"acme"}),
        "groups",
    )
    assert SECRET not in repr(made)
    assert sso_settings(load_config(None, environ={})) is None
    toml.write_text('[desk]\nsso_client_secret = "in the file"\n')
    with pytest.raises(InvalidInput, match="has no setting"):
        load_config(toml, environ={})


@pytest.mark.slow
def test_a_person_signs_in_through_the_provider_in_chromium(
    store_url: str, tmp_path: Path, page: Any
) -> None:
    """In Chromium: the login page's sign-in button, the provider's login and consent pages,
    then the queue with refunds in three currencies; a person of another tenant is turned back
    with the reason. axe finds nothing serious on the desk's pages."""
    from tests.desk.support import serious_violations, shot

    with desk_with_sso(store_url, tmp_path) as desk:
        for order, minor, currency in (
            ("ord-8001", 700, "GBP"),
            ("ord-8002", 1000, "JPY"),
            ("ord-8003", 1250, "EUR"),
        ):
            desk.world.app.propose(
                AGENT,
                "refund_order",
                {**REFUND_30, "order_id": order, "amount_minor": minor, "currency": currency},
            )
        page.goto(f"{desk.base}/desk/login")
        assert serious_violations(page) == []
        page.get_by_role("link", name="Sign in with your identity provider").click()
        page.locator("input[name=login]").fill("rita")
        page.locator("input[name=password]").fill("any")
        page.locator("button[type=submit]").click()
        page.get_by_role("button", name="Continue").click()
        page.wait_for_url(f"{desk.base}/desk/")
        assert page.get_by_role("heading", name="Waiting for your decision").is_visible()
        body = page.locator("main").inner_text()
        for order in ("ord-8001", "ord-8002", "ord-8003"):
            assert order in body
        assert serious_violations(page) == []
        shot(page, "sso-queue")
        page.context.clear_cookies()
        page.goto(f"{desk.base}/desk/login")
        page.get_by_role("link", name="Sign in with your identity provider").click()
        page.locator("input[name=login]").fill("gus")
        page.locator("input[name=password]").fill("any")
        page.locator("button[type=submit]").click()
        page.get_by_role("button", name="Continue").click()
        page.wait_for_url(f"{desk.base}/desk/sso/callback*")
        assert "names no tenant this desk serves" in page.locator("[role=alert]").inner_text()
        assert serious_violations(page) == []
        page.goto(f"{desk.base}/desk/")
        page.wait_for_url(f"{desk.base}/desk/login")
    assert desk.sessions.count() == 1


def test_a_role_map_turns_provider_groups_into_ledger_roles(tmp_path: Path) -> None:
    """With a map, groups the map names become roles (spaces and all), others grant nothing;
    a person whose groups map to none is refused. The map comes from [desk] too."""
    from effectledger.app.config import load_config
    from effectledger.cli.http_api import sso_settings

    mapped = settings(
        "https://idp.example", roles_claim="groups", role_map={"Refund Approvers": "approver"}
    )
    login = OpenIdLogin(mapped)
    person = login._context(
        {"sub": "rita", "tenant": "acme", "groups": ["Refund Approvers", "Everyone"]}
    )
    assert person.roles == frozenset({"approver"})
    assert login._context({"sub": "rita", "tenant": "acme", "groups": "Refund Approvers"}).roles
    with pytest.raises(NotAuthenticated) as refused:
        login._context({"sub": "sam", "tenant": "acme", "groups": ["Everyone"]})
    assert refused.value.details["reason"] == "sso_no_roles"
    toml = tmp_path / "effectledger.toml"
    toml.write_text(
        '[desk]\nsso_issuer = "https://idp.example"\nsso_client_id = "desk"\n'
        'sso_tenants = ["acme"]\n[desk.sso_role_map]\n"Refund Approvers" = "approver"\n'
    )
    env = {"EFFECTLEDGER_SSO_CLIENT_SECRET": SECRET}
    from_file = sso_settings(load_config(toml, environ=env))
    assert from_file is not None
    assert from_file.role_map == {"Refund Approvers": "approver"}
    made = sso_settings(
        load_config(
            None,
            environ={
                **env,
                "EFFECTLEDGER_SSO_ISSUER": "https://idp.example",
                "EFFECTLEDGER_SSO_CLIENT_ID": "desk",
                "EFFECTLEDGER_SSO_TENANTS": "acme",
                "EFFECTLEDGER_SSO_ROLE_MAP": "Refund Approvers=approver",
            },
        )
    )
    assert made is not None
    assert made.role_map == {"Refund Approvers": "approver"}


def test_signing_out_ends_the_providers_session_too(store_url: str, tmp_path: Path) -> None:
    """rita signs out of the desk: her session is gone at once, the desk sends her browser to
    the provider's end-session endpoint with her ID token as the hint, the provider ends its
    session and sends her back to the desk's login; a new sign-in then asks her to log in at
    the provider again (before, the provider's session let her through without a login)."""
    with desk_with_sso(store_url, tmp_path) as desk, httpx.Client(timeout=30) as browser:

        def prompts() -> list[str]:
            """The provider's prompts a sign-in in ``browser`` meets, and signs in."""
            seen: list[str] = []
            url = browser.get(f"{desk.base}/desk/sso").headers["location"]
            for _ in range(16):
                if url.startswith(desk.base):
                    assert browser.get(url).status_code == 200
                    return seen
                page = browser.get(url)
                if page.status_code in (302, 303):
                    url = urljoin(url, page.headers["location"])
                    continue
                prompt = re.search(r'name="prompt" value="(\w+)"', page.text)
                action = re.search(r'<form[^>]*action="([^"]+)"', page.text)
                assert prompt is not None, page.text
                assert action is not None, page.text
                seen.append(prompt.group(1))
                fields = {"prompt": prompt.group(1), "login": "rita", "password": "any"}
                url = urljoin(url, browser.post(urljoin(url, action.group(1)), data=fields)
                              .headers["location"])  # fmt: skip
            raise AssertionError("the provider never sent the browser back")

        assert "login" in prompts()
        assert "login" not in prompts()  # the provider's session stands: no login asked
        queue = browser.get(f"{desk.base}/desk/")
        csrf = re.search(r'name="csrf" value="([^"]+)"', queue.text)
        assert csrf is not None
        assert desk.sessions.count() == 2
        out = browser.post(f"{desk.base}/desk/logout", data={"csrf": csrf.group(1)})
        assert out.status_code == 200, out.text
        assert desk.sessions.count() == 1  # this browser's latest session, ended at once
        found = re.search(r'http-equiv="refresh" content="0;url=([^"]+)"', out.text)
        assert found is not None
        end = html.unescape(found.group(1))
        assert end.startswith(f"{desk.issuer}/session/end?")
        query = parse_qs(urlsplit(end).query)
        assert query["post_logout_redirect_uri"] == [f"{desk.base}/desk/login"]
        assert query["id_token_hint"][0].count(".") == 2  # a JWT, in the URL only
        confirm = browser.get(end)
        assert confirm.status_code == 200, confirm.text
        action = re.search(r'<form[^>]*action="([^"]+)"', confirm.text)
        xsrf = re.search(r'name="xsrf" value="([^"]+)"', confirm.text)
        assert action is not None
        assert xsrf is not None
        done = browser.post(
            urljoin(end, action.group(1)), data={"xsrf": xsrf.group(1), "logout": "yes"}
        )
        assert done.status_code in (302, 303), done.text
        assert done.headers["location"].startswith(f"{desk.base}/desk/login")
        assert "login" in prompts()  # the provider forgot her: it asks again
