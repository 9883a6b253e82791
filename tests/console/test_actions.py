"""The console acting, not only looking: an agent edited, disabled, enabled and deleted (with
what happens to its tasks), the people of a tenant added, invited, re-roled and removed, and a
job revoked; each refused to those who may not, and each refusal a message that says why."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from agents.cache import forget_all
from agents.models import Agent, ApiKey, Membership
from agents.services import api_key_create
from tasks_app.models import Task

from .test_agent_pages import agent_url

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
