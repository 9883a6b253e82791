"""Reading push configs: the token, the credentials and v0.1's headers never come back, not in
a get, a list or the answer to a create; a delivery still decrypts them (push_app.delivery)."""

from __future__ import annotations

import pytest
from a2a.types import AuthenticationInfo, TaskPushNotificationConfig
from django.utils import timezone

from agents.auth import Principal
from agents.crypto import decrypt
from push_app.delivery import TOKEN_HEADER, _headers
from push_app.models import PushConfig
from push_app.selectors import push_config_get, push_config_list
from push_app.services import push_config_create
from tasks_app.models import Task

pytestmark = pytest.mark.django_db

OWNER = Principal(owner="key:alice")
URL = "https://93.184.216.34/hook"  # a public address: the SSRF guard lets it through
TOKEN, CREDENTIALS = "the-token-of-c1", "the-credentials-of-c1"


@pytest.fixture
def task(make_tenant, make_agent) -> Task:
    tenant = make_tenant()
    return Task.objects.create(
        tenant=tenant,
        agent=make_agent(tenant, "echo"),
        context_id="c",
        owner=OWNER.owner,
        state="TASK_STATE_INPUT_REQUIRED",
        status_timestamp=timezone.now(),
    )


def _create(task: Task, **fields: str) -> TaskPushNotificationConfig:
    config = TaskPushNotificationConfig(task_id=str(task.pk), id="c1", url=URL, **fields)
    if "token" in fields:
        config.authentication.CopyFrom(AuthenticationInfo(scheme="Bearer", credentials=CREDENTIALS))
    return push_config_create(agent=task.agent, principal=OWNER, config=config, dialect="1.0")


def test_no_read_of_a_config_returns_its_token_or_credentials(task):
    # given a config with a token and credentials
    created = _create(task, token=TOKEN)

    # when it is read: the answer to its create, a get, a list
    got = push_config_get(agent=task.agent, principal=OWNER, task_id=str(task.pk), config_id="c1")
    (listed,) = push_config_list(agent=task.agent, principal=OWNER, task_id=str(task.pk)).configs

    # then each is the config without them: absent, not a placeholder; the scheme is kept
    expected = TaskPushNotificationConfig(
        id="c1", task_id=str(task.pk), url=URL, authentication=AuthenticationInfo(scheme="Bearer")
    )
    assert created == got == listed == expected
    for answer in (created, got, listed):
        assert not answer.token and not answer.authentication.credentials
        assert TOKEN.encode() not in answer.SerializeToString()


def test_a_delivery_still_carries_them(task):
    _create(task, token=TOKEN)
    stored = PushConfig.objects.get(task=task, config_id="c1")
    assert decrypt(stored.token_encrypted) == TOKEN

    headers = _headers(stored, b"{}")

    assert headers[TOKEN_HEADER] == TOKEN
    assert headers["Authorization"] == f"Bearer {CREDENTIALS}"


def test_v01_headers_are_kept_for_deliveries_and_never_read(task):
    config = TaskPushNotificationConfig(task_id=str(task.pk), id="v0.1", url=URL)
    hook_headers = {"X-Hook-Secret": "s3cret"}

    created = push_config_create(
        agent=task.agent, principal=OWNER, config=config, dialect="0.1", headers=hook_headers
    )

    assert created == TaskPushNotificationConfig(id="v0.1", task_id=str(task.pk), url=URL)
    stored = PushConfig.objects.get(task=task, config_id="v0.1")
    assert _headers(stored, b"{}")["X-Hook-Secret"] == "s3cret"


def test_a_replace_without_secrets_removes_them(task):
    """Set replaces the whole config: the old token is not kept for a config that leaves it
    out, which might now name another URL."""
    _create(task, token=TOKEN)

    _create(task)

    stored = PushConfig.objects.get(task=task, config_id="c1")
    assert (stored.token_encrypted, stored.auth_scheme, stored.auth_credentials_encrypted) == (
        "",
        "",
        "",
    )
    assert TOKEN_HEADER not in _headers(stored, b"{}")
