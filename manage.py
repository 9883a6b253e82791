#!/usr/bin/env python
"""Django's command-line entry point for the A2A platform."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "a2a_platform.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A setting missing or wrong (settings.py; keys that do not read the stored secrets,
        # agents.crypto.encryption_keys_check) is said in one line: a traceback would bury it.
        sys.exit(f"ImproperlyConfigured: {exc}")


if __name__ == "__main__":
    main()
