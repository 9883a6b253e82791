"""Form pieces for editing an agent, shared by the admin and the console: each executor kind's
fields, generated from its config model, its write-only secrets, and "test connection".

Every kind in the registry gets one group of form fields, named `cfg__<kind>__<key>` (a dash in
the kind's name becomes `_`), built from its pydantic config model: the label from the key, the
help text from the field's description, the initial value from its default, the input from its
annotation (text, URL, number with the model's bounds, checkbox, select, or a JSON textarea).
The fields themselves check nothing: the kind's model does, through
`agents.validation.agent_form_check`, and each of its errors is put back on the field it names.

A kind with fixed secret names (`ExecutorKind.secret_names`) gets a password input per name,
`secret__<kind>__<name>`, and a tick to remove a stored one, `secret_remove__<kind>__<name>`:
empty keeps what is stored, a typed value replaces that one secret. When the kind changes, the
stored secrets the new kind does not take are dropped. The `python` kind keeps the free-form
JSON object of secrets (`ExecutorSecretsField`). No page ever shows a secret: the inputs
render empty, also when the form comes back with errors, and the help texts say only whether
one is set.

The versions an agent serves (`Agent.protocol_versions`, stored "1.0,0.3,0.1") are one
checkbox per version (`ProtocolVersionsField`), in both.

The whole config as one JSON object (`executor_config`) is still taken: the admin shows it as
an editable field (a changed object there wins over the fields), and the console, which does
not show it, takes it when a script posts it. Then the secrets follow the earlier rules (the
free-form field sets or clears them all; nothing keeps them).
"""

from __future__ import annotations

import asyncio
import json
import logging
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from asgiref.sync import async_to_sync
from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.forms.forms import DeclarativeFieldsMetaclass
from django.utils.html import escape
from pydantic import ValidationError as PydanticValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from a2a_platform.ssrf import UnsafeUrl
from a2a_platform.versions import SUPPORTED_VERSIONS, V0_1, V0_3, V1_0

from . import limits
from .crypto import DecryptionFailed
from .executors import REGISTRY, ExecutorKind, executor_connection_test, executor_kind_choices
from .executors.outbound import ConnectionTestFailed
from .executors.secrets import FIELD as SECRETS_FIELD
from .executors.secrets import (
    SECRET_MAX_LENGTH,
    executor_secret_names,
    executor_secrets_open,
    executor_secrets_validate,
)
from .models import Agent, Tenant, versions_parse
from .services import agent_secrets_set
from .validation import SECRETS_CLEAR_FIELD, agent_form_check
from .wording import problem_text, where

logger = logging.getLogger(__name__)

CONFIG_FIELD = "executor_config"

# How long "test connection" may take, whatever the kind's own timeouts: a person waits.
CONNECTION_TEST_TIMEOUT_SECONDS = 20.0

SECRETS_HELP = (
    "Write-only: a JSON object of name → secret string, e.g. "
    '{"api_key": "…"}, given to a python executor\'s constructor as keyword arguments beside '
    "init_kwargs (a name may be in one of the two only). Stored encrypted; never shown again. "
    "Leave empty to keep the current secrets; a new object replaces them all."
)
SECRET_SET = "Set — leave empty to keep it."
SECRET_NOT_SET = "Not set."
SECRET_UNREADABLE = (
    "Stored, but no configured encryption key opens it: type it again, or remove it."
)

_WORDS = {"url": "URL", "api": "API", "id": "ID", "json": "JSON", "http": "HTTP"}


class SecretTextarea(forms.Textarea):
    """A textarea that never renders a value, not even what was just typed into a form that
    comes back with errors."""

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, None, attrs)
        context["widget"]["value"] = None
        return context


class JSONInputField(forms.JSONField):
    """Django's JSONField for the agent forms, where JSON nested deeper than Python's decoder
    goes (a RecursionError, which Django's field lets through as a server error) is a field
    error like any other text that is not JSON."""

    default_error_messages = {
        "invalid": "Not valid JSON.",
        "too_deep": "Not valid JSON here: it is nested too deeply.",
    }

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except RecursionError:
            raise ValidationError(self.error_messages["too_deep"], code="too_deep") from None

    def bound_data(self, data: Any, initial: Any) -> Any:
        try:
            return super().bound_data(data, initial)
        except RecursionError:
            return forms.fields.InvalidJSONInput(data)


class ExecutorSecretsField(forms.Field):
    """A JSON object of name -> secret. Empty means "keep the current secrets" (None); else the
    checked secrets as a dict, which replace the current ones. Errors never quote a value."""

    widget = SecretTextarea(attrs={"rows": 3, "class": "mono", "autocomplete": "off"})

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("label", "Executor secrets")
        kwargs.setdefault("help_text", SECRETS_HELP)
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> dict[str, str] | None:
        if value is None or not str(value).strip():
            return None
        try:
            data = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            # The decoder's message may quote the text: say only that it is not an object.
            raise ValidationError(
                'Not valid JSON: give an object of name → secret, e.g. {"api_key": "…"}.'
            ) from None
        try:
            return executor_secrets_validate(data)
        except ValidationError as exc:
            raise ValidationError(exc.message_dict[SECRETS_FIELD]) from None

    def has_changed(self, initial: Any, data: Any) -> bool:
        return bool(data and str(data).strip())


def executor_secrets_status(agent: Agent) -> str:
    """What pages may show of an agent's secrets: "Not set", or "Set: " and their names."""
    if not agent.executor_secrets_encrypted:
        return "Not set"
    try:
        names = executor_secret_names(agent.executor_secrets_encrypted)
    except DecryptionFailed:
        return "Set, but no configured encryption key opens them: set them again or clear them"
    return "Set: " + ", ".join(names)


# --- the versions an agent serves --------------------------------------------------------------

VERSION_LABELS = {
    V1_0: "1.0",
    V0_3: "0.3 (JSON-RPC without a version header, REST under v1/)",
    V0_1: "0.1 (the early JSON-RPC dialect: tasks/send, sessionId)",
}


def _versions_named(value: Any) -> list[str]:
    """The names in a posted or stored value: one per checkbox, or "1.0,0.3" as stored."""
    items = [value] if isinstance(value, str) else list(value or ())
    return [name.strip() for item in items for name in str(item).split(",") if name.strip()]


class ProtocolVersionsField(forms.MultipleChoiceField):
    """`Agent.protocol_versions` as one checkbox per version the platform speaks, cleaned to
    the stored form ("1.0,0.3", newest first); at least one. A script may post the stored
    form as well as one value per version."""

    default_error_messages = {
        "required": "Choose at least one A2A version for the agent to serve.",
        "invalid_choice": "%(value)s is not an A2A version the platform speaks (it speaks "
        + ", ".join(SUPPORTED_VERSIONS)
        + ").",
    }

    def __init__(self, **kwargs: Any) -> None:
        # What the model's CharField hands its form field, and the admin's text input for it.
        for name in ("max_length", "empty_value"):
            kwargs.pop(name, None)
        widget = kwargs.pop("widget", None)
        if not getattr(widget, "allow_multiple_selected", False):
            widget = forms.CheckboxSelectMultiple
        kwargs.setdefault("choices", [(v, VERSION_LABELS[v]) for v in SUPPORTED_VERSIONS])
        super().__init__(widget=widget, **kwargs)

    def to_python(self, value: Any) -> list[str]:
        return _versions_named(value)

    def clean(self, value: Any) -> str:  # type: ignore[override]
        named = set(super().clean(value))
        return ",".join(v for v in SUPPORTED_VERSIONS if v in named)

    def prepare_value(self, value: Any) -> Any:
        return list(versions_parse(value)) if isinstance(value, str) else value

    def has_changed(self, initial: Any, data: Any) -> bool:
        if self.disabled:
            return False
        return set(_versions_named(initial)) != set(_versions_named(data))


# --- each kind's fields, from its config model -----------------------------------------------


def kind_slug(kind: str) -> str:
    """The kind's name as it appears in field names and CSS classes."""
    return kind.replace("-", "_")


def label_of(key: str) -> str:
    words = [_WORDS.get(word, word) for word in key.split("_")]
    return " ".join(words)[:1].upper() + " ".join(words)[1:]


@dataclass(frozen=True)
class ConfigInput:
    """One config key of a kind, as a form field."""

    kind: str
    key: str
    name: str  # the form field's
    shape: Literal["text", "number", "bool", "choice", "json"]
    optional: bool  # None is a value: an empty input means None
    required: bool  # the model has no default


@dataclass(frozen=True)
class SecretInput:
    """One secret name of a kind with fixed names, as a password input and a remove tick."""

    kind: str
    secret: str
    name: str
    remove_name: str


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    if get_origin(annotation) in (Union, types.UnionType):
        args = get_args(annotation)
        others = [a for a in args if a is not type(None)]
        if len(others) == 1:
            return others[0], len(others) < len(args)
        return Any, type(None) in args
    return annotation, False


def _bounds(info: FieldInfo) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in info.metadata:
        for bound in ("ge", "gt", "le", "lt", "max_length"):
            value = getattr(item, bound, None)
            if value is not None:
                found[bound] = value
    return found


def _initial_value(spec: ConfigInput, value: Any) -> Any:
    if spec.shape == "bool":
        return bool(value)
    if value is None:
        return ""
    if spec.shape == "json":
        return json.dumps(value, indent=2)
    return value


def _config_input(kind: str, key: str, info: FieldInfo) -> tuple[ConfigInput, forms.Field]:
    annotation, optional = _unwrap_optional(info.annotation)
    bounds = _bounds(info)
    name = f"cfg__{kind_slug(kind)}__{key}"
    shape: Literal["text", "number", "bool", "choice", "json"]
    widget: forms.Widget
    if annotation is bool:
        shape, widget = "bool", forms.CheckboxInput()
    elif annotation in (int, float):
        attrs: dict[str, Any] = {"step": "1" if annotation is int else "any"}
        if "ge" in bounds:
            attrs["min"] = bounds["ge"]
        if "le" in bounds:
            attrs["max"] = bounds["le"]
        shape, widget = "number", forms.NumberInput(attrs=attrs)
    elif get_origin(annotation) is Literal:
        choices = [(str(v), str(v)) for v in get_args(annotation)]
        if optional:
            choices.insert(0, ("", "—"))
        shape, widget = "choice", forms.Select(choices=choices)
    elif annotation is str:
        attrs = {"maxlength": bounds["max_length"]} if "max_length" in bounds else {}
        if "url" in key.split("_"):
            widget = forms.URLInput(attrs={**attrs, "class": "mono"})
        elif bounds.get("max_length", 0) > 2000:
            widget = forms.Textarea(attrs={**attrs, "rows": 4})
        else:
            widget = forms.TextInput(attrs=attrs)
        shape = "text"
    else:  # a dict, a list, anything else: JSON
        shape = "json"
        widget = forms.Textarea(
            attrs={
                "rows": 3,
                "class": "mono",
                "spellcheck": "false",
                "maxlength": limits.EXECUTOR_CONFIG_JSON,
            }
        )
    spec = ConfigInput(kind, key, name, shape, optional, info.is_required())
    # The fields accept anything: the kind's model is the one rule (only the chosen kind's
    # group is checked at all), and its errors come back onto these fields.
    field: forms.Field
    if shape == "bool":
        field = forms.BooleanField(required=False, widget=widget)
    else:
        field = forms.CharField(required=False, widget=widget, strip=shape != "json")
    field.label = label_of(key)
    field.help_text = escape(info.description or "")
    field.config_required = spec.required  # type: ignore[attr-defined]  # shown as required
    default = info.get_default(call_default_factory=True)
    if default is not PydanticUndefined:
        field.initial = _initial_value(spec, default)
    return spec, field


def _secret_input(kind: str, secret: str) -> tuple[SecretInput, forms.Field, forms.Field]:
    spec = SecretInput(
        kind,
        secret,
        f"secret__{kind_slug(kind)}__{secret}",
        f"secret_remove__{kind_slug(kind)}__{secret}",
    )
    field = forms.CharField(
        required=False,
        strip=False,
        label=label_of(secret),
        # render_value=False: never in the page, not even after a validation error.
        widget=forms.PasswordInput(
            render_value=False,
            attrs={
                "autocomplete": "new-password",
                "class": "mono",
                "maxlength": SECRET_MAX_LENGTH,
            },
        ),
        help_text=SECRET_NOT_SET,
    )
    remove = forms.BooleanField(required=False, label=f"Remove the stored {label_of(secret)}")
    return spec, field, remove


def _kind_fields() -> tuple[
    dict[str, list[ConfigInput]], dict[str, list[SecretInput]], dict[str, forms.Field]
]:
    inputs: dict[str, list[ConfigInput]] = {}
    secrets: dict[str, list[SecretInput]] = {}
    fields: dict[str, forms.Field] = {}
    for kind in REGISTRY.values():
        inputs[kind.name], secrets[kind.name] = [], []
        for key, info in kind.config_model.model_fields.items():
            spec, field = _config_input(kind.name, key, info)
            inputs[kind.name].append(spec)
            fields[spec.name] = field
        for secret in kind.secret_names:
            secret_spec, field, remove = _secret_input(kind.name, secret)
            secrets[kind.name].append(secret_spec)
            fields[secret_spec.name], fields[secret_spec.remove_name] = field, remove
    return inputs, secrets, fields


KIND_INPUTS, KIND_SECRETS, _KIND_FIELDS = _kind_fields()

# Every POST parameter that may carry a secret: for sensitive_post_parameters on the views.
SECRET_POST_FIELDS: tuple[str, ...] = (
    SECRETS_FIELD,
    *(spec.name for specs in KIND_SECRETS.values() for spec in specs),
)


def kind_field_names(kind: str, stored: Iterable[str] = ()) -> list[str]:
    """A kind's group, in order: its config fields, then per secret the input and (for one
    that is stored) the remove tick."""
    names = [spec.name for spec in KIND_INPUTS[kind]]
    stored = set(stored)
    for spec in KIND_SECRETS[kind]:
        names.append(spec.name)
        if spec.secret in stored:
            names.append(spec.remove_name)
    return names


def kind_testable(kind: str) -> bool:
    spec = REGISTRY.get(kind)
    return spec is not None and spec.connection_test is not None


@dataclass
class KindGroup:
    """What a page shows of one kind: its legend, its fields, whether it can be tested."""

    kind: ExecutorKind
    slug: str
    fields: list[forms.BoundField]
    offered: bool
    note: str

    @property
    def testable(self) -> bool:
        return self.offered and self.kind.connection_test is not None


# The base holds the generated fields as declared fields, so that the admin (which builds its
# form class from the names in its fieldsets) knows them.
_KindFieldsBase: type[forms.Form] = DeclarativeFieldsMetaclass(
    "_KindFieldsBase", (forms.Form,), {"__module__": __name__, **_KIND_FIELDS}
)


class AgentSecretsFormMixin(forms.Form):
    """The free-form executor secrets of an agent form: set (a new object replaces them all),
    kept (empty), or cleared (the tick). Its clean() must call
    `agents.validation.agent_form_check`, which checks the config against these secrets."""

    executor_secrets = ExecutorSecretsField()
    executor_secrets_clear = forms.BooleanField(
        required=False,
        label="Clear the executor secrets",
        help_text="Remove every secret of this agent.",
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get(SECRETS_CLEAR_FIELD) and cleaned.get(SECRETS_FIELD) is not None:
            self.add_error(SECRETS_FIELD, "Give new secrets or clear them, not both.")
        return cleaned

    def save_executor_secrets(self, agent: Agent) -> None:
        """Store what the form says of the secrets (after the agent is saved; in its
        transaction): new ones replace the old, a tick clears them, nothing keeps them."""
        if self.cleaned_data.get(SECRETS_CLEAR_FIELD):
            agent_secrets_set(agent=agent, secrets={})
        elif self.cleaned_data.get(SECRETS_FIELD) is not None:
            agent_secrets_set(agent=agent, secrets=self.cleaned_data[SECRETS_FIELD])

    def save(self, commit: bool = True) -> Any:
        agent = super().save(commit=commit)  # type: ignore[misc]
        if commit:
            self.save_executor_secrets(agent)
        return agent


class AgentKindFormMixin(AgentSecretsFormMixin, _KindFieldsBase):  # type: ignore[misc,valid-type]
    """Each kind's group of fields and secrets: `class F(AgentKindFormMixin, forms.ModelForm)`
    with an `executor_kind` field and an `executor_config` field; its clean() calls
    `agent_kind_check` (instead of agent_form_check, which it calls)."""

    # True where executor_config is an editable field of the page (the admin): a changed
    # object there is used. False where the page does not show it (the console): a posted
    # one is used (scripts).
    config_json_editable = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kinds_not_offered: dict[str, str] = {}
        agent = self._agent()
        self.stored_secret_names: set[str] | None = set()
        if agent.executor_secrets_encrypted:
            try:
                self.stored_secret_names = set(
                    executor_secret_names(agent.executor_secrets_encrypted)
                )
            except DecryptionFailed:
                self.stored_secret_names = None  # stored, unreadable
        if agent.pk and agent.executor_kind in KIND_INPUTS:
            config = agent.executor_config if isinstance(agent.executor_config, dict) else {}
            for spec in KIND_INPUTS[agent.executor_kind]:
                if spec.key in config:
                    self.initial.setdefault(spec.name, _initial_value(spec, config[spec.key]))
        for specs in KIND_SECRETS.values():
            for secret in specs:
                self.fields[secret.name].help_text = self._secret_status(secret.secret)
        allowed = list(settings.A2A_PYTHON_EXECUTORS)
        class_path = self.fields.get("cfg__python__class_path")
        if class_path is not None:
            class_path.help_text += escape(
                " This platform allows "
                + (", ".join(allowed) if allowed else "none (A2A_PYTHON_EXECUTORS)")
                + "."
            )

    def _agent(self) -> Agent:
        agent = getattr(self, "instance", None)
        return agent if isinstance(agent, Agent) else Agent()

    def _secret_status(self, secret: str) -> str:
        if self.stored_secret_names is None:
            return SECRET_UNREADABLE
        return SECRET_SET if secret in self.stored_secret_names else SECRET_NOT_SET

    def kind_not_offered(self, kind: str, note: str) -> None:
        """Show the kind's group, with `note`, but take nothing from it."""
        self.kinds_not_offered[kind] = note
        for name in kind_field_names(kind):
            self.fields[name].disabled = True

    # --- what the pages show ---------------------------------------------------------------

    def kind_groups(self) -> list[KindGroup]:
        stored = self.stored_secret_names or set()
        groups = []
        for kind in REGISTRY.values():
            names = kind_field_names(kind.name, stored)
            if kind.secret_clashes is not None:  # free names: the JSON object of secrets
                names += [SECRETS_FIELD, SECRETS_CLEAR_FIELD]
            groups.append(
                KindGroup(
                    kind=kind,
                    slug=kind_slug(kind.name),
                    fields=[self[name] for name in names if name in self.fields],
                    offered=kind.name not in self.kinds_not_offered,
                    note=self.kinds_not_offered.get(kind.name, ""),
                )
            )
        return groups

    def layout(self) -> list[dict[str, Any]]:
        """The page in order: the fields up to the kind, one section per kind, the rest."""
        kind_fields = set(_KIND_FIELDS) | {CONFIG_FIELD, SECRETS_FIELD, SECRETS_CLEAR_FIELD}
        plain = [name for name in self.fields if name not in kind_fields]
        at = plain.index("executor_kind") + 1 if "executor_kind" in plain else len(plain)
        groups = self.kind_groups()
        sections: list[dict[str, Any]] = [{"fields": [self[n] for n in plain[:at]]}]
        for number, group in enumerate(groups):
            sections.append(
                {
                    "group": group,
                    "fields": group.fields,
                    "first": number == 0,
                    "last": number == len(groups) - 1,
                }
            )
        sections.append({"fields": [self[n] for n in plain[at:]]})
        return sections

    # --- checking and saving -----------------------------------------------------------------

    def config_from_json(self) -> bool:
        """Whether the whole config comes from the JSON field rather than the kind's group."""
        if CONFIG_FIELD not in self.fields or self.add_prefix(CONFIG_FIELD) not in self.data:
            return False
        return not self.config_json_editable or CONFIG_FIELD in self.changed_data

    def agent_kind_check(self, cleaned: dict[str, Any], fields: Iterable[str]) -> None:
        """Build the config from the chosen kind's group (or take the JSON object), decide the
        secrets the agent will have, check it all with agent_form_check, and put each config
        error on the field it names."""
        kind = cleaned.get("executor_kind")
        from_json = self.config_from_json()
        config: dict[str, Any] = {}
        if kind in REGISTRY and not from_json:
            cleaned[CONFIG_FIELD] = config = self._group_config(kind, cleaned)
        if kind in REGISTRY:
            self._secrets_plan(kind, cleaned, from_json)
        agent_form_check(self, cleaned, fields)
        if kind in REGISTRY and not from_json:
            self._errors_to_fields(kind, config)

    def _group_config(self, kind: str, cleaned: dict[str, Any]) -> dict[str, Any]:
        config: dict[str, Any] = {}
        for spec in KIND_INPUTS[kind]:
            raw = cleaned.get(spec.name)
            if spec.shape == "bool":
                config[spec.key] = bool(raw)
                continue
            if raw in (None, ""):
                if spec.optional:
                    config[spec.key] = None
                continue  # the model's default, or its "required"
            if spec.shape == "json":
                try:
                    config[spec.key] = json.loads(raw)
                except json.JSONDecodeError as exc:
                    self.add_error(
                        spec.name,
                        f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).",
                    )
                except RecursionError:
                    self.add_error(spec.name, "Not valid JSON here: it is nested too deeply.")
                continue
            config[spec.key] = raw
        return config

    def _secrets_plan(self, kind: str, cleaned: dict[str, Any], from_json: bool) -> None:
        """Put into `cleaned` the secrets the agent will have (SECRETS_FIELD: a dict that
        replaces them all; None: keep them), from the kind's inputs, or from the free-form
        field as before."""
        spec = REGISTRY[kind]
        typed: dict[str, str] = {}
        removed: set[str] = set()
        for secret in KIND_SECRETS[kind]:
            value = cleaned.get(secret.name) or ""
            remove = bool(cleaned.get(secret.remove_name))
            if value and remove:
                self.add_error(secret.name, "Type a new one or remove the stored one, not both.")
            elif value:
                try:
                    executor_secrets_validate({secret.secret: value})
                except ValidationError as exc:
                    self.add_error(secret.name, exc.message_dict[SECRETS_FIELD])
                else:
                    typed[secret.secret] = value
            elif remove:
                removed.add(secret.secret)
        freeform = cleaned.get(SECRETS_FIELD) is not None or cleaned.get(SECRETS_CLEAR_FIELD)
        if freeform:
            if typed or removed:
                self.add_error(
                    SECRETS_FIELD,
                    f"Give the secrets in the {kind} fields or here, not both.",
                )
            return  # the free-form field says it all, as before
        agent = self._agent()
        kind_changed = bool(agent.pk) and agent.executor_kind != kind
        if not (typed or removed or (kind_changed and not from_json)):
            return  # keep them
        try:
            stored = executor_secrets_open(agent.executor_secrets_encrypted)
        except DecryptionFailed:
            if not typed:
                return  # kept, and agent_form_check says they cannot be opened
            stored = {}  # unreadable: replaced by what was typed
        takes_all = spec.secret_clashes is not None
        merged = {
            name: value
            for name, value in stored.items()
            if (takes_all or name in spec.secret_names) and name not in removed
        }
        merged.update(typed)
        if merged != stored:
            cleaned[SECRETS_FIELD] = dict(sorted(merged.items()))

    def _errors_to_fields(self, kind: str, config: dict[str, Any]) -> None:
        """agent_form_check reports the config under executor_config: put each problem on the
        field of the group it names; the rest stays there (the page shows it by the groups)."""
        names = {spec.key: spec.name for spec in KIND_INPUTS[kind]}
        freeform_used = bool(str(self.data.get(self.add_prefix(SECRETS_FIELD)) or "").strip())
        secret_errors = self._errors.get(SECRETS_FIELD)
        if secret_errors and KIND_SECRETS[kind] and not freeform_used:
            # Of the stored secrets (e.g. none of the keys opens them): on the kind's first
            # secret input, where the page shows them.
            del self._errors[SECRETS_FIELD]
            self.add_error(KIND_SECRETS[kind][0].name, list(secret_errors))
        errors = self._errors.pop(CONFIG_FIELD, None)
        if not errors:
            return
        model = REGISTRY[kind].config_model
        try:
            model.model_validate(config)
        except PydanticValidationError as exc:
            # The model's errors one by one, each on its field and named by the field's label,
            # instead of the lines agent_form_check got, named by the config's keys.
            for error in exc.errors():
                key, *inner = error["loc"]
                if key in names:
                    subject = " ".join([label_of(str(key)), where(inner)]).strip()
                    self.add_error(names[str(key)], problem_text(error, subject))
                else:
                    self.add_error(
                        CONFIG_FIELD,
                        problem_text(error, where(error["loc"]) or "The config", known=names),
                    )
            return
        for message in errors:
            key, sep, problem = message.partition(": ")
            if sep and key in names:
                self.add_error(names[key], problem)
            else:
                self.add_error(CONFIG_FIELD, message)

    def secrets_to_store(self) -> dict[str, str] | None:
        """The secrets the agent will have; None when it keeps those it has."""
        if self.cleaned_data.get(SECRETS_CLEAR_FIELD):
            return {}
        secrets = self.cleaned_data.get(SECRETS_FIELD)
        return dict(secrets) if secrets is not None else None

    def _post_clean(self) -> None:
        super()._post_clean()
        instance = getattr(self, "instance", None)
        if isinstance(instance, Agent) and CONFIG_FIELD in self.cleaned_data:
            # Also when it is {} (a kind with no config): the ModelForm would keep the old one.
            instance.executor_config = self.cleaned_data[CONFIG_FIELD]


# --- "test connection" -----------------------------------------------------------------------


class ConnectionTestForm(AgentKindFormMixin):
    """The kind, its group and its secrets as a page posts them, checked as a save would check
    them (the SSRF guard included), for "test connection"."""

    executor_kind = forms.ChoiceField(choices=executor_kind_choices)
    executor_config = JSONInputField(required=False)

    def __init__(self, data: Mapping[str, Any], *, agent: Agent | None = None) -> None:
        self.instance = agent if agent is not None else Agent()
        super().__init__(data)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        self.agent_kind_check(cleaned, (CONFIG_FIELD,))
        return cleaned

    def secrets(self) -> dict[str, str]:
        """What the agent's executor would be given: typed secrets, else those stored."""
        secrets = self.secrets_to_store()
        if secrets is None:
            return executor_secrets_open(self.instance.executor_secrets_encrypted)
        return secrets


def agent_connection_test_answer(
    data: Mapping[str, Any], *, agent: Agent | None = None, tenant: Tenant | None = None
) -> tuple[dict[str, Any], int]:
    """Check the posted kind and group, then reach the kind's outside service for `agent`, or
    for a new agent of `tenant` named by the posted slug: the answer for the page,
    `{"ok": bool, "message": str}` (with "errors", field -> messages, when the form is
    refused), and its HTTP status. With no kind posted, an existing agent is tested as stored.
    Blocking: the check resolves host names and the test runs to its end."""
    if agent is not None and not data.get("executor_kind"):
        data = {
            "executor_kind": agent.executor_kind,
            CONFIG_FIELD: json.dumps(agent.executor_config),
        }
    kind = str(data.get("executor_kind") or "")
    if kind in REGISTRY and not kind_testable(kind):
        return {
            "ok": False,
            "message": f"The {kind} executor reaches no outside service: there is nothing to test.",
        }, 400
    form = ConnectionTestForm(data, agent=agent)
    form.is_valid()
    if agent is not None:
        agent_path = f"{agent.tenant.slug}/{agent.slug}"
    else:
        # The test names the agent it is for (a webhook's ping is signed with its tenant's key).
        slug = str(data.get("slug") or "").strip()
        problem = _slug_problem(slug)
        if problem:  # not a field of this form: the page's slug input
            form.errors["slug"] = form.error_class([problem])
        if tenant is None:
            form.errors["tenant"] = form.error_class(["Choose the agent's tenant first."])
        agent_path = f"{tenant.slug if tenant else ''}/{slug}"
    if form.errors:
        errors = {field: list(messages) for field, messages in form.errors.items()}
        problems = [
            f"{form.fields[field].label if field in form.fields else field.title()}: "
            f"{' '.join(messages)}"
            for field, messages in errors.items()
        ]
        return {"ok": False, "message": "Not tested: " + " ".join(problems), "errors": errors}, 400
    config, secrets = form.cleaned_data[CONFIG_FIELD], form.secrets()
    try:
        message = async_to_sync(_connection_test)(kind, config, secrets, agent_path)
    except ConnectionTestFailed as exc:
        return {"ok": False, "message": str(exc)}, 200
    except UnsafeUrl as exc:
        return {"ok": False, "message": exc.reason}, 200
    except TimeoutError:
        return {
            "ok": False,
            "message": f"No answer within {CONNECTION_TEST_TIMEOUT_SECONDS:g} s.",
        }, 200
    except Exception as exc:  # noqa: BLE001 - the page gets an answer, the log the kind
        # Its message may carry what was sent: neither shown nor logged.
        logger.warning("connection test of a %s agent raised %s", kind, type(exc).__name__)
        return {"ok": False, "message": f"The test failed: {type(exc).__name__}."}, 200
    return {"ok": True, "message": message}, 200


def _slug_problem(slug: str) -> str:
    if not slug:
        return "Give the agent's slug first: the test names the agent it is for."
    try:
        Agent._meta.get_field("slug").clean(slug, None)
    except ValidationError as exc:
        return " ".join(exc.messages)
    return ""


async def _connection_test(
    kind: str, config: dict[str, Any], secrets: dict[str, str], agent_path: str
) -> str:
    return await asyncio.wait_for(
        executor_connection_test(kind=kind, config=config, secrets=secrets, agent_path=agent_path),
        CONNECTION_TEST_TIMEOUT_SECONDS,
    )
