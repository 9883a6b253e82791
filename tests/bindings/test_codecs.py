"""Version negotiation and the v0.3 tasks/list codec."""

from __future__ import annotations

import pytest
from a2a.types import TaskState

from bindings.callers import dialect_of
from bindings.codecs.v03 import v03_list_request, v03_request
from bindings.codecs.v10 import v10_params
from tasks_app.errors import InvalidParamsError, VersionNotSupportedError


@pytest.mark.parametrize(
    "header, query, expected",
    [
        (None, None, "0.3"),
        ("", None, "0.3"),
        ("1.0", None, "1.0"),
        ("1.0.1", None, "1.0"),
        ("1", None, "1.0"),
        ("0.3", None, "0.3"),
        ("0.3.0", None, "0.3"),
        (None, "1.0", "1.0"),
        ("0.3", "1.0", "0.3"),
        ("0.1", None, "0.1"),
    ],
)
def test_dialect_of(header, query, expected):
    assert dialect_of(header, query) == expected


@pytest.mark.parametrize("value", ["2.0", "0.2", "abc", "1.1", "0.4"])
def test_unsupported_versions(value):
    with pytest.raises(VersionNotSupportedError, match="supported|not a version"):
        dialect_of(value, None)


def test_v03_list_request_maps_every_field():
    request = v03_list_request(
        {
            "contextId": "c",
            "status": "input-required",
            "pageSize": 5,
            "pageToken": "t",
            "historyLength": 2,
            "lastUpdatedAfter": 1_700_000_000_000,
            "includeArtifacts": True,
        }
    )
    assert request.context_id == "c" and request.page_size == 5 and request.page_token == "t"
    assert request.status == TaskState.TASK_STATE_INPUT_REQUIRED
    assert request.history_length == 2 and request.include_artifacts
    assert request.status_timestamp_after.ToMilliseconds() == 1_700_000_000_000


@pytest.mark.parametrize(
    "params, words",
    [
        ({"pageSize": "5"}, "pageSize"),
        ({"status": "done"}, "status"),
        ({"includeArtifacts": 1}, "includeArtifacts"),
        ({"lastUpdatedAfter": -1}, "lastUpdatedAfter"),
        ({"bogus": 1}, "bogus"),
        ({"pageSize": True}, "pageSize"),
    ],
)
def test_v03_list_request_names_the_bad_field(params, words):
    with pytest.raises(InvalidParamsError, match=words):
        v03_list_request(params)


def test_v03_and_v10_params_errors_name_the_field():
    from a2a.compat.v0_3 import types as v03
    from a2a.types import GetTaskRequest

    with pytest.raises(InvalidParamsError, match="message"):
        v03_request(v03.SendMessageRequest, "message/send", {"message": {"parts": 3}})
    with pytest.raises(InvalidParamsError, match="historyLength|history_length"):
        v10_params({"id": "x", "historyLength": "many"}, GetTaskRequest)


def test_v10_params_forgive_unknown_fields_but_not_unknown_enum_names():
    from a2a.types import ListTasksRequest, SendMessageRequest

    request = v10_params({"contextId": "c", "futureField": 1}, ListTasksRequest)
    assert request.context_id == "c"
    with pytest.raises(InvalidParamsError, match="TASK_STATE_BOGUS"):
        v10_params({"status": "TASK_STATE_BOGUS"}, ListTasksRequest)
    for params in (
        {
            "extra": True,
            "message": {"messageId": "m", "role": "ROLE_BOSS", "parts": [{"text": "x"}]},
        },
        {"message": {"messageId": "m", "role": "ROLE_BOSS", "parts": [{"text": "x"}]}, "extra": 1},
    ):
        with pytest.raises(InvalidParamsError, match="ROLE_BOSS"):
            v10_params(params, SendMessageRequest)
    nested = v10_params(
        {
            "message": {
                "messageId": "m",
                "future": {"a": 1},
                "parts": [{"text": "x", "future": 2}],
                "metadata": {"kept": {"deep": True}},
            }
        },
        SendMessageRequest,
    )
    assert nested.message.parts[0].text == "x"
    assert nested.message.metadata["kept"]["deep"] is True
