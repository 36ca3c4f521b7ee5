"""The HTTP port: routes over ``server.http.lookups``, errors as JSON, access control, exports.

aiohttp serves it, on the event loop the remoting and gRPC ports run on (``server.app`` starts it):
it is asyncio-native (no second loop or thread, unlike a WSGI server), its ``AppRunner``/``TCPSite``
bind a port inside a running loop the way ``loop.create_server`` does, it streams responses (body
downloads, exports) and bounds request lines and headers itself, and it is one well-kept dependency
(starlette would need uvicorn besides, whose server wants to own the loop and the signals).

Every route is listed in ``ROUTES`` with its method and parameters, which is what ``/openapi.json``
is built from (``server.http.openapi``), so the description cannot name a route the app does not
serve (``tests/server/http`` compares the two). Every request is bounded: counts by ``MAX_LIMIT``,
key queries by the query pool's budget, time-range listings by pages. Every route but one is a GET:
the API is read-only unless the server is ``--writable``, and then the one POST resends a stored
message (``server.http.resend``: a producer's SEND of it, through the remoting port's processor).
A POST must be JSON (``Content-Type: application/json``) and carry this server's token
(``server.http.csrf``): a form or script of another site cannot make one (cross-site request
forgery with the credentials a browser keeps for this server). Every request must name this server
in its ``Host`` header (``server.http.host_check``), else it is answered 421: a page of another site
cannot read the API through a name it rebinds to this server's address (DNS rebinding).

With ``--acl``, every route but the page (``/`` and its static files) needs HTTP basic credentials
of an account of ``plain_acl.yml`` (access key : secret key), unless the peer is whitelisted as
the remoting side would let it in; the topics a route reads need SUB or GET on them (a group's offsets: on its
``%RETRY%`` topic), as QUERY_MESSAGE does; records of other topics are left out of id lookups. A
resend needs PUB on the topic the copy goes to, as a SEND does, besides reading the message.
``/metrics`` names every topic and group of the store with their offsets, so under ``--acl`` it
needs an admin account (``admin: true``) or a whitelisted peer (``globalWhiteRemoteAddresses``, or
an account's ``whiteRemoteAddress``): a Prometheus scrapes it with basic auth or from an address
allowed explicitly, and an account limited to some topics does not learn of the others there.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import bisect
import csv
import hmac
import io
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from protocol.errors import JsonBodyError
from protocol.json_body import decode_json_body
from protocol.message import MessageExt
from server.acl.config import GET, PUB, SUB, Account, AclConfig, check_permission
from server.acl.validator import DeniedError, check_resources
from server.burst_log import BurstLog
from server.faults import FaultControl, Faults, FaultSpecError
from server.http.csrf import HEADER as CSRF_HEADER
from server.http.csrf import CsrfToken
from server.http.errors import ApiError, bad_parameter, not_found
from server.http.groups import DLQ_PREFIX, RETRY_PREFIX, OffsetSource, group_json, group_names
from server.http.host_check import AllowedHosts
from server.http.lookups import MAX_BUCKETS, MAX_KEY_RESULTS, Lookups, Page, message_json, parse_cursor
from server.http.metrics import Families, HttpStats, StoreCollector
from server.http.openapi import openapi_document
from server.http.resend import Resender, default_target
from server.http.trace import TRACE_TOPIC
from server.port_errors import PortUnusableError
from server.store_api import ConsumeQueueStore, StoreError

log = logging.getLogger(__name__)

#: Largest ``limit`` of a listing (messages per page or per export).
MAX_LIMIT = 1000
#: Topics or groups of a page computed between two yields of the event loop (issue 30: a page of
#: 1,000 groups held it ~100 ms).
PAGE_SLICE = 50
DEFAULT_LIMIT = 50
#: Records read by one queue + offset request.
MAX_COUNT = 100
#: Permission that lets an account read a topic here: SUB, or ACL 2.0's GET (lookups only).
READ = SUB | GET
#: Realm of the basic-auth challenge.
REALM = "rmq-query"
#: Columns of a CSV export (the JSON fields of the same names).
CSV_COLUMNS = (
    "offsetMsgId",
    "msgId",
    "uniqueKey",
    "topic",
    "queueId",
    "queueOffset",
    "commitLogOffset",
    "storeTimestamp",
    "bornTimestamp",
    "bornHost",
    "storeHost",
    "tags",
    "keys",
    "reconsumeTimes",
    "bodyLength",
    "bodyText",
)
FORMATS = ("json", "jsonl", "csv")

#: The lookup page's files (``server/http/static``, package data): plain HTML, CSS and JavaScript,
#: nothing fetched from elsewhere, so the page works on a machine with no internet access.
STATIC_DIR = resources.files("server.http") / "static"
#: Routes served without credentials under ``--acl``: the page, its files and the CSRF token hold no
#: data (every request the page makes for data asks for them).
PUBLIC_ROUTES = frozenset({"/", "/static/{name}", "/api/csrf-token"})
STATIC_TYPES = {".html": "text/html", ".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}


@dataclass(frozen=True, slots=True)
class Param:
    """A query or path parameter, for the OpenAPI description."""

    name: str
    where: str  # "path" or "query"
    kind: str  # "string" or "integer"
    description: str
    required: bool = False


@dataclass(frozen=True, slots=True)
class Route:
    path: str
    handler_name: str
    summary: str
    params: tuple[Param, ...] = ()
    #: Response media types besides JSON.
    produces: tuple[str, ...] = ("application/json",)
    errors: tuple[int, ...] = (400, 404, 503)
    tags: tuple[str, ...] = field(default=("api",))
    method: str = "GET"
    #: For a POST: the JSON body's fields (name, type, description), all optional.
    body: tuple[tuple[str, str, str], ...] = ()
    #: The status of a success.
    ok_status: int = 200


_LIMIT = Param("limit", "query", "integer", f"messages per page (1-{MAX_LIMIT}, default {DEFAULT_LIMIT})")
_FORMAT = Param("format", "query", "string", "json (default), jsonl or csv: the result as an export file")
_BEGIN = Param("begin", "query", "string", "earliest store time: epoch milliseconds or ISO-8601")
_END = Param("end", "query", "string", "latest store time: epoch milliseconds or ISO-8601")
_CURSOR = Param("cursor", "query", "string", "where the page starts: nextCursor of the previous page")
_TOPIC = Param("topic", "path", "string", "topic name", True)
_ID = Param("id", "path", "string", "offset message id (32 or 56 hex digits) or unique key (UNIQ_KEY)", True)
_PAGE_LIMIT = Param("limit", "query", "integer", f"names per page (1-{MAX_LIMIT}, default {MAX_LIMIT})")
_AFTER = Param("after", "query", "string", "the page starts after this name: nextAfter of the previous page")
_EXPORTS = ("application/json", "application/x-ndjson", "text/csv")
_BROKER = Param("brokerName", "path", "string", "broker name (broker-a, broker-b, ...)", True)

ROUTES: tuple[Route, ...] = (
    Route("/", "index", "the lookup page", produces=("text/html",), errors=(), tags=("page",)),
    Route(
        "/static/{name}",
        "static",
        "the lookup page's scripts and styles",
        (Param("name", "path", "string", "file name", True),),
        produces=("text/css", "text/javascript"),
        errors=(404,),
        tags=("page",),
    ),
    Route("/openapi.json", "openapi", "this description", errors=(), tags=("meta",)),
    Route(
        "/api/csrf-token",
        "csrf_token",
        f"the token a POST must send in the {CSRF_HEADER} header (cross-site request forgery)",
        errors=(),
        tags=("meta",),
    ),
    Route(
        "/metrics",
        "metrics",
        "Prometheus metrics (under --acl: an admin account or a whitelisted address)",
        produces=("text/plain",),
        errors=(401, 403, 503),
        tags=("meta",),
    ),
    Route(
        "/api/topics",
        "topics",
        "topics by name with per-queue min/max offsets and last store time, paged by name",
        (_PAGE_LIMIT, _AFTER),
        errors=(400, 503),
    ),
    Route(
        "/api/topics/{topic}",
        "topic",
        "one topic with per-queue min/max offsets and last store time",
        (_TOPIC,),
    ),
    Route(
        "/api/topics/{topic}/messages",
        "topic_messages",
        "messages of a topic by key (key given: index query) or by store time range (paged by cursor)",
        (
            _TOPIC,
            Param(
                "key", "query", "string", "message key or unique key; without it begin and end are required"
            ),
            _BEGIN,
            _END,
            _LIMIT,
            _CURSOR,
            _FORMAT,
        ),
        _EXPORTS,
    ),
    Route(
        "/api/topics/{topic}/histogram",
        "topic_histogram",
        "messages of a topic per bucket of whole minutes (exact counts from queue offsets; bounded work)",
        (
            _TOPIC,
            Param("begin", "query", "string", "earliest store time (default: the topic's first message)"),
            Param("end", "query", "string", "latest store time (default: the topic's last message)"),
            Param("buckets", "query", "integer", f"most buckets (1-{MAX_BUCKETS}, default 120)"),
        ),
    ),
    Route(
        "/api/topics/{topic}/queues/{queueId}/messages",
        "queue_messages",
        "messages of one queue from a queue offset",
        (
            _TOPIC,
            Param("queueId", "path", "integer", "queue id", True),
            Param("offset", "query", "integer", "queue offset", True),
            Param("count", "query", "integer", f"messages to read (1-{MAX_COUNT}, default 1)"),
            _FORMAT,
        ),
        _EXPORTS,
    ),
    Route(
        "/api/messages/{id}",
        "message",
        "a message by offset id or unique key, with every copy (retries, dead letters) of its unique key",
        (_ID, _FORMAT),
        _EXPORTS,
    ),
    Route(
        "/api/messages/{id}/body",
        "message_body",
        "a message's body as a file (the record the offset id names, else the first copy of the unique key)",
        (_ID,),
        ("application/octet-stream",),
    ),
    Route(
        "/api/messages/{id}/trace",
        "message_trace",
        "the message's trace (Pub, SubBefore, SubAfter, EndTransaction) from the trace topic",
        (_ID, Param("traceTopic", "query", "string", f"trace topic (default {TRACE_TOPIC})")),
    ),
    Route(
        "/api/groups",
        "groups",
        "consumer groups with per-queue committed offsets and diffs, paged by name",
        (_PAGE_LIMIT, _AFTER),
        errors=(400, 503),
    ),
    Route(
        "/api/groups/{group}",
        "group",
        "one consumer group with per-queue committed offsets and diffs",
        (Param("group", "path", "string", "consumer group", True),),
    ),
    Route(
        "/api/groups/{group}/dlq",
        "group_dlq",
        "the group's dead-letter messages (%DLQ%group), paged by cursor",
        (Param("group", "path", "string", "consumer group", True), _LIMIT, _CURSOR, _FORMAT),
        _EXPORTS,
    ),
    Route(
        "/api/messages/{id}/resend",
        "message_resend",
        "send a copy of the message (a new message id) as a producer's SEND of it would: only under "
        "--writable (405 otherwise), with PUB on the target topic under --acl",
        (_ID,),
        errors=(400, 403, 404, 405, 409, 415, 503),
        method="POST",
        ok_status=201,
        body=(
            (
                "topic",
                "string",
                "where the copy goes (default: the topic the message was meant for: a retry or "
                "dead letter's RETRY_TOPIC, a scheduled message's REAL_TOPIC, else its own topic)",
            ),
        ),
    ),
    Route(
        "/api/brokers/{brokerName}/faults",
        "broker_faults",
        "the faults in force on one broker of a cluster (serve --writable --brokers N)",
        (_BROKER,),
        errors=(404,),
        tags=("cluster",),
    ),
    Route(
        "/api/brokers/{brokerName}/faults",
        "broker_faults_set",
        "put faults in force on one broker: the body is the whole state (a field left out is off)",
        (_BROKER,),
        errors=(400, 404, 415, 503),
        tags=("cluster",),
        method="POST",
        body=(
            (
                "down",
                "boolean",
                "stop listening, reset its connections, drop its routes from the name server",
            ),
            ("busy", "number", "fraction (0-1) of SENDs and pulls answered SYSTEM_BUSY (code 2)"),
            ("delayMs", "integer", "every answer delayed this long (0-60000 ms)"),
            ("drop", "number", "fraction (0-1) of requests whose connection is reset instead"),
        ),
    ),
    Route(
        "/api/brokers/{brokerName}/faults",
        "broker_faults_clear",
        "clear every fault on one broker (a broker down listens again and registers again)",
        (_BROKER,),
        errors=(404, 503),
        tags=("cluster",),
        method="DELETE",
    ),
)


def int_param(request: web.Request, name: str, default: int | None, low: int, high: int) -> int:
    """An integer query parameter within [low, high]; 400 naming it otherwise."""
    text = request.query.get(name)
    if text is None or text == "":
        if default is None:
            raise bad_parameter(name, "required")
        return default
    try:
        value = int(text)
    except ValueError:
        raise bad_parameter(name, f"not an integer: {text[:40]!r}") from None
    if not low <= value <= high:
        raise bad_parameter(name, f"must be between {low} and {high}, got {value}")
    return value


def path_int(request: web.Request, name: str) -> int:
    text = request.match_info[name]
    try:
        value = int(text)
    except ValueError:
        raise bad_parameter(name, f"not an integer: {text[:40]!r}") from None
    if value < 0:
        raise bad_parameter(name, "must not be negative")
    return value


def time_param(request: web.Request, name: str, default: int | None) -> int:
    """Epoch milliseconds, or an ISO-8601 date-time (no zone: UTC)."""
    text = request.query.get(name)
    if text is None or text == "":
        if default is None:
            raise bad_parameter(name, "required (epoch milliseconds or ISO-8601)")
        return default
    if text.lstrip("-").isascii() and text.lstrip("-").isdigit():
        if len(text) > 20:  # int() of thousands of digits is refused (and slow): out of range anyway
            raise bad_parameter(name, "out of range")
        value = int(text)
    else:
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise bad_parameter(name, f"neither epoch milliseconds nor ISO-8601: {text[:40]!r}") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        value = int(moment.timestamp() * 1000)
    if not 0 <= value < 2**63:
        raise bad_parameter(name, "out of range")
    return value


def _name_page(
    request: web.Request, names: Sequence[str], allowed: Callable[[str], bool]
) -> tuple[list[str], str | None]:
    """One page of the sorted ``names`` after ``after`` (``limit`` of them that ``allowed``); and the
    next page's ``after``. Found by bisection: a page costs what it returns, not a pass over every
    name (issue 30: 50,000 topics or groups)."""
    limit = int_param(request, "limit", MAX_LIMIT, 1, MAX_LIMIT)
    after = request.query.get("after", "")
    page: list[str] = []
    for i in range(bisect.bisect_right(names, after), len(names)):
        name = names[i]
        if allowed(name):
            page.append(name)
            if len(page) > limit:
                break
    return page[:limit], (page[limit - 1] if len(page) > limit else None)


def format_param(request: web.Request) -> str:
    fmt = request.query.get("format", "json")
    if fmt not in FORMATS:
        raise bad_parameter("format", f"one of {', '.join(FORMATS)}, got {fmt[:20]!r}")
    return fmt


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        text=json.dumps(body, ensure_ascii=False, separators=(",", ":")),
        status=status,
        content_type="application/json",
    )


def export_response(
    rows: list[dict[str, Any]], fmt: str, name: str, envelope: dict[str, Any]
) -> web.Response:
    """The messages as JSON (``envelope`` + ``messages``), JSON lines or CSV (one row per message)."""
    if fmt == "json":
        return json_response({**envelope, "messages": rows})
    if fmt == "jsonl":
        text = "".join(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n" for row in rows)
        content_type, ext = "application/x-ndjson", "jsonl"
    else:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow([" ".join(row[c]) if c == "keys" else row[c] for c in CSV_COLUMNS])
        text, content_type, ext = out.getvalue(), "text/csv", "csv"
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:80] or "messages"
    return web.Response(
        text=text,
        content_type=content_type,
        headers={"Content-Disposition": f'attachment; filename="{safe}.{ext}"'},
    )


class Access:
    """HTTP basic against ``plain_acl.yml``'s accounts, and the topic permissions that follow."""

    def __init__(self, config: AclConfig | None) -> None:
        self.config = config

    def account(self, request: web.Request) -> Account | None:
        """The caller's account (None: access control off or a whitelisted peer); 401 otherwise."""
        config = self.config
        if config is None:
            return None
        remote = request.remote
        if self.whitelisted(remote):
            return None
        header = request.headers.get("Authorization", "")
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic" or not encoded:
            raise _unauthorized("credentials required (HTTP basic: access key and secret key)")
        try:
            access_key, sep, secret = base64.b64decode(encoded, validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise _unauthorized("malformed basic credentials") from None
        account = config.accounts.get(access_key)
        if not sep or account is None:
            raise _unauthorized("unknown access key or wrong secret key")
        white = account.white_remote_address
        if white is not None and white.matches(remote):
            return account
        if not hmac.compare_digest(secret.encode(), account.secret_key.encode()):
            raise _unauthorized("unknown access key or wrong secret key")
        return account

    def whitelisted(self, remote: str | None) -> bool:
        """Whether the peer is in ``globalWhiteRemoteAddresses`` (let in without an account)."""
        return self.config is not None and any(p.matches(remote) for p in self.config.global_white)

    def require_metrics(self, request: web.Request) -> None:
        """``/metrics`` under ``--acl``: an admin account or a whitelisted peer (see the module's
        docstring); 401 without credentials, 403 for an account that is not admin."""
        if self.config is None:
            return
        account = self.account(request)
        if account is None or account.admin:
            return
        white = account.white_remote_address
        if white is not None and white.matches(request.remote):
            return  # let in by its whiteRemoteAddress: the address is allowed explicitly
        raise ApiError(403, "forbidden", "/metrics needs an admin account or a whitelisted address")

    @staticmethod
    def require_publish(account: Account | None, topic: str) -> None:
        """PUB on ``topic``, as a SEND to it needs (``check_resources``, the remoting port's rule)."""
        if account is None:
            return
        try:
            check_resources(account, {topic: PUB})
        except DeniedError as exc:
            raise ApiError(403, "forbidden", f"no permission to send to topic {topic}: {exc}") from None

    @staticmethod
    def may_read(account: Account | None, resource: str) -> bool:
        if account is None or (account.admin and not account.resource_perms):
            return True
        owned = account.resource_perms.get(resource)
        if owned is None:
            owned = (
                account.default_group_perm
                if resource.startswith(RETRY_PREFIX)
                else account.default_topic_perm
            )
        return check_permission(READ, owned)

    def require(self, account: Account | None, resource: str) -> None:
        if not self.may_read(account, resource):
            what = (
                f"group {resource[len(RETRY_PREFIX) :]}"
                if resource.startswith(RETRY_PREFIX)
                else f"topic {resource}"
            )
            raise ApiError(403, "forbidden", f"no permission to read {what}")


#: The ``HttpApi`` an application serves (``app[HTTP_API]``).
HTTP_API: web.AppKey[HttpApi] = web.AppKey("http_api")


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message)


Runner = Callable[..., Awaitable[Any]]


class HttpApi:
    """The routes' handlers over one store, its offsets and its metrics."""

    def __init__(
        self,
        store: ConsumeQueueStore,
        *,
        offsets: OffsetSource,
        run: Runner,
        collector: StoreCollector,
        http_stats: HttpStats,
        acl: AclConfig | None = None,
        resender: Resender | None = None,
        faults: FaultControl | None = None,
        allowed_hosts: AllowedHosts | None = None,
        csrf: CsrfToken | None = None,
        system_topics: Collection[str] = (),
    ) -> None:
        self.store = store
        #: The ``Host`` names answered (``server.http.host_check``; default: loopback and addresses).
        self.allowed_hosts = allowed_hosts if allowed_hosts is not None else AllowedHosts()
        #: The token a state-changing request must send (``server.http.csrf``).
        self.csrf = csrf if csrf is not None else CsrfToken()
        #: The write path's way to resend (``serve --writable``); None: read-only, the POST is 405.
        self.resender = resender
        #: The cluster's faults (``serve --writable --brokers N``); None: no cluster, the routes 404.
        self.faults = faults
        #: ``system_topics``: the broker's start-up system topics besides the fixed set (``/api/topics``
        #: marks them ``system``; ``server.broker.topic_validator.startup_system_topics``).
        self.lookups = Lookups(store, system_topics=system_topics)
        self.offsets = offsets
        self.run = run
        self.access = Access(acl)
        self.http_stats = http_stats
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self.collector = collector
        self._failures = BurstLog(log, level=logging.ERROR)

    # -- the application ----------------------------------------------------------------------------

    def application(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024)
        app[HTTP_API] = self
        for route in ROUTES:
            handler = getattr(self, route.handler_name)
            if route.method == "GET":
                app.router.add_get(route.path, handler, name=route.handler_name)
            else:
                app.router.add_route(route.method, route.path, handler, name=route.handler_name)
        return app

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else "unmatched"
        try:
            host = request.headers.get("Host")
            if not self.allowed_hosts.allows(host):
                raise ApiError(
                    421,
                    "host_not_allowed",
                    f"this server does not answer to the host {str(host)[:100]!r} (a page of another "
                    "site may have pointed that name at it); if it is a name of this server, start "
                    "serve with --http-allow-host NAME",
                )
            if route not in PUBLIC_ROUTES:
                self.access.account(request)  # 401 before any work (handlers ask again: cheap)
            if request.match_info.http_exception is None:
                self.csrf.check(request)  # a request that changes something: 403 without the token
            response = await handler(request)
        except ApiError as exc:
            response = json_response(exc.body(), exc.status)
            if exc.status == 401:
                response.headers["WWW-Authenticate"] = f'Basic realm="{REALM}"'
        except web.HTTPException as exc:
            # unknown paths, wrong methods: the same JSON shape
            error = {404: "not_found", 405: "method_not_allowed"}.get(exc.status, "http_error")
            message = "no such route" if exc.status == 404 else exc.reason
            response = json_response({"status": exc.status, "error": error, "message": message}, exc.status)
            if isinstance(exc, web.HTTPMethodNotAllowed):
                response.headers["Allow"] = ",".join(sorted(exc.allowed_methods))
        except (StoreError, OSError) as exc:
            self._failures.event("HTTP %s %s: the store could not be read: %s", request.method, route, exc)
            response = json_response(
                {
                    "status": 503,
                    "error": "store_damaged",
                    "message": "the store could not be read; see the server's log",
                },
                503,
            )
        except Exception as exc:
            self._failures.event(
                "HTTP %s %s failed: %s", request.method, route, type(exc).__name__, exc_info=exc
            )
            response = json_response(
                {"status": 500, "error": "internal", "message": "the server failed; the cause is in its log"},
                500,
            )
        self.http_stats.observe(route, response.status)
        return response

    # -- pages and meta ------------------------------------------------------------------------------

    async def index(self, request: web.Request) -> web.Response:
        return web.Response(
            text=(STATIC_DIR / "index.html").read_text(encoding="utf-8"),
            content_type="text/html",
            headers={"Cache-Control": "no-cache"},
        )

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        kind = STATIC_TYPES.get(name[name.rfind(".") :] if "." in name else "")
        # a name, never a path: nothing outside the static directory is reachable
        if kind is None or "/" in name or "\\" in name or name.startswith("."):
            raise not_found(f"no file {name[:80]!r}")
        file = STATIC_DIR / name
        if not file.is_file():
            raise not_found(f"no file {name[:80]!r}")
        return web.Response(
            text=file.read_text(encoding="utf-8"), content_type=kind, headers={"Cache-Control": "no-cache"}
        )

    async def openapi(self, request: web.Request) -> web.Response:
        return json_response(openapi_document(ROUTES))

    async def csrf_token(self, request: web.Request) -> web.Response:
        response = json_response({"csrfToken": self.csrf.value, "header": CSRF_HEADER})
        response.headers["Cache-Control"] = "no-store"
        return response

    async def metrics(self, request: web.Request) -> web.Response:
        self.access.require_metrics(request)
        # Computed in slices on the loop (the store is the loop's), rendered on a thread.
        families = await self.collector.collect_async()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(Families(families))
        body = await asyncio.to_thread(generate_latest, registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    # -- topics --------------------------------------------------------------------------------------

    def _known_topic(self, request: web.Request, name: str = "topic") -> str:
        topic = request.match_info[name]
        self.access.require(self.access.account(request), topic)
        if topic not in self.store.topics() and topic not in self.store.queue_nums():
            raise not_found(f"no topic {topic!r} in this store")
        return topic

    async def topics(self, request: web.Request) -> web.Response:
        account = self.access.account(request)
        names, next_after = _name_page(
            request, self.lookups.topic_names(), lambda t: self.access.may_read(account, t)
        )
        topics = []
        for i, topic in enumerate(names):
            if i and i % PAGE_SLICE == 0:
                await asyncio.sleep(0)  # a page of 1,000 lets other clients in between
            topics.append(self.lookups.topic_json(topic))
        return json_response({"topics": topics, "nextAfter": next_after})

    async def topic_histogram(self, request: web.Request) -> web.Response:
        topic = self._known_topic(request)
        begin = time_param(request, "begin", -1)
        end = time_param(request, "end", -1)
        if begin >= 0 and end >= 0 and begin > end:
            raise bad_parameter("begin", "after end")
        buckets = int_param(request, "buckets", 120, 1, MAX_BUCKETS)
        return json_response(
            self.lookups.histogram(topic, begin if begin >= 0 else None, end if end >= 0 else None, buckets)
        )

    async def topic(self, request: web.Request) -> web.Response:
        return json_response(self.lookups.topic_json(self._known_topic(request)))

    async def topic_messages(self, request: web.Request) -> web.Response:
        topic = self._known_topic(request)
        fmt = format_param(request)
        key = request.query.get("key")
        if key is not None:
            if not key or len(key) > 4096:
                raise bad_parameter("key", "must be 1 to 4096 characters")
            begin = time_param(request, "begin", 0)
            end = time_param(request, "end", 2**63 - 1)
            if begin > end:
                raise bad_parameter("begin", "after end")
            limit = int_param(request, "limit", MAX_KEY_RESULTS, 1, MAX_KEY_RESULTS)
            page = await self.lookups.by_key(topic, key, begin, end, limit, run=self.run)
            envelope = {"topic": topic, "key": key, "truncated": page.truncated, "nextCursor": None}
        else:
            begin = time_param(request, "begin", None)
            end = time_param(request, "end", None)
            if begin > end:
                raise bad_parameter("begin", "after end")
            limit = int_param(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
            cursor = parse_cursor(request.query.get("cursor"))
            page = self.lookups.by_time(topic, begin, end, limit, cursor)
            envelope = {"topic": topic, "begin": begin, "end": end, "nextCursor": page.next_cursor}
        return self._page(page, fmt, topic, envelope)

    def _page(self, page: Page, fmt: str, name: str, envelope: dict[str, Any]) -> web.Response:
        if not page.messages and fmt == "json":
            # an empty result is said, not shown as an empty list that looks like a failure
            envelope["found"] = 0
        envelope.setdefault("found", len(page.messages))
        return export_response([message_json(m) for m in page.messages], fmt, name, envelope)

    async def queue_messages(self, request: web.Request) -> web.Response:
        topic = self._known_topic(request)
        queue_id = path_int(request, "queueId")
        if queue_id >= max(self.store.queue_nums().get(topic, 0), 1):
            raise not_found(f"topic {topic!r} has no queue {queue_id}")
        offset = int_param(request, "offset", None, 0, 2**63 - 1)
        count = int_param(request, "count", 1, 1, MAX_COUNT)
        fmt = format_param(request)
        messages = self.lookups.by_queue_offset(topic, queue_id, offset, count)
        if not messages:
            low, high = self.store.min_offset(topic, queue_id), self.store.max_offset(topic, queue_id)
            raise not_found(
                f"no message at offset {offset} of {topic!r} queue {queue_id} (it holds {low}..{high - 1})"
            )
        return self._page(
            Page(messages), fmt, f"{topic}-{queue_id}-{offset}", {"topic": topic, "queueId": queue_id}
        )

    # -- messages ------------------------------------------------------------------------------------

    async def _find(self, request: web.Request) -> tuple[MessageExt | None, list[MessageExt]]:
        """(the record an offset id names, or None; every record with its unique key) the caller may read."""
        msg_id = request.match_info["id"]
        if not msg_id or len(msg_id) > 128:
            raise bad_parameter("id", "must be 1 to 128 characters")
        account = self.access.account(request)
        direct = self.lookups.by_offset_id(msg_id)
        unique = direct.unique_key if direct is not None and direct.unique_key else msg_id
        topics = [t for t in self.store.topics() if self.access.may_read(account, t)]
        copies = await self.lookups.copies(unique, topics, MAX_KEY_RESULTS, run=self.run)
        if direct is not None:
            if not self.access.may_read(account, direct.topic):
                raise ApiError(403, "forbidden", f"no permission to read topic {direct.topic}")
            if all(c.commit_log_offset != direct.commit_log_offset for c in copies):
                copies = sorted([direct, *copies], key=lambda m: m.commit_log_offset)
        if direct is None and not copies:
            raise not_found(f"no message with offset id or unique key {msg_id!r} in this store")
        return direct, copies

    async def message(self, request: web.Request) -> web.Response:
        direct, copies = await self._find(request)
        msg_id = request.match_info["id"]
        envelope = {"id": msg_id, "matchedAs": "offsetMsgId" if direct is not None else "uniqueKey"}
        return self._page(Page(copies), format_param(request), msg_id, envelope)

    async def message_body(self, request: web.Request) -> web.Response:
        direct, copies = await self._find(request)
        msg = direct if direct is not None else copies[0]
        return web.Response(
            body=msg.body,
            content_type="application/octet-stream",
            headers={"Content-Disposition": f'attachment; filename="{msg.offset_msg_id}.bin"'},
        )

    async def message_trace(self, request: web.Request) -> web.Response:
        msg_id = request.match_info["id"]
        if not msg_id or len(msg_id) > 128:
            raise bad_parameter("id", "must be 1 to 128 characters")
        trace_topic = request.query.get("traceTopic", TRACE_TOPIC) or TRACE_TOPIC
        self.access.require(self.access.account(request), trace_topic)
        direct = self.lookups.by_offset_id(msg_id)
        ids = {msg_id} | ({direct.msg_id} if direct is not None else set())
        events: list[dict[str, Any]] = []
        for one in sorted(ids):
            events += await self.lookups.trace(one, trace_topic, MAX_KEY_RESULTS, run=self.run)
        if not events:
            raise not_found(f"no trace of {msg_id!r} in {trace_topic}")
        return json_response({"id": msg_id, "traceTopic": trace_topic, "events": events})

    # -- groups --------------------------------------------------------------------------------------

    async def groups(self, request: web.Request) -> web.Response:
        account = self.access.account(request)
        table = self.offsets.table()
        names, next_after = _name_page(
            request, group_names(table), lambda g: self.access.may_read(account, RETRY_PREFIX + g)
        )
        out = []
        for i, group in enumerate(names):
            if i and i % PAGE_SLICE == 0:
                await asyncio.sleep(0)  # a page of 1,000 lets other clients in between
            info = group_json(self.store, table, group, self.offsets.online(group))
            if info is not None:
                out.append(info)
        return json_response({"groups": out, "nextAfter": next_after})

    async def group(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]
        self.access.require(self.access.account(request), RETRY_PREFIX + group)
        info = group_json(self.store, self.offsets.table(), group, self.offsets.online(group))
        if info is None:
            raise not_found(f"no committed offsets of consumer group {group!r}")
        return json_response(info)

    async def group_dlq(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]
        self.access.require(self.access.account(request), RETRY_PREFIX + group)
        fmt = format_param(request)
        limit = int_param(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
        cursor = parse_cursor(request.query.get("cursor"))
        topic = DLQ_PREFIX + group
        if topic not in self.store.topics() and topic not in self.store.queue_nums():
            raise not_found(f"consumer group {group!r} has no dead-letter topic ({topic})")
        page = self.lookups.by_queue_cursor(topic, limit, cursor)
        return self._page(page, fmt, topic, {"group": group, "topic": topic, "nextCursor": page.next_cursor})

    # -- a cluster's faults --------------------------------------------------------------------------

    def _broker_of(self, request: web.Request) -> tuple[FaultControl, str]:
        control = self.faults
        if control is None:
            raise not_found(
                "this server runs no cluster: faults are set on the brokers of `serve --writable --brokers N`"
            )
        name = request.match_info["brokerName"]
        if name not in control.broker_names:
            raise not_found(
                f"no broker named {name!r} in this cluster (brokers: {', '.join(control.broker_names)})"
            )
        return control, name

    async def broker_faults(self, request: web.Request) -> web.Response:
        control, name = self._broker_of(request)
        return json_response(_faults_answer(control, name, control.faults_of(name)))

    async def broker_faults_set(self, request: web.Request) -> web.Response:
        control, name = self._broker_of(request)
        faults = await _FaultsBody.read(request)
        return await self._put_faults(control, name, faults)

    async def broker_faults_clear(self, request: web.Request) -> web.Response:
        control, name = self._broker_of(request)
        return await self._put_faults(control, name, Faults())

    @staticmethod
    async def _put_faults(control: FaultControl, name: str, faults: Faults) -> web.Response:
        was_down = control.faults_of(name).down
        started = time.monotonic()
        try:
            now = await control.set_faults(name, faults)
        except PortUnusableError as exc:
            raise ApiError(503, "port_unusable", f"broker {name} stays down: {exc}") from None
        answer = _faults_answer(control, name, now)
        if was_down and not now.down:
            # the clear waited for the clients told its routes to see it gone (at most the bound
            # the down's answer gave): how long, so a slow DELETE is not a mystery
            answer["waitedMs"] = round((time.monotonic() - started) * 1000)
        return json_response(answer)

    # -- writing -------------------------------------------------------------------------------------

    async def message_resend(self, request: web.Request) -> web.Response:
        """POST: a copy of the message sent as a producer's SEND of it (``server.http.resend``)."""
        if self.resender is None:
            raise ApiError(
                405, "read_only", "this server is read-only: start it with --writable to resend messages"
            )
        if request.content_type != "application/json":
            raise ApiError(415, "unsupported_media_type", "send the request as application/json")
        try:
            # read within the app's client_max_size, decoded with one bound on nesting (a deeply
            # nested body is a 400, not a RecursionError's traceback: issue 31, item 8)
            options = decode_json_body(await request.read()) if request.can_read_body else {}
        except JsonBodyError:
            raise bad_parameter("body", "not JSON") from None
        if options is None:
            options = {}
        if not isinstance(options, dict):
            raise bad_parameter("body", "expected a JSON object")
        target = options.get("topic")
        if target is not None and (not isinstance(target, str) or not _TOPIC_NAME.fullmatch(target)):
            raise bad_parameter("topic", "1 to 127 characters of letters, digits, %, |, _ and -")
        account = self.access.account(request)
        direct, copies = await self._find(request)
        msg = direct if direct is not None else copies[0]
        topic = target or default_target(msg)
        self.access.require_publish(account, topic)
        peer = request.transport.get_extra_info("peername") if request.transport is not None else None
        born = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else ("127.0.0.1", 0)
        resent = await self.resender.resend(msg, topic, born)
        return json_response({"resentFrom": msg.offset_msg_id, **resent.json()}, 201)


#: ``TopicValidator``'s topic names (the SEND checks them again, with the broker's remark).
_TOPIC_NAME = re.compile(r"[%|a-zA-Z0-9_-]{1,127}")


def _faults_answer(control: FaultControl, name: str, faults: Faults) -> dict[str, object]:
    """A broker's faults as the API answers them; while it is down, ``comeback``: how long a clear
    asked now would wait at most before it listens again, and for which clients."""
    answer: dict[str, object] = {"brokerName": name, "faults": faults.to_json()}
    comeback = control.comeback_of(name)
    if comeback is not None:
        answer["comeback"] = comeback.to_json()
    return answer


class _FaultsBody:
    """Reading a faults POST's body (``server.faults.Faults.from_json``), errors as 4xx."""

    @staticmethod
    async def read(request: web.Request) -> Faults:
        if request.content_type != "application/json":
            raise ApiError(415, "unsupported_media_type", "send the faults as application/json")
        try:
            body = decode_json_body(await request.read()) if request.can_read_body else {}
        except JsonBodyError:
            raise bad_parameter("body", "not JSON") from None
        try:
            return Faults.from_json({} if body is None else body)
        except FaultSpecError as exc:
            raise bad_parameter(exc.field, str(exc).partition(": ")[2]) from None
