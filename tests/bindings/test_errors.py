"""The error translator (bindings.errors) and the handlers that answer requests no view saw
(the platform's handler400, which hands /a2a/ paths to bindings.rest.bad_request), each in the
binding's own form."""

from __future__ import annotations

import json

import grpc
import pytest
from django.core.exceptions import DisallowedHost, TooManyFieldsSent
from django.test import RequestFactory

from a2a_platform.urls import bad_request
from a2a_platform.versions import V0_3
from bindings.errors import MESSAGE_BYTES, bounded, grpc_status_of, problem_of
from tasks_app.errors import InvalidParamsError


@pytest.mark.parametrize("char", ["x", "\u00e9", "\U0001f642"])
def test_a_long_message_is_cut_on_a_character_boundary(char):
    message = bounded(char * 100_000)
    assert len(message.encode()) <= MESSAGE_BYTES
    assert message.endswith("\u2026")
    assert message[:-1] == char * len(message[:-1])  # no half of a character left


def test_a_short_message_stays_and_a_lone_surrogate_is_replaced():
    assert bounded("No task for 'x'") == "No task for 'x'"
    assert bounded("bad \ud800 here") == "bad ? here"


def test_every_binding_gets_the_bounded_message():
    problem = problem_of(InvalidParamsError("No task for " + "x" * 50_000))
    assert len(problem.message.encode()) <= MESSAGE_BYTES
    status = grpc_status_of(InvalidParamsError("No task for " + "y" * 50_000), V0_3)
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT
    details = dict(status.trailing_metadata)["grpc-status-details-bin"]
    # grpc-message and the google.rpc.Status stay far under the 8 KB clients accept.
    assert len(status.details.encode()) + len(details) < 4_000


def test_djangos_refusals_of_a_request_are_invalid_requests():
    problem = problem_of(TooManyFieldsSent("The number of GET/POST parameters exceeded"))
    assert (problem.http_status, problem.jsonrpc_code, problem.grpc_status) == (
        400,
        -32600,
        "INVALID_ARGUMENT",
    )
    assert problem.reason == "INVALID_REQUEST" and "parameters" in problem.message


@pytest.mark.parametrize(
    "path, form",
    [
        ("/a2a/acme/helper/", "jsonrpc"),
        ("/a2a/acme/helper", "jsonrpc"),
        ("/a2a/acme/helper/tasks/x", "rest"),
        ("/a2a/acme/helper/v1/message:send", "rest"),
        ("/a2a/acme/", "rest"),
    ],
)
def test_a_host_the_platform_does_not_serve_is_answered_in_the_bindings_form(path, form):
    request = RequestFactory().post(path, data=b"{}", content_type="application/json")
    response = bad_request(request, DisallowedHost("Invalid HTTP_HOST header: 'x'."))
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    body = json.loads(response.content)
    if form == "jsonrpc":
        assert body["jsonrpc"] == "2.0" and body["id"] is None
        error = body["error"]
        assert error["code"] == -32600 and error["data"][0]["reason"] == "INVALID_REQUEST"
    else:
        error = body["error"]
        assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
        assert error["details"][0]["reason"] == "INVALID_REQUEST"
    assert "Host" in error["message"] and "ALLOWED_HOSTS" not in error["message"]


def test_outside_a2a_a_400_is_a_page():
    request = RequestFactory().get("/console/")
    response = bad_request(request, DisallowedHost("x"))
    assert response.status_code == 400 and "text/html" in response["Content-Type"]


def test_a_database_that_is_away_is_a_503_to_try_again_not_an_internal_error():
    import django.db
    import psycopg

    with pytest.raises(psycopg.OperationalError) as refused:
        psycopg.connect("postgresql://a2a@127.0.0.1:1/a2a", connect_timeout=2)
    try:  # as Django's DatabaseErrorWrapper raises it
        raise django.db.OperationalError(*refused.value.args) from refused.value
    except django.db.OperationalError as exc:
        problem = problem_of(exc)
    assert (problem.http_status, problem.jsonrpc_code, problem.grpc_status) == (
        503,
        -32053,
        "UNAVAILABLE",
    )
    assert problem.reason == "DATABASE_UNAVAILABLE" and "try again" in problem.message
    assert problem.headers == {"Retry-After": "1"} and problem.http_level
    # A statement's own error is still the platform's bug, answered without its text.
    statement = problem_of(django.db.ProgrammingError("relation does not exist"))
    assert statement.http_status == 500 and "relation" not in statement.message
