"""The console acting, not only looking: an agent edited, disabled, enabled and deleted (with
what happens to its tasks), the people of a tenant added, invited, re-roled and removed, a job
revoked, and tasks canceled, replied to and started from Try it as the person logged in (and
recorded); each refused to those who may not, and each refusal a message that says why."""

from __future__ import annotations

import html
import json
import re
import uuid
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from a2a.types import TaskState
from django.conf import settings
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.db import transaction
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from agents.auth import Principal
from agents.cache import forget_all
from agents.models import Agent, ApiKey, Membership
from agents.services import api_key_create
from audit.models import AuditEvent
from tasks_app.models import Task
from tests.factories import task_create

from ..e2e.helpers import Target, rpc_send, rpc_send_nonblocking, wait_until
from .test_agent_pages import agent_url
from .test_tasks_pages import console_login, parse_sse

pytestmark = pytest.mark.django_db


def _task(agent: Agent, state: str) -> Task:
    return Task.objects.create(
        tenant=agent.tenant,
        agent=agent,
        context_id="ctx",
        owner="key:k",  # the principal of the tests' key "k"
        state=state,
        status_timestamp=timezone.now(),
    )


def _messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


# --- agents ----------------------------------------------------------------------------------


def test_an_owner_edits_an_agent_but_not_its_slug(client, world):
    client.force_login(world["owner_a"])
    agent = world["agent_a"]
    page = client.get(agent_url(agent, "console:agent-edit"))
    assert page.status_code == 200
    assert 'name="slug"' not in page.content.decode()
    form = {
        "name": "Alpha, renamed",
        "description": "Now with a better description.",
        "version": "2.0.0",
        "executor_kind": "echo",
        "executor_config": "{}",
        "skills": "[]",
        "default_input_modes": '["text/plain"]',
        "default_output_modes": '["text/plain"]',
        "visibility": "private",
        "anonymous_scope": "isolated",
        "worker_loss": "fail",
        "worker_loss_attempts": "3",
        "push_notifications": "on",
        "protocol_versions": ["1.0", "0.3", "0.1"],
        "deduplicate_messages": "on",
        "slug": "hijacked",  # ignored: not a field of the edit form
    }
    response = client.post(agent_url(agent, "console:agent-edit"), form, follow=True)
    assert response.redirect_chain[-1][0] == agent_url(agent)
    agent.refresh_from_db()
    assert (agent.slug, agent.name, agent.version) == ("alpha", "Alpha, renamed", "2.0.0")
    card = client.get(f"/a2a/{agent.tenant.slug}/alpha/.well-known/agent-card.json").json()
    assert card["name"] == "Alpha, renamed" and card["version"] == "2.0.0"

    # a bad config is refused on its field, and nothing changes
    saved = agent.executor_config
    assert saved["delay_seconds"] == 0  # normalised by the kind's model
    form["executor_config"] = '{"delay_seconds": "soon"}'
    response = client.post(agent_url(agent, "console:agent-edit"), form)
    assert response.status_code == 200
    assert "delay_seconds" in response.content.decode()
    agent.refresh_from_db()
    assert agent.executor_config == saved


def test_members_and_other_tenants_cannot_change_an_agent(client, world):
    agent = world["agent_a"]
    client.force_login(world["member_a"])
    page = client.get(agent_url(agent)).content.decode()
    assert 'id="agent-actions"' not in page
    assert client.get(agent_url(agent, "console:agent-edit")).status_code == 403
    assert (
        client.post(agent_url(agent, "console:agent-active"), {"active": "false"}).status_code
        == 403
    )
    assert (
        client.post(agent_url(agent, "console:agent-delete"), {"confirm_slug": "alpha"}).status_code
        == 403
    )
    client.force_login(world["member_b"])
    assert (
        client.post(agent_url(agent, "console:agent-active"), {"active": "false"}).status_code
        == 404
    )
    agent.refresh_from_db()
    assert agent.is_active


@pytest.mark.django_db(transaction=True)  # the A2A view reads on a connection of its own
def test_a_disabled_agent_answers_not_found_keeps_its_tasks_and_comes_back(client, world):
    agent = world["agent_a"]
    key = api_key_create(tenant=agent.tenant, name="k")[1]
    done = _task(agent, "TASK_STATE_COMPLETED")
    client.force_login(world["owner_a"])
    response = client.post(
        agent_url(agent, "console:agent-active"), {"active": "false"}, follow=True
    )
    assert any("disabled" in m for m in _messages(response))
    page = response.content.decode()
    assert 'id="agent-disabled-note"' in page and 'id="agent-delete"' in page

    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": str(done.pk)}}
    url = f"/a2a/{agent.tenant.slug}/{agent.slug}/"
    headers = {"HTTP_X_API_KEY": key, "HTTP_A2A_VERSION": "1.0"}
    forget_all()  # this process's cache, as the bound would
    answer = client.post(url, body, content_type="application/json", **headers)
    assert "not" in answer.content.decode().lower() and "alpha" in answer.content.decode()
    assert "result" not in answer.json()
    # the console still shows its task
    task_page = reverse(
        "console:task", kwargs={"tenant_slug": agent.tenant.slug, "task_id": str(done.pk)}
    )
    assert client.get(task_page).status_code == 200

    response = client.post(agent_url(agent, "console:agent-active"), {"active": "true"})
    assert response.status_code == 302
    agent.refresh_from_db()
    assert agent.is_active
    forget_all()  # this process's cache, as the bound would
    answer = client.post(url, body, content_type="application/json", **headers)
    assert answer.json().get("result", {}).get("id") == str(done.pk), answer.json()


@override_settings(A2A_AUTH_CACHE_SECONDS=0.0)
def test_deleting_an_agent_is_refused_until_it_may_go_then_takes_its_tasks(client, world):
    agent = world["agent_a"]
    own_key = api_key_create(tenant=agent.tenant, name="own", agent=agent)[0]
    tenant_key = api_key_create(tenant=agent.tenant, name="tenant-wide")[0]
    _task(agent, "TASK_STATE_COMPLETED")
    waiting = _task(agent, "TASK_STATE_INPUT_REQUIRED")
    running = _task(agent, "TASK_STATE_WORKING")
    delete = agent_url(agent, "console:agent-delete")
    client.force_login(world["owner_a"])

    # active: refused, and the page says to disable first
    page = client.get(delete).content.decode()
    assert "Disable it first" in page and 'data-count="tasks">3<' in page
    response = client.post(delete, {"confirm_slug": "alpha"})
    assert response.status_code == 400 and "disable it first" in response.content.decode()

    # disabled, with a run in flight: refused, saying what to wait for
    client.post(agent_url(agent, "console:agent-active"), {"active": "false"})
    Agent.objects.filter(pk=agent.pk).update(updated_at=timezone.now() - timedelta(seconds=5))
    response = client.post(delete, {"confirm_slug": "alpha"})
    assert response.status_code == 400
    assert "1 task with a run queued or in flight" in response.content.decode()

    # the slug must be typed
    Task.objects.filter(pk=running.pk).update(state="TASK_STATE_CANCELED")
    response = client.post(delete, {"confirm_slug": "alpah"})
    assert response.status_code == 400
    assert "Type the agent's slug" in html.unescape(response.content.decode())
    assert Agent.objects.filter(pk=agent.pk).exists()

    # then it goes, with its tasks (an interrupted one included) and its own keys
    response = client.post(delete, {"confirm_slug": "alpha"}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("console:overview")
    assert any("3 tasks and 1 key" in m for m in _messages(response))
    assert not Agent.objects.filter(pk=agent.pk).exists()
    assert not Task.objects.filter(pk=waiting.pk).exists()
    assert not ApiKey.objects.filter(pk=own_key.pk).exists()
    assert ApiKey.objects.filter(pk=tenant_key.pk).exists()


def test_the_registration_form_marks_required_fields_and_hides_python_with_no_class_allowed(
    client,
    world,
    settings,
):
    client.force_login(world["owner_a"])
    new = reverse("console:agent-new", kwargs={"tenant_slug": world["a"].slug})
    settings.A2A_PYTHON_EXECUTORS = []
    page = client.get(new).content.decode()
    assert '<option value="python"' not in page
    label = re.search(r'<label for="id_description">(.*?)</label>', page).group(1)
    assert 'class="req"' in label
    settings.A2A_PYTHON_EXECUTORS = ["agents.executors.echo.EchoExecutor"]
    assert '<option value="python"' in client.get(new).content.decode()


def test_the_overview_names_states_as_the_task_pages_do(client, world):
    _task(world["agent_a"], "TASK_STATE_COMPLETED")
    client.force_login(world["owner_a"])
    page = client.get(reverse("console:overview")).content.decode()
    assert "TASK_STATE_COMPLETED 1" in page
    assert ">completed 1<" not in page


# --- people ----------------------------------------------------------------------------------


def people_url(tenant, name="console:people", **extra) -> str:
    return reverse(name, kwargs={"tenant_slug": tenant.slug, **extra})


def test_an_owner_adds_an_existing_person_by_user_name_and_changes_their_role(
    client, world, django_user_model
):
    a = world["a"]
    django_user_model.objects.create_user("dana", email="dana@example.org", password="pw")
    client.force_login(world["owner_a"])
    response = client.post(
        people_url(a, "console:person-add"), {"username": "dana", "role": "member"}, follow=True
    )
    assert any("dana added" in m for m in _messages(response))
    membership = Membership.objects.get(tenant=a, user__username="dana")
    assert membership.role == "member"
    # an owner does not see the emails of people (only operators do)
    assert "dana@example.org" not in response.content.decode()
    client.force_login(world["operator"])
    assert "dana@example.org" in client.get(people_url(a)).content.decode()
    client.force_login(world["owner_a"])
    response = client.post(
        people_url(a, "console:person-role", membership_id=membership.pk),
        {"role": "owner"},
        follow=True,
    )
    assert any("dana is now owner" in m for m in _messages(response))
    membership.refresh_from_db()
    assert membership.role == "owner"
    # adding twice says so
    response = client.post(
        people_url(a, "console:person-add"), {"username": "dana", "role": "member"}, follow=True
    )
    assert any("already in tenant" in m for m in _messages(response))


def test_a_bad_user_name_or_a_disabled_account_is_a_message_not_a_500(
    client, world, django_user_model
):
    a = world["a"]
    django_user_model.objects.create_user("gone", password="pw", is_active=False)
    client.force_login(world["owner_a"])
    add = people_url(a, "console:person-add")
    response = client.post(add, {"username": "gone", "role": "member"}, follow=True)
    assert any("The account gone is disabled" in m for m in _messages(response))
    response = client.post(add, {"username": "bob smith", "role": "member"}, follow=True)
    assert any("cannot be a user name" in m for m in _messages(response))
    assert not django_user_model.objects.filter(username="bob smith").exists()
    assert not Membership.objects.filter(tenant=a, user__username__in=["gone", "bob smith"])


def test_an_invited_person_sets_a_password_by_a_link_that_works_once(
    client, world, django_user_model
):
    a = world["a"]
    client.force_login(world["owner_a"])
    response = client.post(
        people_url(a, "console:person-add"),
        {"username": "erin", "email": "erin@example.org", "role": "member"},
        follow=True,
    )
    page = response.content.decode()
    link = re.search(r'<code id="invite-link">([^<]+)</code>', page).group(1)
    user = django_user_model.objects.get(username="erin")
    assert not user.has_usable_password() and user.email == "erin@example.org"
    assert Membership.objects.filter(tenant=a, user=user, role="member").exists()
    # shown once
    assert 'id="invite-link"' not in client.get(people_url(a)).content.decode()

    assert link.startswith(settings.A2A_PUBLIC_BASE_URL + "/console/welcome/"), link
    client.logout()
    path = urlsplit(link).path
    form_page = client.get(path, follow=True)
    assert "Welcome, erin" in form_page.content.decode()
    set_url = form_page.redirect_chain[-1][0]
    new = "a-long-and-new-password-9"
    response = client.post(set_url, {"new_password1": new, "new_password2": new})
    assert response.status_code == 302 and response["Location"] == reverse("console:login")
    assert client.login(username="erin", password=new)
    client.logout()
    assert "This link no longer works" in client.get(path, follow=True).content.decode()


def test_the_last_owner_stays_and_members_do_not_manage_people(client, world, django_user_model):
    a = world["a"]
    owner = Membership.objects.get(tenant=a, user=world["owner_a"])
    client.force_login(world["owner_a"])
    response = client.post(
        people_url(a, "console:person-role", membership_id=owner.pk),
        {"role": "member"},
        follow=True,
    )
    assert any("last owner" in m for m in _messages(response))
    response = client.post(
        people_url(a, "console:person-remove", membership_id=owner.pk), follow=True
    )
    assert any("last owner" in m for m in _messages(response))
    owner.refresh_from_db()
    assert owner.role == "owner"
    # a member sees the people but not their emails, and cannot change anything
    member = Membership.objects.get(tenant=a, user=world["member_a"])
    client.force_login(world["member_a"])
    page = client.get(people_url(a)).content.decode()
    assert "owner_a" in page and 'id="person-form"' not in page
    assert (
        client.post(
            people_url(a, "console:person-add"), {"username": "x", "role": "owner"}
        ).status_code
        == 403
    )
    assert (
        client.post(people_url(a, "console:person-remove", membership_id=member.pk)).status_code
        == 403
    )
    # another tenant's people are 404, memberships by id included
    client.force_login(world["member_b"])
    assert client.get(people_url(a)).status_code == 404
    b_member = Membership.objects.get(user=world["member_b"])
    client.force_login(world["owner_a"])
    response = client.post(people_url(a, "console:person-remove", membership_id=b_member.pk))
    assert response.status_code == 404
    assert Membership.objects.filter(pk=b_member.pk).exists()


# --- jobs ------------------------------------------------------------------------------------


def test_only_operators_revoke_jobs_and_a_bad_id_is_named(client, world):
    revoke = reverse("console:job-revoke")
    client.force_login(world["owner_a"])
    assert client.post(revoke, {"job": "00000000-0000-0000-0000-000000000000"}).status_code == 403
    client.force_login(world["operator"])
    response = client.post(revoke, {"job": "not-a-job"}, follow=True)
    assert any("'not-a-job' is not a job id" in m for m in _messages(response))


def test_an_owner_sets_a_python_agents_secrets_which_are_never_shown(client, world, settings):
    settings.A2A_PYTHON_EXECUTORS = ["tests.agents.sample_executors.ShoutingExecutor"]
    agent = world["agent_a"]
    secret = "console-secret-7f3a"
    client.force_login(world["owner_a"])
    form = {
        "name": agent.name,
        "description": agent.description,
        "version": agent.version,
        "executor_kind": "python",
        "executor_config": '{"class_path": "tests.agents.sample_executors.ShoutingExecutor"}',
        "executor_secrets": f'{{"suffix": "{secret}"}}',
        "skills": "[]",
        "default_input_modes": '["text/plain"]',
        "default_output_modes": '["text/plain"]',
        "visibility": "private",
        "anonymous_scope": "isolated",
        "worker_loss": "fail",
        "worker_loss_attempts": "3",
        "protocol_versions": ["1.0", "0.3", "0.1"],
    }
    response = client.post(agent_url(agent, "console:agent-edit"), form, follow=True)
    assert response.redirect_chain, response.content.decode()[:2000]
    agent.refresh_from_db()
    assert agent.executor_secrets_encrypted and secret not in agent.executor_secrets_encrypted
    edit = client.get(agent_url(agent, "console:agent-edit")).content.decode()
    assert "Set: suffix" in edit and secret not in edit
    assert secret not in client.get(agent_url(agent)).content.decode()
    # a name in both places is refused, without quoting the secret
    form["executor_config"] = (
        '{"class_path": "tests.agents.sample_executors.ShoutingExecutor", '
        '"init_kwargs": {"suffix": "!"}}'
    )
    response = client.post(agent_url(agent, "console:agent-edit"), form)
    assert response.status_code == 200 and "suffix" in response.content.decode()
    assert secret not in response.content.decode()


def test_a_bad_active_value_is_refused_not_taken_as_disable(client, world):
    agent = world["agent_a"]
    client.force_login(world["owner_a"])
    response = client.post(agent_url(agent, "console:agent-active"), {"active": "True"})
    assert response.status_code == 400 and b"'active' must be true or false" in response.content
    agent.refresh_from_db()
    assert agent.is_active


@override_settings(A2A_AUTH_CACHE_SECONDS=0.0)
def test_the_admin_keeps_the_consoles_rules_for_deleting_agents_and_the_last_owner(client, world):
    agent, a = world["agent_a"], world["a"]
    operator = world["operator"]
    operator.is_superuser = True
    operator.save()
    client.force_login(operator)
    # an active agent cannot be deleted from the admin, and there is no bulk delete
    delete = reverse("admin:agents_agent_delete", args=[agent.pk])
    assert client.get(delete).status_code == 403
    changelist = client.get(reverse("admin:agents_agent_changelist")).content.decode()
    assert "delete_selected" not in changelist
    # disabled a while ago, it goes through agent_delete
    Agent.objects.filter(pk=agent.pk).update(
        is_active=False, updated_at=timezone.now() - timedelta(seconds=5)
    )
    done = _task(agent, "TASK_STATE_COMPLETED")
    confirm = client.get(delete).content.decode()
    assert "with its 1 tasks" in confirm, confirm
    response = client.post(delete, {"post": "yes"})
    assert response.status_code == 302
    assert not Agent.objects.filter(pk=agent.pk).exists()
    assert not Task.objects.filter(pk=done.pk).exists()
    # the last owner can be neither demoted nor deleted
    owner = Membership.objects.get(tenant=a, role="owner")
    change = reverse("admin:agents_membership_change", args=[owner.pk])
    form = {"user": owner.user_id, "tenant": a.pk, "role": "member"}
    response = client.post(change, form)
    assert response.status_code == 200 and "last owner" in response.content.decode()
    assert client.get(reverse("admin:agents_membership_delete", args=[owner.pk])).status_code == 403
    owner.refresh_from_db()
    assert owner.role == "owner"


# --- acting on tasks as the person logged in -------------------------------------------------
#
# Cancel, Reply and Try it call the A2A operations with the person as the caller. The
# operations read and write on the process's database threads (a2a_platform.db), each on a
# connection of its own: the tests that reach them commit their data (transaction=True). A
# worker of the session's live platform may then run what they queue: each such test holds
# whether or not one does.

SOMEONE_ELSE = Principal(owner="key:someone-else")  # an API key's principal, not the person's


def _key_task(agent: Agent, state: int) -> Task:
    """A task an API key's client started, moved to `state` as a worker moves it, in one
    transaction: a worker of the session's live platform hears of its run at the commit only,
    and finds it taken."""
    with transaction.atomic():
        return task_create(agent, state=state, principal=SOMEONE_ELSE)


def _action_url(task: Task, name: str) -> str:
    return reverse(name, kwargs={"tenant_slug": task.tenant.slug, "task_id": str(task.pk)})


def _try_url(agent: Agent) -> str:
    return agent_url(agent, "console:agent-try")


def _post_json(client, url: str, body: Any = None, **headers: str):
    raw = body if isinstance(body, str) else json.dumps(body if body is not None else {})
    return client.post(url, raw, content_type="application/json", **headers)


def _records(task: Task) -> list[tuple[str, int, str]]:
    entries = LogEntry.objects.filter(
        content_type__app_label="tasks_app", content_type__model="task", object_id=str(task.pk)
    ).order_by("action_time", "id")
    return [(e.user.username, e.action_flag, e.change_message) for e in entries]


def test_a_member_may_not_cancel_or_reply_and_another_tenant_gets_404(client, world):
    # given: a task of tenant A that asks for input, started through a key
    task = _key_task(world["agent_a"], TaskState.TASK_STATE_INPUT_REQUIRED)
    messages_before = task.messages.count()

    # a member of A is refused, with the reason, in the page's JSON
    client.force_login(world["member_a"])
    for name, body in (("console:task-cancel", {}), ("console:task-reply", {"text": "hi"})):
        response = _post_json(client, _action_url(task, name), body)
        assert response.status_code == 403, (name, response.content)
        assert response.json() == {
            "ok": False,
            "message": f"Only owners of tenant {task.tenant.slug!r} (or operators) can do "
            "this; you are a member.",
        }
    page = client.get(_action_url(task, "console:task")).content.decode()
    assert 'id="actions"' not in page and 'id="actions-note"' in page

    # a person of tenant B gets 404 for A's task and A's agent, as for what does not exist
    client.force_login(world["owner_b"])
    for name, body in (("console:task-cancel", {}), ("console:task-reply", {"text": "hi"})):
        response = _post_json(client, _action_url(task, name), body)
        assert response.status_code == 404, (name, response.content)
        assert response.json() == {"ok": False, "message": "No such task."}
    response = _post_json(client, _try_url(world["agent_a"]), {"text": "hi"})
    assert response.status_code == 404 and response.json()["message"] == "No such agent."
    unknown = reverse(
        "console:task-cancel",
        kwargs={"tenant_slug": task.tenant.slug, "task_id": str(uuid.uuid4())},
    )
    assert _post_json(client, unknown).status_code == 404

    # nothing changed, nothing was recorded; a GET is not an action
    task.refresh_from_db()
    assert task.state == "TASK_STATE_INPUT_REQUIRED" and not task.cancel_requested
    assert task.messages.count() == messages_before
    assert _records(task) == []
    client.force_login(world["owner_a"])
    assert client.get(_action_url(task, "console:task-cancel")).status_code == 405


@pytest.mark.django_db(transaction=True)
def test_posts_without_the_csrf_token_are_refused_and_the_a2a_endpoint_refuses_cookies(world):
    # given: an owner's browser session, which checks CSRF as a browser's does
    task = _key_task(world["agent_a"], TaskState.TASK_STATE_INPUT_REQUIRED)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(world["owner_a"])
    urls = [
        _action_url(task, "console:task-cancel"),
        _action_url(task, "console:task-reply"),
        _try_url(world["agent_a"]),
    ]

    # without the token: refused before anything is done
    for url in urls:
        response = _post_json(browser, url, {"text": "hi"})
        assert response.status_code == 403, (url, response.status_code)
        assert "CSRF" in response.content.decode(), url
    task.refresh_from_db()
    assert task.state == "TASK_STATE_INPUT_REQUIRED" and _records(task) == []

    # with the token the task page carries, as task_actions.js sends it: done
    page = browser.get(_action_url(task, "console:task")).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = _post_json(
        browser, _action_url(task, "console:task-cancel"), {}, HTTP_X_CSRFTOKEN=token
    )
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "TASK_STATE_CANCELED"

    # the agent's own endpoint takes no cookie: the session is not a credential there
    send = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "x"}]}},
    }
    answer = browser.post(
        f"/a2a/{task.tenant.slug}/{task.agent.slug}/",
        send,
        content_type="application/json",
        HTTP_A2A_VERSION="1.0",
    )
    assert answer.status_code == 401 and "private" in answer.json()["error"]["message"]


@pytest.mark.django_db(transaction=True)
def test_an_owner_replies_and_an_operator_cancels_and_both_are_recorded(client, world, make_agent):
    # given: a task of tenant A that asks for input, started through an API key, of an agent
    # that then works for an hour (so a worker, if one takes the reply, is still on it)
    agent = make_agent(
        world["a"], "patient", config={"input_required": True, "delay_seconds": 3600}
    )
    task = _key_task(agent, TaskState.TASK_STATE_INPUT_REQUIRED)

    # the owner replies: the reply is the task's next message, for the agent's next turn
    client.force_login(world["owner_a"])
    response = _post_json(client, _action_url(task, "console:task-reply"), {"text": "more, please"})
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["ok"] and answer["task"]["id"] == str(task.pk)
    assert answer["recorded"]["by"] == "owner_a"
    assert "Replied (as owner)" in answer["recorded"]["what"]
    texts = [m.data["parts"] for m in task.messages.filter(role="ROLE_USER").order_by("position")]
    assert texts == [[{"text": "hi"}], [{"text": "more, please"}]]
    task.refresh_from_db()
    assert task.owner == "key:someone-else"  # still the client's task

    # an operator cancels it: at once if no run holds it, else once the worker stopped it
    client.force_login(world["operator"])
    response = _post_json(client, _action_url(task, "console:task-cancel"))
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "TASK_STATE_CANCELED"
    assert response.json()["task"]["status"]["state"] == "TASK_STATE_CANCELED"
    task.refresh_from_db()
    assert task.state == "TASK_STATE_CANCELED"

    # who did what, and when: in the admin log, on the task page and in the admin's history
    records = _records(task)
    assert [(who, flag) for who, flag, _ in records] == [("owner_a", CHANGE), ("operator", CHANGE)]
    assert re.fullmatch(
        r"Replied \(as owner\), message [0-9a-f-]{36}: “more, please”", records[0][2]
    )
    assert records[1][2] == "Canceled the task (as operator)."
    # and in the tenant's audit log, as whom and from where, without the message's text
    audited = AuditEvent.objects.filter(object_type="task", object_id=str(task.pk)).order_by("pk")
    assert list(audited.values_list("action", "actor", "source", "tenant_id")) == [
        ("reply", "user:owner_a", "127.0.0.1", world["a"].pk),
        ("cancel", "user:operator", "127.0.0.1", world["a"].pk),
    ]
    assert "more, please" not in str(list(audited.values()))
    client.force_login(world["member_a"])
    page = client.get(_action_url(task, "console:task")).content.decode()
    log = re.search(r'<ol class="action-log" id="action-log">(.*?)</ol>', page, re.S).group(1)
    assert log.index("owner_a") < log.index("operator")
    assert "Replied (as owner)" in log and "more, please" in log
    assert "Canceled the task (as operator)." in log
    operator = world["operator"]
    operator.is_superuser = True
    operator.save()
    client.force_login(operator)
    history = client.get(reverse("admin:tasks_app_task_history", args=[task.pk]))
    assert history.status_code == 200
    assert "Canceled the task (as operator)." in history.content.decode()

    # a canceled task is not canceled again, nor replied to: said, not recorded
    response = _post_json(client, _action_url(task, "console:task-cancel"))
    assert response.status_code == 400
    assert response.json()["message"] == (
        f"Task {task.pk} is already TASK_STATE_CANCELED; only unfinished tasks can be canceled."
    )
    response = _post_json(client, _action_url(task, "console:task-reply"), {"text": "late"})
    assert response.status_code == 400 and "accepts no more messages" in response.json()["message"]
    assert len(_records(task)) == 2


@pytest.mark.parametrize(
    ("body", "content_type", "status", "message"),
    [
        ("text=hi", "application/x-www-form-urlencoded", 415, "Send the message as JSON"),
        ("{not json", "application/json", 400, "The body is not valid JSON"),
        ('["hi"]', "application/json", 400, 'a JSON object with the message as "text"'),
        ('{"text": 5}', "application/json", 400, 'a JSON object with the message as "text"'),
        ('{"text": "  "}', "application/json", 400, "Type a message to send."),
        ('{"text": "a\\u0000b"}', "application/json", 400, "must not contain U+0000 (NUL)"),
        ('{"text": "\\ud800"}', "application/json", 400, "lone UTF-16 surrogate"),
    ],
)
def test_bad_input_is_answered_clearly_and_sends_nothing(
    client, world, body, content_type, status, message
):
    # (refused before any operation: nothing here needs to be committed)
    task = _key_task(world["agent_a"], TaskState.TASK_STATE_INPUT_REQUIRED)
    tasks_before = Task.objects.count()
    client.force_login(world["owner_a"])
    for url in (_action_url(task, "console:task-reply"), _try_url(world["agent_a"])):
        response = client.post(url, body, content_type=content_type)
        assert response.status_code == status, (url, response.content)
        assert response["Content-Type"] == "application/json"
        assert message in response.json()["message"], response.json()
    assert Task.objects.count() == tasks_before
    assert task.messages.count() == 1 and _records(task) == []


@pytest.mark.django_db(transaction=True)
def test_a_message_over_the_bound_is_refused_as_the_a2a_endpoint_refuses_it(
    client, world, settings
):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2000  # the setting A2A_MAX_REQUEST_BYTES sets
    agent = world["agent_a"]
    task = _key_task(agent, TaskState.TASK_STATE_INPUT_REQUIRED)
    text = "x" * 3000
    client.force_login(world["owner_a"])
    for url in (_action_url(task, "console:task-reply"), _try_url(agent)):
        response = _post_json(client, url, {"text": text})
        assert response.status_code == 413, (url, response.content)
        assert response.json()["message"] == (
            "The message is too large: a request may carry at most 2000 bytes "
            "(A2A_MAX_REQUEST_BYTES), as on the agent's A2A endpoints."
        )
    key = api_key_create(tenant=agent.tenant, name="k")[1]
    send = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}},
    }
    a2a = client.post(
        f"/a2a/{agent.tenant.slug}/{agent.slug}/",
        send,
        content_type="application/json",
        HTTP_A2A_VERSION="1.0",
        HTTP_X_API_KEY=key,
    )
    assert a2a.status_code == 413
    assert task.messages.count() == 1 and _records(task) == []


@pytest.mark.django_db(transaction=True)
def test_a_message_is_bounded_as_on_the_a2a_endpoints_not_as_a_console_form(
    client, world, settings
):
    # The console's forms have a smaller bound (A2A_CONSOLE_MAX_REQUEST_BYTES); a message sent
    # from the console is a message, bounded as the A2A bindings bound it.
    settings.A2A_CONSOLE_MAX_REQUEST_BYTES = 1000
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4000
    task = _key_task(world["agent_a"], TaskState.TASK_STATE_INPUT_REQUIRED)
    client.force_login(world["owner_a"])
    response = _post_json(client, _action_url(task, "console:task-reply"), {"text": "x" * 3000})
    assert response.status_code == 200, response.content
    assert task.messages.count() == 2 and len(_records(task)) == 1


@pytest.mark.django_db(transaction=True)
def test_a_running_task_takes_no_reply(client, world):
    agent = world["agent_a"]
    running = _key_task(agent, TaskState.TASK_STATE_WORKING)
    client.force_login(world["owner_a"])
    response = _post_json(client, _action_url(running, "console:task-reply"), {"text": "hurry"})
    assert response.status_code == 400
    assert "the agent is still on it" in response.json()["message"]
    assert _records(running) == []


@pytest.mark.django_db(transaction=True)
def test_a_disabled_agent_offers_no_try_it_refuses_sends_and_its_tasks_can_still_be_canceled(
    client, world
):
    agent = world["agent_a"]
    task = _key_task(agent, TaskState.TASK_STATE_INPUT_REQUIRED)
    client.force_login(world["owner_a"])
    assert 'id="tryit-form"' in client.get(agent_url(agent)).content.decode()
    client.post(agent_url(agent, "console:agent-active"), {"active": "false"})

    # the agent's page has a note instead of Try it; the endpoint refuses
    page = client.get(agent_url(agent)).content.decode()
    assert 'id="tryit"' not in page and "tryit.js" not in page
    note = re.search(r'id="tryit-off-note">(.*?)</p>', page, re.S).group(1)
    assert "This agent is disabled: it takes no messages" in note
    tasks_before = Task.objects.count()
    response = _post_json(client, _try_url(agent), {"text": "hello?"})
    assert response.status_code == 409
    assert response.json()["message"] == (
        "Agent alpha is disabled: it takes no messages until an owner enables it again on its page."
    )
    assert Task.objects.count() == tasks_before

    # its task: no reply (a note on the page, a refusal from the endpoint), but a cancel
    page = client.get(_action_url(task, "console:task")).content.decode()
    assert 'id="reply-form"' not in page and 'id="reply-off-note"' in page
    assert 'id="cancel-form"' in page
    response = _post_json(client, _action_url(task, "console:task-reply"), {"text": "more"})
    assert response.status_code == 409 and "Agent alpha is disabled" in response.json()["message"]
    response = _post_json(client, _action_url(task, "console:task-cancel"))
    assert response.status_code == 200 and response.json()["state"] == "TASK_STATE_CANCELED"
    assert [m for _, _, m in _records(task)] == ["Canceled the task (as owner)."]


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_owners_and_members_act_as_themselves_on_the_live_platform(
    live_platform, make_tenant, make_agent, make_key, django_user_model
):
    # given: a tenant with an owner and a member, a private agent that asks for input and a
    # slow one, and tasks of both started by an API key's principal
    tenant = make_tenant()
    for name, role in (("live-owner", "owner"), ("live-member", "member")):
        person = django_user_model.objects.create_user(name, password=f"pw-{name}")
        Membership.objects.create(user=person, tenant=tenant, role=role)
    asker = make_agent(tenant, "asker", config={"input_required": True})
    slow = make_agent(tenant, "slow", config={"delay_seconds": 60})
    key = make_key(tenant, principal="a-client")
    base = live_platform.url
    with httpx.Client(timeout=60) as http:
        asked = rpc_send(http, Target(live_platform.agent_url(asker), key, asker), "first")["task"]
        running = rpc_send_nonblocking(
            http, Target(live_platform.agent_url(slow), key, slow), "take your time"
        )
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asked
    wait_until(
        lambda: Task.objects.get(pk=running).state == "TASK_STATE_WORKING",
        what="the slow agent to start working",
    )

    # the member uses Try it: a task of their own, streamed as it happens, and recorded
    with httpx.Client(timeout=60) as http:
        console_login(http, base, "live-member", "pw-live-member")
        token = _page_token(http, f"{base}/console/t/{tenant.slug}/a/asker/")
        headers = {"X-CSRFToken": token, "Accept": "text/event-stream"}
        with http.stream(
            "POST",
            f"{base}/console/t/{tenant.slug}/a/asker/try/",
            json={"text": "hi"},
            headers=headers,
        ) as response:
            assert response.status_code == 200, response.read()
            assert response.headers["content-type"].startswith("text/event-stream")
            read = parse_sse(list(response.iter_lines()))
        # but may not cancel or reply
        for action, body in (("cancel", {}), ("reply", {"text": "no"})):
            refused = http.post(
                f"{base}/console/t/{tenant.slug}/tasks/{asked['id']}/{action}/",
                json=body,
                headers={"X-CSRFToken": token},
            )
            assert refused.status_code == 403 and "you are a member" in refused.json()["message"]
    frames = [e["data"] for e in read.events]
    tried = frames[0]["task"]
    assert tried["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert [e["id"] for e in read.events][0] == f"{tried['id']}:1"
    assert frames[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert Task.objects.get(pk=tried["id"]).owner == "user:live-member"
    (record,) = _records(Task.objects.get(pk=tried["id"]))
    assert record[:2] == ("live-member", ADDITION)
    assert record[2].startswith("Sent from Try it (as member), message ") and "“hi”" in record[2]

    # the owner replies to the key's task, which the agent then finishes, and cancels the
    # running one, which the agent stops
    with httpx.Client(timeout=60) as http:
        console_login(http, base, "live-owner", "pw-live-owner")
        token = _page_token(http, f"{base}/console/t/{tenant.slug}/tasks/{asked['id']}/")
        replied = http.post(
            f"{base}/console/t/{tenant.slug}/tasks/{asked['id']}/reply/",
            json={"text": "second"},
            headers={"X-CSRFToken": token},
        )
        assert replied.status_code == 200, replied.text
        canceled = http.post(
            f"{base}/console/t/{tenant.slug}/tasks/{running}/cancel/",
            json={},
            headers={"X-CSRFToken": token},
        )
        assert canceled.status_code == 200, canceled.text
        assert canceled.json()["state"] == "TASK_STATE_CANCELED"
    wait_until(
        lambda: Task.objects.get(pk=asked["id"]).state == "TASK_STATE_COMPLETED",
        what="the agent to finish the task after the console's reply",
    )
    done = Task.objects.get(pk=asked["id"])
    assert done.status_message["parts"] == [{"text": "Echoed: first\nsecond"}]
    assert done.owner == "key:a-client"
    assert [r[:2] for r in _records(done)] == [("live-owner", CHANGE)]
    assert _records(Task.objects.get(pk=running))[0][2] == "Canceled the task (as owner)."


def _page_token(http: httpx.Client, url: str) -> str:
    page = http.get(url)
    assert page.status_code == 200, (url, page.status_code)
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
