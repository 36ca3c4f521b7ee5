"""``/openapi.json``: an OpenAPI 3.1 description built from ``server.http.app.ROUTES``.

Built from the same table the app registers its routes from, so the two cannot drift apart; a test
also compares the description's paths with the routes the running app answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_ERROR_SCHEMA = {
    "type": "object",
    "required": ["status", "error", "message"],
    "properties": {
        "status": {"type": "integer"},
        "error": {
            "type": "string",
            "enum": [
                "bad_request",
                "not_found",
                "unauthorized",
                "forbidden",
                "method_not_allowed",
                "read_only",
                "refused",
                "unsupported_media_type",
                "store_damaged",
                "unavailable",
                "internal",
            ],
        },
        "message": {"type": "string"},
        "parameter": {"type": "string", "description": "the parameter a 400 is about"},
    },
}

_STATUS_TEXT = {
    400: "a parameter is wrong (named in `parameter`)",
    401: "credentials required (with --acl)",
    403: "the account may not read this topic or group",
    404: "nothing found",
    405: "the server is read-only (start it with --writable)",
    409: "the broker refused the SEND (its response code and remark in `message`)",
    415: "the request body must be application/json",
    503: "the store could not be read (damaged or cut files), or could not take the message",
}


def openapi_document(routes: Sequence[Any]) -> dict[str, Any]:
    """The document for ``routes`` (``server.http.app.Route``: path, handler_name, summary, params,
    produces, errors, tags, method, body, ok_status; typed loosely here so that this module does not import
    the app)."""
    paths: dict[str, Any] = {}
    for route in routes:
        ok: dict[str, Any] = {"description": "OK", "content": {m: {} for m in route.produces}}
        responses: dict[str, Any] = {str(route.ok_status): ok}
        for status in (*route.errors, *((401, 403) if route.path.startswith("/api") else ())):
            responses[str(status)] = {
                "description": _STATUS_TEXT[status],
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
            }
        operation: dict[str, Any] = {
            "operationId": route.handler_name,
            "summary": route.summary,
            "tags": list(route.tags),
            "parameters": [
                {
                    "name": p.name,
                    "in": p.where,
                    "required": p.required or p.where == "path",
                    "description": p.description,
                    "schema": {"type": p.kind},
                }
                for p in route.params
            ],
            "responses": responses,
        }
        if route.body:
            operation["requestBody"] = {
                "required": False,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "properties": {
                                name: {"type": kind, "description": text} for name, kind, text in route.body
                            },
                        }
                    }
                },
            }
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "rmq-query HTTP API",
            "version": "1",
            "description": "Lookups over a RocketMQ store: messages by id, key, time or queue "
            "offset, traces, topics, consumer groups and dead letters. Every listing is bounded; "
            "time ranges are paged with a cursor. Read-only, except the resend of a message when "
            "the server runs with --writable.",
        },
        "paths": paths,
        "components": {
            "schemas": {"Error": _ERROR_SCHEMA},
            "securitySchemes": {"basic": {"type": "http", "scheme": "basic"}},
        },
    }
