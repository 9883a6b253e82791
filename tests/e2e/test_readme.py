"""The README's client example runs as written against the live platform."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
README = Path(__file__).resolve().parents[2] / "README.md"
PYTHON_BLOCKS = re.compile(r"```python\n(.*?)```", re.S)


@pytest.mark.parametrize("example", [0, 1], ids=["jsonrpc", "grpc"])
def test_readme_sdk_examples_work(live_platform, make_tenant, make_agent, make_key, example):
    tenant = make_tenant("demo")
    make_agent(tenant, "echo")
    key = make_key(tenant)
    examples = [c for c in PYTHON_BLOCKS.findall(README.read_text()) if "ClientFactory" in c]
    code = examples[example]
    code = code.replace("http://127.0.0.1:8000", live_platform.url).replace('"a2a_..."', repr(key))
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "TASK_STATE_COMPLETED hello"


def _readme_path(route: str) -> str:
    """A REST route as the README writes it: `tasks/<task:task_id>` -> `tasks/{id}`."""
    return route.replace("<task:task_id>", "{id}").replace("<str:config_id>", "{configId}")


def test_readme_lists_every_rest_path():
    from a2a_platform.urls import rest_paths
    from a2a_platform.versions import V0_3, V1_0

    table = README.read_text().split("REST paths, relative to", 1)[1].split("\n\n", 2)[1]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip("|"))]
        method_and_path = cells[0].strip("`")
        rows[method_and_path.split()[-1]] = (cells[1] == "✓", cells[2] == "✓")
    for column, dialect in ((0, V1_0), (1, V0_3)):
        for pattern in rest_paths(dialect, "readme"):
            route = _readme_path(str(pattern.pattern))
            assert route in rows, f"the README's REST table lacks {route}"
            assert rows[route][column], f"the README does not mark {route} as served in {dialect}"


def test_readme_push_verification_example_works(live_platform, make_tenant):
    from agents.signing import push_signature

    tenant = make_tenant("demo")
    code = next(c for c in PYTHON_BLOCKS.findall(README.read_text()) if "PyJWKClient" in c)
    namespace: dict = {}
    exec(code.replace("http://127.0.0.1:8000", live_platform.url), namespace)
    body = b'{"statusUpdate": {}}'
    headers = {"X-A2A-Signature": push_signature(tenant=tenant, body=body, task_id="t-1")}
    assert namespace["verify"](body, headers, "t-1")["task_id"] == "t-1"
    with pytest.raises(AssertionError):
        namespace["verify"](body + b" ", headers, "t-1")  # another body: refused
