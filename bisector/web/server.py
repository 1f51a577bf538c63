"""``bisect serve``: a read-only web view over the store (SQLite or PostgreSQL).

Starlette routes the few GET pages and JSON endpoints, Jinja2 renders them (through
:mod:`bisector.app.report.html`, the same templates as the one-file report) and uvicorn serves
them. Every route reads through :mod:`bisector.app`, the same functions as ``bisect
list/show/log --json``, so the JSON endpoints mirror the CLI by construction. There is no write
endpoint: other methods get 405. Every response carries a Content-Security-Policy that allows no
outside resource, and full logs are served as ``text/plain`` with ``nosniff``, so an oracle's
output can never run as a page. What it serves is redacted and printable
(:mod:`bisector.base.escape`): the views are, and a full log is filtered here on its way out."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bisector.app import commit_view, queries
from bisector.app.report import html as html_report
from bisector.app.report import views
from bisector.app.watch import table as watch_table
from bisector.base import defaults, escape
from bisector.base.errors import NotFoundError, StoreError, UsageError
from bisector.base.kinds import State
from bisector.base.paths import cache_dir, logs_dir
from bisector.store.db import Store
from bisector.store.queries import Filters

LOG_LIMIT = 2 * 2**20  # the last 2 MiB of a log: enough for any traceback, bounded for a page
LIST_LIMIT = 200
STREAMS = ("stdout", "stderr", "build")
CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
       "img-src data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
       "base-uri 'none'")


class SecurityHeaders:
    """Adds the same protective headers to every response (pages, JSON, logs, errors)."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(b"content-security-policy", CSP.encode()),
                            (b"x-content-type-options", b"nosniff"),
                            (b"referrer-policy", b"no-referrer"),
                            (b"x-frame-options", b"DENY")]
                message["headers"] = headers
            await send(message)

        await self.inner(scope, receive, send_with_headers)


def _filter(request: Request, limit: int = LIST_LIMIT) -> Filters:
    """The list's filters from the URL's query, read as `bisect list` reads its options (a bad
    value: 400 and one line naming it)."""
    q = request.query_params
    return queries.parse(q, _whole(q.get("limit"), "limit", limit),
                         _whole(q.get("offset"), "offset", 0), dash="")


def _whole(value: str | None, name: str, default: int) -> int:
    try:
        return default if value in (None, "") else int(str(value))
    except ValueError:
        raise UsageError(f"{name} {value!r}: not a whole number") from None


def _next_page(request: Request, where: Filters, shown: int) -> str | None:
    """The URL of the next page, or None when this one was not full."""
    if shown < where.limit:
        return None
    return str(request.url.include_query_params(offset=where.offset + where.limit,
                                                limit=where.limit))


def _id(request: Request) -> int:
    """The path's bisection id; one no store can hold (past PostgreSQL's INTEGER: a 500 from
    the database) is not found, as an unknown one is."""
    value = int(request.path_params["bisection_id"])
    if not 1 <= value <= defaults.MAX_ID:
        raise NotFoundError(f"no bisection with id {value}: ids go from 1 to {defaults.MAX_ID}")
    return value


def _tail(path: Path) -> str:
    with path.open("rb") as f:
        size = f.seek(0, 2)
        f.seek(max(0, size - LOG_LIMIT))
        return f.read().decode("utf-8", "replace")


def _readable_log(path: Path) -> bool:
    """A file inside bisector's log or cache folders (run logs, build logs), links resolved."""
    try:
        real = path.resolve(strict=True)
    except OSError:
        return False
    roots = [logs_dir().resolve(), cache_dir().resolve()]
    return real.is_file() and any(real.is_relative_to(root) for root in roots)


def _log_source(probe: dict[str, Any], stream: str) -> Path | str | None:
    """Where a probe's log is served from: the file the store recorded for this very probe,
    when it lies inside this machine's log folders (anyone who can write the store must not be
    able to read other files); else the stored tail (stdout and build only); else nothing."""
    recorded = probe.get({"stdout": "stdout", "stderr": "stderr", "build": "build_log"}[stream])
    if recorded and _readable_log(Path(recorded)):
        return Path(recorded)
    fallback = probe.get("build_log_tail" if stream == "build" else "output_tail") or ""
    return fallback if stream != "stderr" and fallback else None


LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


# Above ruff's limits on purpose: the app's routes are closures over the store, declared in one
# place.
def create_app(store: Store, allowed_hosts: Sequence[str] | None = None) -> Starlette:  # noqa: C901
    """The ASGI application over one store (tests call it directly with a test client).

    ``allowed_hosts`` checks the Host header: bound to loopback, only loopback names pass,
    so a web page that rebinds its own domain to 127.0.0.1 cannot read the store."""

    def index(request: Request) -> Response:
        where = _filter(request)
        rows = views.listing(store, where)
        choices = {"oracle": views.oracle_names(store), "state": [s.value for s in State]}
        query = {k: request.query_params.get(k, "") for k in queries.FIELDS}
        return HTMLResponse(html_report.render_list(rows, query, choices,
                                                    _next_page(request, where, len(rows))))

    def page(request: Request) -> Response:
        i = _id(request)
        d = views.show(store, i)
        for p in d["probes"]:  # link only the logs that are there to serve: no link to a 404
            p["served_logs"] = [s for s in STREAMS if _log_source(p, s) is not None]
        return HTMLResponse(html_report.render_page(d, views.issue_report(store, i, d),
                                                    views.series_picture(store, i)))

    def issue_md(request: Request) -> Response:
        return PlainTextResponse(views.issue_report(store, _id(request)),
                                 media_type="text/markdown; charset=utf-8")

    def report_file(request: Request) -> Response:
        i = _id(request)
        return HTMLResponse(views.html_report(store, i), headers={
            "content-disposition": f'attachment; filename="bisection-{i}.html"'})

    def probe_log(request: Request) -> Response:
        i, seq, stream = _id(request), int(request.path_params["seq"]), \
            request.path_params["stream"]
        if stream not in STREAMS:
            return PlainTextResponse(f"no log named {stream!r}: use one of {', '.join(STREAMS)}",
                                     status_code=404)
        probe = next((p for p in views.show(store, i)["probes"] if p["seq"] == seq), None)
        if probe is None:
            return PlainTextResponse(f"bisection {i} has no probe {seq}", status_code=404)
        source = _log_source(probe, stream)
        if isinstance(source, Path):
            return PlainTextResponse(escape.safe_text(_tail(source)))
        removed = {"build": "build_log"}.get(stream, stream) in probe.get("removed_logs", ())
        if source is None:
            return PlainTextResponse(f"probe {seq} has no {stream} log on this machine"
                                     + (" (log removed by gc)" if removed else ""),
                                     status_code=404)
        where = "log removed by gc" if removed else "the full log is not on this machine"
        return PlainTextResponse(f"({where}; the stored tail)\n{source}")

    def api_list(request: Request) -> Response:
        """`bisect list --json`'s rows for the same filters; a full page links the next one
        (``Link: <...>; rel="next"``), so the body stays the CLI's."""
        where = _filter(request)
        rows = views.listing(store, where)
        following = _next_page(request, where, len(rows))
        return JSONResponse(rows, headers={"link": f'<{following}>; rel="next"'}
                            if following else None)

    def commit_page(request: Request) -> Response:
        d = commit_view.commit_data(store, request.path_params["ref"])
        return HTMLResponse(html_report.render_commit(d))

    def api_commit(request: Request) -> Response:
        return JSONResponse(commit_view.commit_data(store, request.path_params["ref"]))

    def api_show(request: Request) -> Response:
        return JSONResponse(_jsonable(views.show(store, _id(request))))

    def api_state(request: Request) -> Response:
        return JSONResponse(views.progress(store, _id(request)))

    def api_log(request: Request) -> Response:
        return JSONResponse(views.log_data(store, _id(request)))

    def watch_page(request: Request) -> Response:
        return HTMLResponse(html_report.render_watch(watch_table.table_data(store)))

    def api_watch(request: Request) -> Response:
        return JSONResponse(watch_table.table_data(store))

    async def not_found(request: Request, exc: Exception) -> Response:
        return PlainTextResponse(str(getattr(exc, "message", exc)), status_code=404)

    async def bad_request(request: Request, exc: Exception) -> Response:
        return PlainTextResponse(str(getattr(exc, "message", exc)), status_code=400)

    async def store_failed(request: Request, exc: Exception) -> Response:
        """A damaged store, or one on a full disk, is one line saying so (503: the server is
        fine, its store is not), never a bare 500: the store says it as its own error
        (``Store.session``, ``store/trouble.py``), whatever database it is."""
        return PlainTextResponse(str(getattr(exc, "message", exc)), status_code=503)

    routes = [
        Route("/", index), Route("/bisections/{bisection_id:int}", page),
        Route("/bisections/{bisection_id:int}/report.md", issue_md),
        Route("/bisections/{bisection_id:int}/report.html", report_file),
        Route("/bisections/{bisection_id:int}/probes/{seq:int}/{stream}", probe_log),
        Route("/api/bisections", api_list), Route("/api/bisections/{bisection_id:int}", api_show),
        Route("/api/bisections/{bisection_id:int}/log", api_log),
        Route("/api/bisections/{bisection_id:int}/state", api_state),
        Route("/watch", watch_page), Route("/api/watch", api_watch),
        Route("/commits/{ref}", commit_page), Route("/api/commits/{ref}", api_commit),
    ]
    middleware = [Middleware(SecurityHeaders)]
    if allowed_hosts is not None:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)))
    return Starlette(routes=routes, middleware=middleware,
                     exception_handlers={NotFoundError: not_found, UsageError: bad_request,
                                         StoreError: store_failed})


def _jsonable(d: dict[str, Any]) -> Any:
    """``show --json`` prints with ``default=str``; the endpoint gives the very same values."""
    import json

    return json.loads(json.dumps(d, default=str))


def bound_names(host: str) -> list[str]:
    """The Host headers a server bound to ``host`` answers: loopback's names on loopback, the
    address itself (and the machine's names when that is every interface), so a page whose
    domain a DNS rebinding points at this server is refused whatever it bound to."""
    import socket

    if host in LOOPBACK:
        return list(LOOPBACK)
    names = {host}
    if host in ("0.0.0.0", "::", ""):
        names |= {socket.gethostname(), socket.getfqdn(), *LOOPBACK}
        with contextlib.suppress(OSError):
            names |= {str(a[4][0]) for a in socket.getaddrinfo(socket.gethostname(), None)}
    return sorted(n for n in names if n)


def check_bind(host: str, port: int) -> None:
    """One line before anything is served: a host that does not resolve, or a port in use."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise UsageError(f"--host {host}: cannot be resolved ({e.strerror or e}): give an "
                         f"address of this machine, e.g. 127.0.0.1") from None
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
        except OSError as e:
            raise UsageError(f"--host {host} --port {port}: cannot listen there "
                             f"({e.strerror or e}): pick another --port, or stop what uses "
                             f"it") from None


def serve(store: Store, host: str, port: int) -> None:
    import uvicorn

    uvicorn.run(create_app(store, bound_names(host)), host=host, port=port,
                log_level="warning", server_header=False)
