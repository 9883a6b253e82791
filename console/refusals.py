"""Requests the console and the admin refuse before a view reads them: a body over the console's
limit, more fields than Django reads, a multipart body that cannot be parsed, a Host the
platform does not serve. Each is answered with the console's own page (or, to a script asking
for JSON such as "test connection", `{"ok": false, "message": ...}`) naming the limit it
crossed, and logged as one line, never a traceback.

The A2A endpoints under /a2a/ read their bodies themselves and answer in their bindings'
formats (`bindings.rest.bad_request`); `a2a_platform.urls` sends them there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import (
    DisallowedHost,
    RequestDataTooBig,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.shortcuts import render
from django.utils.log import log_response

logger = logging.getLogger(__name__)

# The pages whose posts the console's limit bounds: the console's forms and the admin's.
LIMITED_PATHS = ("/console/", "/admin/")
# What Django parses into request.POST (CSRF's check reads it): a form. A JSON body (the
# console's Try it and Reply) is read by its view, within the A2A bindings' own bound, since
# it carries a message as they do.
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


class ConsoleBodyTooBig(RequestDataTooBig):
    """A body over A2A_CONSOLE_MAX_REQUEST_BYTES, refused before it is parsed; `size` None
    when it is not known (a body sent in chunks, over what the platform reads at all)."""

    def __init__(self, size: int | None, limit: int) -> None:
        sent = f"A body of {size} bytes" if size is not None else "A body"
        super().__init__(f"{sent} is over A2A_CONSOLE_MAX_REQUEST_BYTES ({limit}).")
        self.size, self.limit = size, limit


class ConsoleBodyLimit:
    """Refuses a console or admin form whose body is larger than
    A2A_CONSOLE_MAX_REQUEST_BYTES before anything parses it; placed before the middleware
    that reads forms (CSRF). A body with a Content-Length is refused unread; one sent in
    chunks (no Content-Length) is read first, within DATA_UPLOAD_MAX_MEMORY_SIZE as Django
    reads every body. The rest of the platform keeps DATA_UPLOAD_MAX_MEMORY_SIZE
    (A2A_MAX_REQUEST_BYTES), which the A2A bindings apply to their own bodies."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(LIMITED_PATHS) and request.content_type in FORM_TYPES:
            limit = settings.A2A_CONSOLE_MAX_REQUEST_BYTES
            try:
                size = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                size = 0  # Django's own parsing says what is wrong with it
            if not size and "HTTP_TRANSFER_ENCODING" in request.META:
                try:
                    size = len(request.body)
                except RequestDataTooBig:
                    raise ConsoleBodyTooBig(None, limit) from None
            if size > limit:
                raise ConsoleBodyTooBig(size, limit)
        return self.get_response(request)


def _size(number: int) -> str:
    """Bytes as people read them: 2,097,152 bytes (2 MiB)."""
    for unit, scale in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if number >= scale and number % scale == 0:
            return f"{number:,} bytes ({number // scale:,} {unit})"
    return f"{number:,} bytes"


def refusal_of(exception: Exception | None) -> tuple[int, str, str]:
    """The status, a title and the message for a request refused by `exception`."""
    if isinstance(exception, ConsoleBodyTooBig):
        sent = f"sent {_size(exception.size)}" if exception.size is not None else "sent more"
        return (
            413,
            "Too large to send",
            f"This request {sent}; the console and the admin take at most "
            f"{_size(exception.limit)} in one request (A2A_CONSOLE_MAX_REQUEST_BYTES). "
            "Nothing was saved: go back, shorten what you typed or pasted, and send it again.",
        )
    if isinstance(exception, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return (
            413,
            "Too large to send",
            f"This request's body is over {_size(limit)}, the most the platform reads in one "
            "request (A2A_MAX_REQUEST_BYTES). Nothing was saved.",
        )
    if isinstance(exception, TooManyFieldsSent):
        return (
            400,
            "Too many fields",
            f"This request sent more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:,} fields "
            "(DATA_UPLOAD_MAX_NUMBER_FIELDS), in its query or its form; no page of the console "
            "has that many. Nothing was saved.",
        )
    if isinstance(exception, TooManyFilesSent):
        return (
            400,
            "Too many files",
            f"This request sent more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES:,} files "
            "(DATA_UPLOAD_MAX_NUMBER_FILES); the console takes none. Nothing was saved.",
        )
    if isinstance(exception, MultiPartParserError):
        return (
            400,
            "Unreadable form",
            f"This request's multipart/form-data body could not be read ({exception}). "
            "Nothing was saved: send the form again from its page.",
        )
    if isinstance(exception, DisallowedHost):
        return (
            400,
            "Unknown host",
            "The Host header of this request names no host this platform serves.",
        )
    return 400, "Bad request", "This request is malformed, and the platform cannot read it."


def request_refused(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's 400 handler for every path but the A2A endpoints': the console's page (JSON to
    a script that asks for it), with the status that fits, logged as one line."""
    status, title, message = refusal_of(exception)
    if request.get_preferred_type(["text/html", "application/json"]) == "application/json":
        response: HttpResponse = JsonResponse({"ok": False, "message": message}, status=status)
    else:
        context = {"title": title, "message": message, "status": status}
        response = render(request, "400.html", context, status=status)
    # One line instead of Django's record of the exception with its traceback: marked as
    # logged, the response is not logged again.
    log_response(
        "%s %s refused (%s): %s",
        request.method,
        request.path,
        type(exception).__name__ if exception else "bad request",
        message,
        response=response,
        request=request,
        logger=logger,
        level="warning",
    )
    return response
