"""A limit's refusal (agents.errors.LimitExceeded) as each binding writes it: the ErrorInfo
naming the limit, then a RetryInfo with the wait; REST's and JSON-RPC's headers; gRPC's
RESOURCE_EXHAUSTED with both details in its google.rpc.Status."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from a2a_platform.versions import V0_3, V1_0
from agents.errors import AuthenticationRequired, LimitExceeded
from bindings.errors import grpc_status_of, jsonrpc_error, problem_of, rest_body


def refusal(kind=LimitExceeded.RATE, retry_after=0.4) -> LimitExceeded:
    return LimitExceeded(
        "Tenant acme is over its rate of 5 requests per second; retry in 0.4 s.",
        kind=kind,
        limit="requests_per_second",
        value=5,
        scope="tenant",
        retry_after=retry_after,
        window=60,
    )


DETAILS = [
    {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "RATE_LIMITED",
        "domain": "a2a-protocol.org",
        "metadata": {"limit": "requests_per_second", "value": "5", "scope": "tenant"},
    },
    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.400s"},
]


def test_every_binding_gets_the_limit_and_the_wait():
    problem = problem_of(refusal())
    assert (problem.http_status, problem.jsonrpc_code, problem.grpc_status) == (
        429,
        -32054,
        "RESOURCE_EXHAUSTED",
    )
    assert problem.http_level  # JSON-RPC answers it with HTTP 429 too
    assert problem.details == DETAILS
    assert problem.headers == {
        "Retry-After": "1",
        "RateLimit-Policy": '"requests_per_second";q=5;w=60',
        "RateLimit": '"requests_per_second";r=0;t=1',
    }


def test_json_rpc_carries_both_details_in_data():
    # Every dialect's answer, v0.1's too (tests/e2e/test_rate_limits.py): -32054 is in the
    # -32000..-32099 range v0.1 leaves to servers.
    assert jsonrpc_error(problem_of(refusal())) == {
        "code": -32054,
        "message": "Tenant acme is over its rate of 5 requests per second; retry in 0.4 s.",
        "data": DETAILS,
    }


def test_rest_answers_a_status_body_and_v03_its_type():
    problem = problem_of(refusal())
    body = rest_body(problem, V1_0)
    assert body == {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": problem.message,
            "details": DETAILS,
        }
    }
    v03 = rest_body(problem, V0_3)
    assert (v03["type"], v03["message"], v03["error"]) == (
        "RateLimited",
        problem.message,
        body["error"],
    )


@pytest.mark.parametrize(
    "kind, reason, code",
    [
        (LimitExceeded.QUOTA, "QUOTA_EXCEEDED", -32055),
        (LimitExceeded.CONCURRENCY, "CONCURRENCY_LIMITED", -32056),
    ],
)
def test_each_kind_of_limit_has_its_reason_and_code(kind, reason, code):
    problem = problem_of(refusal(kind))
    assert (problem.reason, problem.jsonrpc_code, problem.details[0]["reason"]) == (
        reason,
        code,
        reason,
    )


@pytest.mark.parametrize("dialect", [V1_0, V0_3])
def test_grpc_is_resource_exhausted_with_the_error_info_then_the_retry_info(dialect):
    status = grpc_status_of(refusal(retry_after=1.2345), dialect)
    assert status.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert status.details.startswith("Tenant acme is over its rate")  # no class name prefix
    packed = status_pb2.Status.FromString(dict(status.trailing_metadata)["grpc-status-details-bin"])
    info, retry = error_details_pb2.ErrorInfo(), error_details_pb2.RetryInfo()
    assert packed.details[0].Unpack(info) and packed.details[1].Unpack(retry)
    assert (info.reason, info.domain, dict(info.metadata)) == (
        "RATE_LIMITED",
        "a2a-protocol.org",
        {"limit": "requests_per_second", "value": "5", "scope": "tenant"},
    )
    assert retry.retry_delay.ToMilliseconds() == 1235


def test_other_request_errors_keep_one_error_info_without_metadata():
    problem = problem_of(AuthenticationRequired("No key."))
    assert problem.details == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "UNAUTHENTICATED",
            "domain": "a2a-protocol.org",
            "metadata": {},
        }
    ]
    packed = status_pb2.Status.FromString(
        dict(grpc_status_of(AuthenticationRequired("No key."), V1_0).trailing_metadata)[
            "grpc-status-details-bin"
        ]
    )
    assert len(packed.details) == 1
