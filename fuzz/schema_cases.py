"""Schema-driven REST cases: schemathesis, reading the platform's own OpenAPI document
(`/api/schema/`), makes requests that fit each operation (positive) and that break it on
purpose (negative), on unknown and on real task ids.

They are drawn before any is sent, with hypothesis seeded from the run's seed, so the same
seed draws the same cases. Each is turned into the exact bytes `requests` would send
(`requests.Request.prepare`) and sent as every other case is (fuzz.wire).
"""

from __future__ import annotations

import itertools
import json
from typing import Any
from urllib.parse import urlsplit

import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import HypothesisException
from schemathesis import GenerationMode

from .target import Target
from .wire import HttpCase

# Headers that say nothing to the platform (schemathesis' own case id is random: it would
# make the same seed send different bytes) or that the fuzzer writes itself.
DROPPED_HEADERS = frozenset(
    {"x-schemathesis-testcaseid", "connection", "content-length", "accept-encoding"}
)
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)


def schema_document(target: Target, timeout: float) -> dict[str, Any]:
    response = requests.get(
        f"http://{target.host}:{target.port}/api/schema/?format=json", timeout=timeout
    )
    response.raise_for_status()
    return response.json()


def schema_cases(document: dict[str, Any], target: Target, count: int, seed: int) -> list[HttpCase]:
    """`count` cases spread over every operation, both modes, with and without a real task."""
    if count <= 0:
        return []
    base_url = f"http://{target.host}:{target.port}"
    config = schemathesis.Config.from_dict(
        {"base-url": base_url, "generation": {"with-security-parameters": False}}
    )
    schema = schemathesis.openapi.from_dict(document, config=config)
    operations = [result.ok() for result in schema.get_all_operations()]
    tasks = target.all_tasks()
    slots = [
        (operation, mode, real_task)
        for operation in operations
        for mode in MODES
        for real_task in ((False, True) if "{task_id}" in operation.path and tasks else (False,))
    ]
    per_slot = -(-count // len(slots))  # rounded up; the list is cut to `count` at the end
    drawn: list[list[HttpCase]] = []
    for index, (operation, mode, real_task) in enumerate(slots):
        path_parameters = {"tenant_slug": target.tenant, "agent_slug": target.agent}
        if real_task:
            path_parameters["task_id"] = tasks[index % len(tasks)]
        strategy = operation.as_strategy(
            generation_mode=mode,
            path_parameters={
                k: v for k, v in path_parameters.items() if f"{{{k}}}" in operation.path
            },
            headers={"X-API-Key": target.key},
        )
        what = f"schema {mode.value} {operation.method.upper()} {operation.path}"
        if real_task:
            what += " (real task)"
        drawn.append(_draw(strategy, per_slot, seed + index, base_url, what))
    # Interleaved, so that a short run still sees every operation.
    mixed = [c for group in itertools.zip_longest(*drawn) for c in group if c is not None]
    return mixed[:count]


def _draw(strategy: Any, count: int, seed: int, base_url: str, what: str) -> list[HttpCase]:
    cases: list[HttpCase] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=count,
        phases=[Phase.generate],
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def draw(case: Any) -> None:
        converted = _http_case(case, base_url, what)
        if converted is not None:
            cases.append(converted)

    try:
        draw()
    except HypothesisException:
        pass  # an operation whose negative cases cannot be made: what was drawn stays
    return cases


def _http_case(case: Any, base_url: str, what: str) -> HttpCase | None:
    """The bytes `requests` would send for the case; None when `requests` would refuse to
    send it at all (a header it cannot write, a URL it cannot build)."""
    kwargs = case.as_transport_kwargs(base_url=base_url)
    kwargs.pop("cookies", None)
    try:
        prepared = requests.Request(**kwargs).prepare()
    except (requests.RequestException, ValueError, TypeError, UnicodeError):
        return None
    url = urlsplit(prepared.url or "")
    target = (url.path or "/") + (f"?{url.query}" if url.query else "")
    headers = []
    for name, value in prepared.headers.items():
        if name.lower() in DROPPED_HEADERS:
            continue
        raw_value = value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
        headers.append((name.encode("utf-8", "surrogatepass"), raw_value))
    body = prepared.body or b""
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    dialect = "0.3" if "/v1/" in url.path else "1.0"
    return HttpCase(
        binding="rest",
        dialect=dialect,
        what=what,
        method=str(prepared.method),
        target=target.encode("utf-8", "surrogatepass"),
        headers=tuple(headers),
        body=body,
    )


def describe(document: dict[str, Any]) -> str:
    """How many operations the document has (for the summary)."""
    paths = document.get("paths", {})
    count = sum(1 for item in paths.values() for method in item if method != "parameters")
    return f"{count} operations in {json.dumps(document.get('info', {}).get('title', ''))}"
