"""What is recorded of the changes to what people configure: the watched models (tenants,
agents, API keys, signing keys, memberships, plans, issuers, accounts and groups), each saved or
deleted instance a row of the log, written in the change's own transaction.

Model signals, which the project otherwise keeps away from its logic: the console, the admin,
the services and the commands all change these models, and only a receiver on the model itself
hears every one of them without each path remembering to record. The receivers decide nothing
and change nothing but the log, and are connected to these models only: no A2A request path
saves them (a key's `last_used_at` is an UPDATE of its own, no signal), and the task, event,
usage and push tables, which the hot paths write, have none.

Before a change the stored row is read once (`pre_save`: only the fields the save writes), so
the row holds each changed field as [before, after]; a create holds every field set, a delete
every field as it was. Secrets are never written: a field whose name says it holds one
(`*_encrypted`, `*_hash`, `password`, `secret`, `token`, `private`) is "••••" when set and
"(changed)" when changed; an agent's executor secrets are told apart by name (which ones were
set, changed or removed), never by value. What a bulk `QuerySet.update()` or `bulk_create`
does is not heard: the paths that change these models save each instance.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import ObjectDoesNotExist
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save

from agents.models import Agent, ApiKey, Issuer, Membership, Plan, SigningKey, Tenant

from .models import CHANGED, MASK
from .services import event_record

# A value longer than this (as JSON) is cut: a description of thousands of characters says
# enough in its first thousand.
VALUE_MAX = 1000
# The attribute a saved instance carries its stored values on, from pre_save to post_save.
_BEFORE = "_audit_before"
# Field names that say the field holds a secret (or a digest of one).
_SECRET_SUFFIXES = ("_encrypted", "_hash")
_SECRET_WORDS = ("password", "secret", "token", "private")
# Fields never recorded: times the platform keeps itself, and what it caches.
_ALWAYS_IGNORED = frozenset({"created_at", "updated_at"})


def is_secret(name: str) -> bool:
    return name.endswith(_SECRET_SUFFIXES) or any(word in name for word in _SECRET_WORDS)


@dataclass(frozen=True)
class Watched:
    object_type: str
    tenant_of: Callable[[Any], int | None]
    label_of: Callable[[Any], str]
    ignored: frozenset[str] = frozenset()


def _username(membership: Membership) -> str:
    try:
        return str(membership.user.get_username())
    except ObjectDoesNotExist:
        return f"user {membership.user_id}"


WATCHED: dict[type[models.Model], Watched] = {}


def _watch() -> None:
    User = get_user_model()
    WATCHED.update(
        {
            Tenant: Watched("tenant", lambda t: t.pk, lambda t: t.slug),
            Agent: Watched("agent", lambda a: a.tenant_id, lambda a: a.slug),
            ApiKey: Watched(
                "api_key",
                lambda k: k.tenant_id,
                lambda k: f"{k.name} ({k.prefix}…)",
                frozenset({"last_used_at"}),  # written on every call, with .update()
            ),
            SigningKey: Watched("signing_key", lambda k: k.tenant_id, lambda k: k.kid),
            Membership: Watched(
                "membership", lambda m: m.tenant_id, lambda m: f"{_username(m)} ({m.role})"
            ),
            Plan: Watched("plan", lambda p: None, lambda p: p.name),
            Issuer: Watched(
                "issuer",
                lambda i: i.tenant_id,
                lambda i: f"{i.name} ({i.issuer})",
                frozenset({"discovered"}),  # what discovery said, refreshed by the platform
            ),
            User: Watched(
                "user",
                lambda u: None,
                lambda u: str(u.get_username()),
                frozenset({"last_login", "date_joined"}),
            ),
            Group: Watched("group", lambda g: None, lambda g: g.name),
        }
    )


def _fields(model: type[models.Model]) -> list[models.Field[Any, Any]]:
    watched = WATCHED[model]
    return [
        f
        for f in model._meta.concrete_fields
        if not f.primary_key and f.name not in _ALWAYS_IGNORED | watched.ignored
    ]


def _jsonable(value: Any) -> Any:
    """The value as the row's JSON holds it (times as ISO text, ids as numbers), cut at
    VALUE_MAX characters of JSON."""
    text = json.dumps(value, cls=DjangoJSONEncoder)
    if len(text) > VALUE_MAX:
        shown = value if isinstance(value, str) else text
        return f"{shown[: VALUE_MAX - 1]}… ({len(shown):,} characters)"
    return json.loads(text)


def _same(old: Any, new: Any) -> bool:
    """Whether a stored value and the instance's are one (the database may hand back another
    type than the instance holds: compared as JSON too)."""
    if old == new:
        return True
    return bool(
        json.dumps(old, cls=DjangoJSONEncoder, sort_keys=True)
        == json.dumps(new, cls=DjangoJSONEncoder, sort_keys=True)
    )


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def _masked(value: Any) -> Any:
    return None if _empty(value) else MASK


# --- an agent's executor secrets: which names were set, changed or removed ------------------

_EXECUTOR_SECRETS = "executor_secrets_encrypted"


def _executor_secrets(before: str, after: str) -> dict[str, list[Any]]:
    from agents.crypto import DecryptionFailed
    from agents.executors.secrets import executor_secrets_open

    try:
        old, new = executor_secrets_open(before), executor_secrets_open(after)
    except (DecryptionFailed, ValueError):
        # Sealed with a key no longer configured: that they changed is all there is to say.
        return {"executor_secrets": [_masked(before), CHANGED if after else None]}
    changes: dict[str, list[Any]] = {}
    for name in sorted(old.keys() | new.keys()):
        if name not in new:
            changes[f"executor_secrets.{name}"] = [MASK, None]
        elif name not in old:
            changes[f"executor_secrets.{name}"] = [None, MASK]
        elif old[name] != new[name]:
            changes[f"executor_secrets.{name}"] = [MASK, CHANGED]
    return changes


# --- the diff -------------------------------------------------------------------------------


def _stored(instance: models.Model, names: list[str]) -> dict[str, Any]:
    model = type(instance)
    fields = {f.name: f for f in model._meta.concrete_fields}
    row = model._base_manager.filter(pk=instance.pk).values(*(fields[n].attname for n in names))
    found = row.first()
    if found is None:
        return {}
    return {n: found[fields[n].attname] for n in names}


def _current(instance: models.Model, fields: list[models.Field[Any, Any]]) -> dict[str, Any]:
    return {f.name: getattr(instance, f.attname) for f in fields}


def _changes(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, list[Any]]:
    """Field -> [before, after] of the fields that differ; secrets masked. `before` None: a
    create (every field set); `after` None: a delete (every field as it was)."""
    names = (after or before or {}).keys()
    changes: dict[str, list[Any]] = {}
    for name in names:
        old = None if before is None else before.get(name)
        new = None if after is None else after.get(name)
        if before is not None and after is not None and _same(old, new):
            continue
        if (before is None and _empty(new)) or (after is None and _empty(old)):
            continue
        if name == _EXECUTOR_SECRETS:
            changes.update(_executor_secrets(old or "", new or ""))
        elif is_secret(name):
            changes[name] = [_masked(old), _masked(new)]
            if before is not None and after is not None and not _empty(new):
                changes[name][1] = CHANGED
        else:
            changes[name] = [_jsonable(old), _jsonable(new)]
    return changes


def _related_label(field: models.Field[Any, Any], pk: Any) -> Any:
    """A foreign key's value as the log shows it: what it points to and its id, read now (a
    row deleted meanwhile is its id alone)."""
    if pk is None:
        return None
    model = field.related_model
    related = model._base_manager.filter(pk=pk).first()  # type: ignore[union-attr]
    if related is None:
        return f"#{pk}"
    watched = WATCHED.get(type(related))
    label = watched.label_of(related) if watched else str(related)
    return f"{label} (#{pk})"


def _related_named(instance: models.Model, changes: dict[str, list[Any]]) -> None:
    """Foreign keys in `changes` named by what they point to, not their bare ids."""
    for field in _fields(type(instance)):
        pair = changes.get(field.name)
        if field.is_relation and pair is not None:
            changes[field.name] = [_related_label(field, pk) for pk in pair]


def _action(instance: models.Model, created: bool, changes: dict[str, list[Any]]) -> str:
    if created:
        if isinstance(instance, SigningKey) and (
            SigningKey.objects.filter(tenant_id=instance.tenant_id).exclude(pk=instance.pk).exists()
        ):
            return "rotate"
        return "create"
    if set(changes) == {"is_active"}:
        return "enable" if changes["is_active"][1] else "disable"
    if "revoked_at" in changes and changes["revoked_at"][0] is None:
        return "revoke"
    if isinstance(instance, SigningKey) and set(changes) == {"retired_at"}:
        return "retire"
    return "update"


def _record(instance: models.Model, *, action: str, changes: dict[str, list[Any]]) -> None:
    watched = WATCHED[type(instance)]
    event_record(
        tenant_id=watched.tenant_of(instance),
        action=action,
        object_type=watched.object_type,
        object_id=str(instance.pk),
        object_label=watched.label_of(instance),
        changes=changes,
    )


# --- the receivers ----------------------------------------------------------------------------


def _before_save(
    sender: type[models.Model],
    instance: models.Model,
    raw: bool = False,
    update_fields: frozenset[str] | None = None,
    **_: Any,
) -> None:
    if raw or instance._state.adding:
        return  # fixtures load as they are; a new row has no before
    names = [f.name for f in _fields(sender)]
    if update_fields is not None:
        names = [
            f.name for f in _fields(sender) if f.name in update_fields or f.attname in update_fields
        ]
    # Only what this save writes: a save of fields the log ignores reads nothing.
    setattr(instance, _BEFORE, _stored(instance, names) if names else None)


def _after_save(
    sender: type[models.Model],
    instance: models.Model,
    created: bool,
    raw: bool = False,
    **_: Any,
) -> None:
    if raw:
        return
    fields = _fields(sender)
    if created:
        changes = _changes(None, _current(instance, fields))
    else:
        before = instance.__dict__.pop(_BEFORE, None)
        if not before:
            return  # nothing recorded was written (or the row was not there to compare)
        after = {n: value for n, value in _current(instance, fields).items() if n in before}
        changes = _changes(before, after)
        if not changes:
            return
    action = _action(instance, created, changes)
    _related_named(instance, changes)
    _record(instance, action=action, changes=changes)


def _after_delete(sender: type[models.Model], instance: models.Model, **_: Any) -> None:
    changes = _changes(_current(instance, _fields(sender)), None)
    _related_named(instance, changes)
    _record(instance, action="delete", changes=changes)


# Many-to-many fields recorded: an account's groups and permissions, a group's permissions.
_M2M_BEFORE = "_audit_m2m_before"


def _m2m_names(instance: models.Model, field: str) -> list[str]:
    related = getattr(instance, field).all()
    if related.model is Permission:
        rows = related.values_list("content_type__app_label", "codename")
        return sorted(f"{app}.{codename}" for app, codename in rows)
    return sorted(str(name) for name in related.values_list("name", flat=True))


def _m2m_receiver(field: str) -> Callable[..., None]:
    def changed(
        sender: type[models.Model], instance: models.Model, action: str, reverse: bool, **_: Any
    ) -> None:
        # From the other side (a group's user_set) the account's field is not what changed.
        if reverse or type(instance) not in WATCHED:
            return
        if action in ("pre_add", "pre_remove", "pre_clear"):
            setattr(instance, _M2M_BEFORE, _m2m_names(instance, field))
        elif action in ("post_add", "post_remove", "post_clear"):
            before = instance.__dict__.pop(_M2M_BEFORE, None) or []
            after = _m2m_names(instance, field)
            if before != after:
                _record(instance, action="update", changes={field: [before, after]})

    return changed


def capture_connect() -> None:
    """Connect the receivers to the watched models (once; AuditConfig.ready)."""
    if WATCHED:
        return
    _watch()
    for model in WATCHED:
        pre_save.connect(_before_save, sender=model, dispatch_uid=f"audit-pre-{model._meta}")
        post_save.connect(_after_save, sender=model, dispatch_uid=f"audit-post-{model._meta}")
        post_delete.connect(_after_delete, sender=model, dispatch_uid=f"audit-del-{model._meta}")
    User = get_user_model()
    for model, field in ((User, "groups"), (User, "user_permissions"), (Group, "permissions")):
        through = getattr(model, field).through
        m2m_changed.connect(
            _m2m_receiver(field),
            sender=through,
            weak=False,
            dispatch_uid=f"audit-m2m-{through._meta}",
        )
