"""Encryption at rest: Fernet with rotatable keys from settings, or a key derived from
SECRET_KEY, and a bad key stops start-up naming A2A_ENCRYPTION_KEYS; keys that do not read the
secrets already stored are found at start (encryption_keys_check)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from agents.crypto import (
    DecryptionFailed,
    decrypt,
    derived_key,
    encrypt,
    encryption_keys_check,
    reencrypt,
)
from agents.services import signing_key_active, signing_key_rotate, tenant_create

ROOT = Path(__file__).resolve().parent.parent.parent
OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def test_round_trip_and_fresh_tokens(settings):
    settings.A2A_ENCRYPTION_KEYS = [OLD]
    token = encrypt("Bearer s3cr3t ✓")
    assert "s3cr3t" not in token
    assert decrypt(token) == "Bearer s3cr3t ✓"
    # Fernet tokens carry a random IV: equal secrets do not look equal at rest.
    assert encrypt("Bearer s3cr3t ✓") != token


def test_rotation_first_key_encrypts_every_key_decrypts(settings):
    # given a secret stored under the old key
    settings.A2A_ENCRYPTION_KEYS = [OLD]
    old_token = encrypt("secret")
    # when a new key is put first
    settings.A2A_ENCRYPTION_KEYS = [NEW, OLD]
    new_token = encrypt("secret")
    # then both decrypt, new secrets use the new key, and re-encryption moves old ones over
    assert decrypt(old_token) == decrypt(new_token) == "secret"
    moved = reencrypt(old_token)
    assert Fernet(NEW.encode()).decrypt(new_token.encode()) == b"secret"
    settings.A2A_ENCRYPTION_KEYS = [NEW]
    assert decrypt(new_token) == decrypt(moved) == "secret"
    with pytest.raises(DecryptionFailed, match="A2A_ENCRYPTION_KEYS"):
        decrypt(old_token)


def test_unset_keys_derive_one_from_the_secret_key(settings):
    settings.A2A_ENCRYPTION_KEYS = []
    settings.SECRET_KEY = "one-secret"
    token = encrypt("secret")
    assert Fernet(derived_key("one-secret").encode()).decrypt(token.encode()) == b"secret"
    assert derived_key("one-secret") != derived_key("another-secret")
    settings.SECRET_KEY = "another-secret"
    with pytest.raises(DecryptionFailed):
        decrypt(token)


def test_a_bad_key_in_settings_raises_improperly_configured(settings):
    settings.A2A_ENCRYPTION_KEYS = [NEW, "not-a-fernet-key"]
    with pytest.raises(ImproperlyConfigured, match="A2A_ENCRYPTION_KEYS"):
        encrypt("secret")


@pytest.mark.django_db
def test_the_keys_check_passes_the_keys_that_stored_the_secrets_and_names_others(settings):
    # given a signing key stored under the key derived from the suite's secret key
    settings.A2A_ENCRYPTION_KEYS = []
    stored_under = settings.SECRET_KEY
    signing_key_active(tenant=tenant_create(slug="keys"))
    encryption_keys_check()
    # when the platform starts with another secret key, or a new key alone
    settings.SECRET_KEY = "another-secret"
    with pytest.raises(ImproperlyConfigured, match="derived from DJANGO_SECRET_KEY") as derived:
        encryption_keys_check()
    settings.A2A_ENCRYPTION_KEYS = [NEW]
    with pytest.raises(ImproperlyConfigured, match="No key of A2A_ENCRYPTION_KEYS") as listed:
        encryption_keys_check()
    # then it is stopped in one line naming the table; listing the old key after the new passes
    assert "agents.SigningKey" in str(derived.value) and "\n" not in str(derived.value)
    assert "agents.SigningKey" in str(listed.value) and "\n" not in str(listed.value)
    settings.A2A_ENCRYPTION_KEYS = [NEW, derived_key(stored_under)]
    encryption_keys_check()


@pytest.mark.django_db
def test_the_keys_check_reads_the_oldest_secrets_too(settings):
    # given the oldest signing key under OLD, and newer ones under NEW after a rotation (the
    # suite's own key stays listed for what other tests may have stored)
    suite = derived_key(settings.SECRET_KEY)
    settings.A2A_ENCRYPTION_KEYS = [OLD]
    tenant = tenant_create(slug="rotated")
    oldest = signing_key_active(tenant=tenant)
    settings.A2A_ENCRYPTION_KEYS = [NEW, OLD, suite]
    for _ in range(5):
        signing_key_rotate(tenant=tenant)
    # when OLD is dropped before its secrets were re-encrypted
    settings.A2A_ENCRYPTION_KEYS = [NEW, suite]
    # then the check finds the oldest row, although the newest ones read well
    with pytest.raises(ImproperlyConfigured, match=f"agents.SigningKey {oldest.pk},"):
        encryption_keys_check()


def _start(**env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("A2A_", "DJANGO_"))}
    environment.update(
        {
            "DJANGO_SETTINGS_MODULE": "a2a_platform.settings",
            "DJANGO_SECRET_KEY": "x",
            "A2A_VAR_DIR": "/tmp/a2a-settings-test",
            **env,
        }
    )
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(len(settings.A2A_ENCRYPTION_KEYS))"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "value",
    ["not-a-fernet-key", f"{NEW},short", " , "],
    ids=["garbage", "one-bad-of-two", "only-commas"],
)
def test_a_bad_key_setting_stops_start_up(value):
    result = _start(A2A_ENCRYPTION_KEYS=value)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "A2A_ENCRYPTION_KEYS" in result.stderr


def test_keys_are_read_from_a_file(tmp_path):
    key_file = tmp_path / "keys"
    key_file.write_text(f"{NEW},{OLD}\n")
    result = _start(A2A_ENCRYPTION_KEYS_FILE=str(key_file))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2"
