"""The HTTP API's errors: one JSON shape, with a status a caller can act on.

404: nothing matches (an operator must be told "nothing found", not shown an empty page that looks
like a failure); 400: a parameter is wrong, and ``parameter`` names it; 401/403: access control;
503: the store could not be read (a file damaged or cut, a record that does not decode). Any other
failure is a 500 with a fixed message: the exception goes to the server's log, never to the client
(its text may carry paths and internals), as the remoting dispatcher does.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An answer other than 200, raised anywhere under a route and turned into JSON by the app."""

    def __init__(self, status: int, error: str, message: str, parameter: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.parameter = parameter

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": self.status, "error": self.error, "message": self.message}
        if self.parameter is not None:
            body["parameter"] = self.parameter
        return body


def bad_parameter(parameter: str, message: str) -> ApiError:
    return ApiError(400, "bad_request", f"{parameter}: {message}", parameter)


def not_found(message: str) -> ApiError:
    return ApiError(404, "not_found", message)


def store_damaged(message: str) -> ApiError:
    return ApiError(503, "store_damaged", message)
