"""Push signatures: per-tenant ES256 keys made on first use, rotated and retired, published as
JWKS, and the X-A2A-Signature JWT that binds a push body to its task."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from datetime import timedelta

import jwt
import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.utils import timezone

from agents import services
from agents.crypto import decrypt
from agents.models import SigningKey, Tenant
from agents.selectors import jwks_for
from agents.services import signing_key_active, signing_key_retire, signing_key_rotate
from agents.signing import PushSignatureInvalid, push_signature, push_signature_verify

BODY = json.dumps({"statusUpdate": {"taskId": "task-1", "status": {"state": "completed"}}}).encode()


def kids(jwks):
    return [k["kid"] for k in jwks["keys"]]


def test_a_key_is_made_on_first_use_and_then_reused(make_tenant):
    tenant = make_tenant()
    assert not SigningKey.objects.filter(tenant=tenant).exists()
    key = signing_key_active(tenant=tenant)
    assert signing_key_active(tenant=tenant) == key
    assert SigningKey.objects.filter(tenant=tenant).count() == 1
    assert key.algorithm == "ES256"
    assert key.public_jwk["kty"] == "EC" and key.public_jwk["crv"] == "P-256"
    assert key.public_jwk["kid"] == key.kid
    assert key.public_jwk["alg"] == "ES256" and key.public_jwk["use"] == "sig"
    # Only public members are published.
    assert "d" not in key.public_jwk


@pytest.mark.django_db(transaction=True)
def test_first_use_from_two_processes_at_once_makes_one_key(make_tenant, monkeypatch):
    tenant = make_tenant()
    make_key = services._signing_key_new

    def slow_make_key(tenant: Tenant) -> SigningKey:
        time.sleep(0.2)  # widen the window between "no key yet" and the insert
        return make_key(tenant)

    monkeypatch.setattr(services, "_signing_key_new", slow_make_key)
    barrier = threading.Barrier(4)
    kids_seen: list[str] = []

    def sign() -> None:
        try:
            barrier.wait()
            kids_seen.append(signing_key_active(tenant=tenant).kid)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=sign) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(kids_seen) == 4 and len(set(kids_seen)) == 1
    assert SigningKey.objects.filter(tenant=tenant).count() == 1


def test_private_keys_are_not_stored_in_plain_text(make_tenant):
    key = signing_key_active(tenant=make_tenant())
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT private_key_encrypted FROM {SigningKey._meta.db_table} WHERE id = %s",
            [key.pk],
        )
        (raw,) = cursor.fetchone()
    assert "PRIVATE KEY" not in raw
    assert "-----BEGIN PRIVATE KEY-----" in decrypt(raw)


def test_rotation_signs_with_the_new_key_and_keeps_the_old_one_published(make_tenant):
    tenant = make_tenant()
    old = signing_key_active(tenant=tenant)
    old_token = push_signature(tenant=tenant, body=BODY, task_id="task-1")
    # when
    new = signing_key_rotate(tenant=tenant)
    # then
    assert new.kid != old.kid
    assert signing_key_active(tenant=tenant) == new
    new_token = push_signature(tenant=tenant, body=BODY, task_id="task-1")
    assert jwt.get_unverified_header(new_token)["kid"] == new.kid
    assert kids(jwks_for(tenant=tenant)) == [new.kid, old.kid]
    # A push signed just before the rotation still verifies.
    push_signature_verify(old_token, BODY, jwks_for(tenant=tenant), task_id="task-1")


def test_retired_keys_are_not_published(make_tenant):
    tenant = make_tenant()
    old = signing_key_active(tenant=tenant)
    token = push_signature(tenant=tenant, body=BODY, task_id="task-1")
    new = signing_key_rotate(tenant=tenant)
    # when
    signing_key_retire(signing_key=old)
    # then
    assert kids(jwks_for(tenant=tenant)) == [new.kid]
    assert old.kid not in kids(jwks_for())
    with pytest.raises(PushSignatureInvalid, match="kid"):
        push_signature_verify(token, BODY, jwks_for(tenant=tenant))


def test_a_retirement_in_the_future_keeps_publishing_until_then(make_tenant):
    tenant = make_tenant()
    old = signing_key_active(tenant=tenant)
    new = signing_key_rotate(tenant=tenant)
    signing_key_retire(signing_key=old, at=timezone.now() + timedelta(minutes=10))
    assert kids(jwks_for(tenant=tenant)) == [new.kid, old.kid]
    assert signing_key_active(tenant=tenant) == new


def test_the_active_key_cannot_be_retired_before_a_rotation(make_tenant):
    key = signing_key_active(tenant=make_tenant())
    with pytest.raises(ValueError, match="rotate"):
        signing_key_retire(signing_key=key)


def test_jwks_for_all_tenants_and_for_one(make_tenant):
    acme, globex = make_tenant(), make_tenant()
    acme_key = signing_key_active(tenant=acme)
    globex_key = signing_key_active(tenant=globex)
    assert kids(jwks_for(tenant=acme)) == [acme_key.kid]
    assert {acme_key.kid, globex_key.kid} <= set(kids(jwks_for()))
    # An inactive tenant publishes nothing.
    globex.is_active = False
    globex.save()
    assert globex_key.kid not in kids(jwks_for())
    assert kids(jwks_for(tenant=globex)) == []


def test_a_signature_verifies_with_the_published_jwks(make_tenant, settings):
    settings.A2A_PUBLIC_BASE_URL = "https://agents.example.com"
    tenant = make_tenant()
    token = push_signature(tenant=tenant, body=BODY, task_id="task-1")
    claims = push_signature_verify(
        token, BODY, jwks_for(tenant=tenant), task_id="task-1", issuer="https://agents.example.com"
    )
    assert claims["iss"] == "https://agents.example.com"
    assert claims["task_id"] == "task-1"
    assert claims["body_sha256"] == hashlib.sha256(BODY).hexdigest()
    assert claims["exp"] - claims["iat"] == 300
    assert claims["jti"]
    header = jwt.get_unverified_header(token)
    assert header["alg"] == "ES256"
    assert header["kid"] == signing_key_active(tenant=tenant).kid
    # Each push gets its own jti, so receivers can drop replays.
    other = push_signature(tenant=tenant, body=BODY, task_id="task-1")
    assert jwt.decode(other, options={"verify_signature": False})["jti"] != claims["jti"]


def test_a_tampered_body_fails(make_tenant):
    tenant = make_tenant()
    token = push_signature(tenant=tenant, body=BODY, task_id="task-1")
    with pytest.raises(PushSignatureInvalid, match="body"):
        push_signature_verify(token, BODY + b" ", jwks_for(tenant=tenant))


def test_a_wrong_task_id_fails(make_tenant):
    tenant = make_tenant()
    token = push_signature(tenant=tenant, body=BODY, task_id="task-1")
    with pytest.raises(PushSignatureInvalid, match="task"):
        push_signature_verify(token, BODY, jwks_for(tenant=tenant), task_id="task-2")


def test_an_expired_signature_fails(make_tenant):
    tenant = make_tenant()
    token = push_signature(
        tenant=tenant, body=BODY, task_id="task-1", now=timezone.now() - timedelta(minutes=6)
    )
    with pytest.raises(PushSignatureInvalid, match="expired"):
        push_signature_verify(token, BODY, jwks_for(tenant=tenant), leeway=0)


def test_another_tenants_key_or_a_forged_signature_fails(make_tenant):
    acme, globex = make_tenant(), make_tenant()
    token = push_signature(tenant=globex, body=BODY, task_id="task-1")
    signing_key_active(tenant=acme)
    # A receiver pinned to acme's JWKS refuses globex's signatures.
    with pytest.raises(PushSignatureInvalid, match="kid"):
        push_signature_verify(token, BODY, jwks_for(tenant=acme))
    header, payload, signature = token.split(".")
    forged = f"{header}.{payload}.{signature[:-4]}AAAA"
    with pytest.raises(PushSignatureInvalid):
        push_signature_verify(forged, BODY, jwks_for(tenant=globex))
    # alg=none is never accepted, whatever the header says.
    unsigned = jwt.encode(
        jwt.decode(token, options={"verify_signature": False}),
        None,
        algorithm="none",
        headers={"kid": jwt.get_unverified_header(token)["kid"]},
    )
    with pytest.raises(PushSignatureInvalid):
        push_signature_verify(unsigned, BODY, jwks_for(tenant=globex))


def test_the_admin_shows_keys_and_rotates_them(make_tenant, client):
    tenant = make_tenant()
    old = signing_key_active(tenant=tenant)
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(admin)
    page = client.get(f"/admin/agents/tenant/{tenant.pk}/change/")
    assert page.status_code == 200
    assert old.kid in page.content.decode()
    assert "PRIVATE" not in page.content.decode()
    # when
    response = client.post(
        "/admin/agents/tenant/",
        {"action": "rotate_signing_key", "_selected_action": [tenant.pk]},
    )
    # then
    assert response.status_code == 302
    assert signing_key_active(tenant=tenant) != old
    response = client.post(
        "/admin/agents/signingkey/",
        {"action": "retire", "_selected_action": [old.pk]},
    )
    assert response.status_code == 302
    assert kids(jwks_for(tenant=tenant)) == [signing_key_active(tenant=tenant).kid]
    assert client.get(f"/admin/agents/signingkey/{old.pk}/change/").status_code == 200
