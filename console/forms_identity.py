"""The console's form for a token issuer (agents.models.Issuer), written as a person thinks of
one: audiences one per line, the algorithms as checkboxes, the scopes each operation needs as a
space-separated line per operation. The model's own checks run in the service
(agents.services.issuer_create / issuer_update) and their errors come back on these fields."""

from __future__ import annotations

from typing import Any

from django import forms

from agents import limits
from agents.models import SCOPE_OPERATIONS, TOKEN_ALGORITHMS, Issuer, Tenant

SCOPE_PREFIX = "scopes_"
_OPERATION_HELP = {
    "send": "SendMessage and SendStreamingMessage.",
    "read": "GetTask, ListTasks, SubscribeToTask and the extended agent card.",
    "cancel": "CancelTask.",
    "push": "Push notification configs (create, get, list, delete), and a send that sets one.",
}


def _field_length(name: str) -> int:
    length: int = Issuer._meta.get_field(name).max_length
    return length


class IssuerForm(forms.Form):
    name = forms.CharField(
        max_length=_field_length("name"),
        required=False,
        help_text="A label for this page, e.g. 'Okta (staff)'. Empty: the issuer URL.",
    )
    issuer = forms.URLField(
        max_length=_field_length("issuer"),
        label="Issuer URL",
        assume_scheme="https",
        help_text="Exactly the iss claim of its tokens, e.g. "
        "https://login.example.com/realms/main. Its discovery document is read at "
        "<issuer>/.well-known/openid-configuration.",
    )
    audiences = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}),
        error_messages={"required": "List at least one audience, one per line."},
        help_text="One per line: the aud claims accepted, typically the agent's URL (below) "
        f"or an API identifier your provider puts in tokens. At most {limits.ISSUER_AUDIENCES}.",
    )
    algorithms = forms.MultipleChoiceField(
        choices=[(a, a) for a in TOKEN_ALGORITHMS],
        widget=forms.CheckboxSelectMultiple,
        initial=["RS256", "ES256"],
        label="Signature algorithms",
        help_text="Those its tokens are signed with. Asymmetric only: HMAC and 'none' never are.",
    )
    user_claim = forms.CharField(
        max_length=_field_length("user_claim"),
        required=False,
        initial="sub",
        help_text="The claim that names the user, who owns the tasks the token creates. Empty: "
        "sub.",
    )
    jwks_uri = forms.URLField(
        max_length=_field_length("jwks_uri"),
        required=False,
        label="Key set URL (jwks_uri)",
        assume_scheme="https",
        help_text="Only for a provider without a discovery document; empty: the discovery "
        "document's jwks_uri.",
    )

    def __init__(
        self, *args: Any, tenant: Tenant, issuer: Issuer | None = None, **kwargs: Any
    ) -> None:
        if issuer is not None:
            kwargs.setdefault("initial", issuer_initial(issuer))
        super().__init__(*args, **kwargs)
        self.tenant, self.issuer = tenant, issuer
        for operation in SCOPE_OPERATIONS:
            self.fields[SCOPE_PREFIX + operation] = forms.CharField(
                required=False,
                label=f"Scopes for {operation}",
                widget=forms.TextInput(attrs={"class": "mono"}),
                help_text=f"{_OPERATION_HELP[operation]} Space-separated; empty: none needed.",
            )

    def scope_fields(self) -> list[forms.BoundField]:
        return [self[SCOPE_PREFIX + operation] for operation in SCOPE_OPERATIONS]

    def main_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in ("name", "issuer", "audiences", "algorithms", "user_claim")]

    def clean_issuer(self) -> str:
        url: str = self.cleaned_data["issuer"]
        others = Issuer.objects.filter(tenant=self.tenant, issuer=url)
        if self.issuer is not None:
            others = others.exclude(pk=self.issuer.pk)
        if others.exists():
            raise forms.ValidationError(f"Tenant {self.tenant.slug!r} has this issuer already.")
        return url

    def clean_audiences(self) -> list[str]:
        lines = [line.strip() for line in self.cleaned_data["audiences"].splitlines()]
        audiences = list(dict.fromkeys(line for line in lines if line))
        if not audiences:
            raise forms.ValidationError("List at least one audience.")
        return audiences

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        scopes = {}
        for operation in SCOPE_OPERATIONS:
            names = (cleaned.get(SCOPE_PREFIX + operation) or "").split()
            if names:
                scopes[operation] = list(dict.fromkeys(names))
        cleaned["scopes"] = scopes
        return cleaned

    def issuer_fields(self) -> dict[str, Any]:
        """The registration as checked here, for agents.services.issuer_create/_update."""
        data = self.cleaned_data
        return {
            "name": data["name"].strip(),
            "issuer": data["issuer"],
            "jwks_uri": data["jwks_uri"],
            "audiences": data["audiences"],
            "algorithms": [a for a in TOKEN_ALGORITHMS if a in data["algorithms"]],
            "user_claim": data["user_claim"].strip() or "sub",
            "scopes": data["scopes"],
        }

    def add_service_errors(self, errors: dict[str, list[str]]) -> None:
        """The model's errors (agents.services) on the fields that show them."""
        for field, messages in errors.items():
            if field == "scopes":
                # The model names the operation in its message; each line is that operation's.
                for message in messages:
                    operation = next(
                        (o for o in SCOPE_OPERATIONS if repr(o) in message), SCOPE_OPERATIONS[0]
                    )
                    self.add_error(SCOPE_PREFIX + operation, message)
            else:
                self.add_error(field if field in self.fields else None, messages)


def issuer_initial(issuer: Issuer) -> dict[str, Any]:
    """The issuer as the form shows it."""
    initial: dict[str, Any] = {
        "name": issuer.name,
        "issuer": issuer.issuer,
        "jwks_uri": issuer.jwks_uri,
        "audiences": "\n".join(issuer.audiences or []),
        "algorithms": list(issuer.algorithms or []),
        "user_claim": issuer.user_claim,
    }
    for operation in SCOPE_OPERATIONS:
        initial[SCOPE_PREFIX + operation] = " ".join(issuer.required_scopes(operation))
    return initial
