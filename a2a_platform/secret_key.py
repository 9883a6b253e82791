"""The secrets a platform started without DJANGO_SECRET_KEY keeps in its var dir, each mode
0600: the key itself (`secret_key`, made once and read by every process and command that runs
with that var dir), and the demo's API key (`demo_api_keys/<tenant>`), which `manage.py
seed_demo` keeps there while the var dir's key is the key in use, so that it survives a restart.

The settings use the key for the embedded profile; `make run` (scripts/run.sh) also for a
production profile started without a key, and records the file in the var dir's `run.env`, so
that a `manage.py` command run by hand in another shell uses the same key. The encryption keys
derive from it: a command run with another key would store secrets the platform cannot read.

    python -m a2a_platform.secret_key VAR_DIR    # makes the key if needed, prints its file
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import sys
from pathlib import Path


def var_secret_key(var_dir: Path) -> Path:
    """The var dir's key file, made if it does not exist yet (never replacing one that does)."""
    path = var_dir / "secret_key"
    if not path.is_file():
        var_dir.mkdir(parents=True, exist_ok=True)
        made = _private_file(path, secrets.token_urlsafe(50))
        try:
            os.link(made, path)  # fails if another process made the key meanwhile: keep that one
        except FileExistsError:
            pass
        finally:
            made.unlink()
    return path


def var_secret_read(path: Path) -> str:
    """The secret kept in `path`, stripped; '' when there is none (or it cannot be read: the
    caller then makes a new one, as for a missing file)."""
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def var_secret_keep(path: Path, value: str) -> None:
    """Keep `value` in `path`, mode 0600 (its directory 0700 when made here), replacing what
    was there in one step: a reader sees the old secret or the new one, never a part."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.replace(_private_file(path, value), path)


def var_key_in_use(var_dir: Path, secret_key: str) -> bool:
    """Whether `secret_key` (the settings' SECRET_KEY) is the var dir's own key: only then do
    the var dir's files hold secrets beside it (a production profile keeps its key elsewhere,
    and its var dir may be a container's disposable one)."""
    kept = var_secret_read(var_dir / "secret_key")
    return bool(kept) and hmac.compare_digest(kept.encode(), secret_key.encode())


def _private_file(path: Path, value: str) -> Path:
    """A new file beside `path` holding `value`, created with mode 0600 (never readable by
    others, not even for a moment as a chmod after writing would leave it)."""
    made = path.with_name(f".{path.name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        made.unlink()  # left by a process of the same id that stopped half-way
    fd = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(value + "\n")
    return made


if __name__ == "__main__":
    print(var_secret_key(Path(sys.argv[1])))
