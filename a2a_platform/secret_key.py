"""The key of a platform started without DJANGO_SECRET_KEY: made once into the var dir's
`secret_key` (mode 0600) and read by every process and command that runs with that var dir.

The settings use it for the embedded profile; `make run` (scripts/run.sh) also for a
production profile started without a key, and records the file in the var dir's `run.env`, so
that a `manage.py` command run by hand in another shell uses the same key. The encryption keys
derive from it: a command run with another key would store secrets the platform cannot read.

    python -m a2a_platform.secret_key VAR_DIR    # makes the key if needed, prints its file
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path


def var_secret_key(var_dir: Path) -> Path:
    """The var dir's key file, made if it does not exist yet (never replacing one that does)."""
    path = var_dir / "secret_key"
    if not path.is_file():
        var_dir.mkdir(parents=True, exist_ok=True)
        made = path.with_name(f".secret_key.{os.getpid()}")
        made.write_text(secrets.token_urlsafe(50) + "\n")
        made.chmod(0o600)
        try:
            os.link(made, path)  # fails if another process made the key meanwhile: keep that one
        except FileExistsError:
            pass
        finally:
            made.unlink()
    return path


if __name__ == "__main__":
    print(var_secret_key(Path(sys.argv[1])))
