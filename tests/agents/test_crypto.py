"""Encryption at rest: Fernet with rotatable keys from settings, or a key derived from
SECRET_KEY, and a bad key stops start-up naming A2A_ENCRYPTION_KEYS."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from agents.crypto import DecryptionFailed, decrypt, derived_key, encrypt, reencrypt

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
