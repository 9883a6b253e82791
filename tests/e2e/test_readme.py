"""The README's client example runs as written against the live platform."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_sdk_example_works(live_platform, make_tenant, make_agent, make_key):
    tenant = make_tenant("demo")
    make_agent(tenant, "echo")
    key = make_key(tenant)
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    code = code.replace("http://127.0.0.1:8000", live_platform.url).replace('"a2a_..."', repr(key))
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "TASK_STATE_COMPLETED hello"
