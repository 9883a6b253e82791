"""The REST binding's OpenAPI schema, end to end against the live platform (real daphne + Celery):
the served schema is valid OpenAPI 3 and lists every REST route of both versions (taken from the
URL resolver, so it cannot drift); the Swagger UI page needs nothing but the platform itself;
and schemathesis, driven by that schema against a real agent on loopback, gets no 5xx."""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests
import schemathesis
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.validation import validate_schema
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup

from a2a_platform.versions import V0_3, V1_0
from bindings.rest import A2AView

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

MAX_EXAMPLES = 12  # per operation and generation mode, with the key
UNAUTHENTICATED_EXAMPLES = 4  # per operation, without a key
KNOWN_TASK_EXAMPLES = 5  # per task operation, on a real task
REQUEST_TIMEOUT = 10.0  # seconds, a stream included
ROUTE_PARAM = re.compile(r"<(?:\w+:)?(\w+)>")


# --- what the URL resolver routes ------------------------------------------------------------


def rest_routes() -> dict[tuple[str, str], str]:
    """(METHOD, OpenAPI path) -> dialect of every REST operation the URL resolver routes."""
    routes: dict[tuple[str, str], str] = {}

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern):
                view_class = getattr(pattern.callback, "cls", None)
                if not (isinstance(view_class, type) and issubclass(view_class, A2AView)):
                    continue
                if view_class.schema is None:  # not an operation (the unknown-path answer)
                    continue
                dialect = pattern.callback.initkwargs["dialect"]
                path = "/" + ROUTE_PARAM.sub(r"{\1}", route)
                for method in view_class.http_method_names:
                    if method not in ("head", "options") and hasattr(view_class, method):
                        routes[(method.upper(), path)] = dialect

    walk(get_resolver().url_patterns, "")
    return routes


def schema_operations(schema: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method.upper(), path): operation
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in ("get", "put", "post", "delete", "patch")
    }


def unresolved_refs(node: Any, root: dict[str, Any]) -> list[str]:
    missing = []
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            target: Any = root
            for part in ref.removeprefix("#/").split("/"):
                target = target.get(part) if isinstance(target, dict) else None
            if target is None:
                missing.append(ref)
        for value in node.values():
            missing += unresolved_refs(value, root)
    elif isinstance(node, list):
        for value in node:
            missing += unresolved_refs(value, root)
    return missing


@pytest.fixture
def served_schema(live_platform, http) -> dict[str, Any]:
    response = http.get(f"{live_platform.url}/api/schema/?format=json")
    assert response.status_code == 200, response.text[:500]
    assert response.headers["content-type"].startswith("application/vnd.oai.openapi+json")
    return response.json()


# --- (a) the schema ------------------------------------------------------------------------------


def test_schema_is_openapi_3_and_lists_every_rest_operation(live_platform, http, served_schema):
    schema = served_schema
    validate_schema(schema)  # the OpenAPI 3.0 JSON Schema drf-spectacular ships
    assert schema["openapi"].startswith("3.")
    assert unresolved_refs(schema, schema) == []

    routes = rest_routes()
    assert {dialect for dialect in routes.values()} == {V1_0, V0_3}
    operations = schema_operations(schema)
    # Every REST route of both versions, and nothing else (no admin, JSON-RPC or cards).
    assert set(operations) == set(routes)

    ids = [operation["operationId"] for operation in operations.values()]
    assert len(ids) == len(set(ids)), "operationIds must be unique"
    components = schema["components"]["schemas"]
    for (method, path), operation in operations.items():
        dialect = routes[(method, path)]
        prefix = "v1_0_" if dialect == V1_0 else "v0_3_"
        assert operation["operationId"].startswith(prefix), (method, path)
        assert operation["tags"] == [f"A2A REST v{dialect}"]
        assert operation["summary"]
        assert {"ApiKeyAuth": []} in operation["security"]
        assert {"BearerAuth": []} in operation["security"]
        params = {(p["name"], p["in"]): p for p in operation.get("parameters", [])}
        for name in re.findall(r"{(\w+)}", path):
            assert params[(name, "path")]["schema"]["type"] == "string", (name, path)
        responses = operation["responses"]
        for status in ("400", "401", "404", "500"):
            error = responses[status]["content"]["application/json"]["schema"]["$ref"]
            assert error.endswith("/Error" if dialect == V1_0 else "/V03Error")
        ok = responses["200"]["content"]
        if "text/event-stream" in ok:
            assert path.endswith((":stream", ":subscribe", ":resubscribe")), path
        elif method != "DELETE":
            ref = ok["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
            assert ref in components
            assert ref.startswith("V03") == (dialect == V0_3), (path, ref)
        if "requestBody" in operation:
            body = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            assert body.rsplit("/", 1)[-1].startswith("V03") == (dialect == V0_3), path

    # Typed query parameters.
    v10_list = {p["name"]: p for p in operations[("GET", _path(V1_0, "tasks"))]["parameters"]}
    assert v10_list["pageSize"]["schema"]["type"] == "integer"
    assert v10_list["includeArtifacts"]["schema"]["type"] == "boolean"
    assert "TASK_STATE_COMPLETED" in v10_list["status"]["schema"]["enum"]
    v03_list = {p["name"]: p for p in operations[("GET", _path(V0_3, "tasks"))]["parameters"]}
    assert v03_list["lastUpdatedAfter"]["schema"]["type"] == "integer"
    assert "completed" in v03_list["status"]["schema"]["enum"]
    # Components generated from the protos: json_name properties, enums, well-known types.
    message = components["Message"]
    assert message["properties"]["messageId"] == {"type": "string", "minLength": 1}
    assert {"messageId", "role", "parts"} <= set(message["required"])
    assert components["TaskStatus"]["properties"]["timestamp"]["format"] == "date-time"
    assert "TASK_STATE_WORKING" in components["TaskState"]["enum"]
    assert "V03Task" in components and "Task" in components

    # The YAML default is served too.
    yaml_response = http.get(f"{live_platform.url}/api/schema/")
    assert yaml_response.status_code == 200
    assert yaml_response.text.startswith("openapi: 3.")


def _path(dialect: str, route: str) -> str:
    root = "/a2a/{tenant_slug}/{agent_slug}/"
    return root + ("v1/" if dialect == V0_3 else "") + route


# --- (b) the docs page ---------------------------------------------------------------------------


def test_docs_page_needs_no_cdn(live_platform, http):
    page = http.get(f"{live_platform.url}/api/docs/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    assert "SwaggerUIBundle" in html
    assert not re.search(r"https?://|//cdn|jsdelivr|unpkg", html), "the page must not need a CDN"

    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert len(assets) >= 4, assets  # css, bundle, standalone preset, favicon
    expected_types = {".css": "text/css", ".js": "javascript", ".png": "image/png"}
    for asset in assets:
        assert asset.startswith("/"), asset
        response = http.get(live_platform.url + asset.replace("&amp;", "&"))
        assert response.status_code == 200, asset
        assert len(response.content) > 100, asset
        name = asset.split("?")[0]
        kind = next(v for k, v in expected_types.items() if name.endswith(k))
        assert kind in response.headers["content-type"], (asset, response.headers)
    # Static files are served from the installed apps and nothing else.
    for bad in ("../../a2a_platform/settings.py", "drf_spectacular_sidecar/nonexistent.js"):
        assert http.get(f"{live_platform.url}/static/{bad}").status_code == 404
    # The schema the page loads.
    schema_url = re.search(r'url: "([^"]+)"', html)
    assert schema_url is not None
    assert http.get(live_platform.url + schema_url.group(1)).status_code == 200


# --- (c) schemathesis ----------------------------------------------------------------------------


@dataclass
class Run:
    """What one schemathesis pass did: calls per operation, statuses, and failures."""

    name: str
    key: str | None
    calls: Counter[str] = field(default_factory=Counter)
    statuses: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    reasons: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    failures: list[str] = field(default_factory=list)
    client_errors: Counter[str] = field(default_factory=Counter)  # requests refused to send
    unsatisfiable: list[str] = field(default_factory=list)

    def mask(self, text: str) -> str:
        return text.replace(self.key, "$A2A_KEY") if self.key else text


def _reason(response: Any) -> str:
    try:
        details = response.json()["error"].get("details") or [{}]
        return str(details[0].get("reason", ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        return ""


def exercise(
    schema: Any,
    run: Run,
    *,
    base_url: str,
    path_parameters: dict[str, str],
    modes: tuple[GenerationMode, ...],
    max_examples: int,
    only: set[str] | None = None,
) -> None:
    headers = {"X-API-Key": run.key} if run.key else {}
    session = requests.Session()
    for result in schema.get_all_operations():
        operation = result.ok()
        operation_id = schema.get_operation_id(operation)
        if only is not None and operation_id not in only:
            continue
        for mode in modes:
            strategy = operation.as_strategy(
                generation_mode=mode,
                path_parameters={
                    k: v for k, v in path_parameters.items() if "{" + k + "}" in operation.path
                },
                headers=headers,
            )

            def send(case: Any, operation_id: str = operation_id, mode: Any = mode) -> None:
                _send(case, run, operation_id, mode, base_url, session)

            try:
                _examples(strategy, max_examples, send)
            except Unsatisfiable:
                run.unsatisfiable.append(f"{operation_id} ({mode.value})")


def exercise_examples(
    schema: Any, run: Run, *, base_url: str, path_parameters: dict[str, str]
) -> None:
    """Send each operation's documented request examples (schemathesis' examples phase)."""
    headers = {"X-API-Key": run.key} if run.key else {}
    session = requests.Session()
    for result in schema.get_all_operations():
        operation = result.ok()
        operation_id = schema.get_operation_id(operation)
        content = operation.definition.raw.get("requestBody", {}).get("content", {})
        for media_type, media in content.items():
            for example in media.get("examples", {}).values():
                strategy = operation.as_strategy(
                    path_parameters=path_parameters,
                    headers=headers,
                    body=example["value"],
                    media_type=media_type,
                )

                def send(case: Any, operation_id: str = operation_id) -> None:
                    _send(case, run, operation_id, GenerationMode.POSITIVE, base_url, session)

                _examples(strategy, 1, send)


def _examples(strategy: Any, max_examples: int, body: Any) -> None:
    """Run `body` on `max_examples` deterministic cases of `strategy`, without shrinking."""

    @settings(
        max_examples=max_examples,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case: Any) -> None:
        body(case)

    run()


def _send(
    case: Any, run: Run, operation_id: str, mode: Any, base_url: str, session: requests.Session
) -> None:
    try:
        response = case.call(base_url=base_url, session=session, timeout=REQUEST_TIMEOUT)
    except (requests.exceptions.InvalidHeader, requests.exceptions.InvalidURL) as exc:
        run.client_errors[type(exc).__name__] += 1
        return
    except requests.RequestException as exc:
        curl = run.mask(case.as_curl_command(base_url=base_url))
        run.failures.append(f"{operation_id} ({mode.value}): {type(exc).__name__}: {exc}\n  {curl}")
        return
    run.calls[operation_id] += 1
    run.statuses[operation_id][response.status_code] += 1
    run.reasons[operation_id][_reason(response)] += 1
    try:
        case.validate_response(response, checks=[not_a_server_error])
    except FailureGroup as exc:
        run.failures.append(f"{operation_id} ({mode.value}): {run.mask(str(exc))}")


def figures(run: Run) -> str:
    lines = [f"{run.name}: {sum(run.calls.values())} calls over {len(run.calls)} operations"]
    for operation_id in sorted(run.calls):
        statuses = ", ".join(f"{s}x{n}" for s, n in sorted(run.statuses[operation_id].items()))
        lines.append(f"  {operation_id}: {run.calls[operation_id]} ({statuses})")
    if run.client_errors:
        lines.append(f"  not sent (client-side): {dict(run.client_errors)}")
    if run.unsatisfiable:
        lines.append(f"  no cases: {run.unsatisfiable}")
    lines += [f"  FAILURE {failure}" for failure in run.failures]
    return "\n".join(lines)


@pytest.mark.timeout(300)
def test_schemathesis_gets_no_server_error(
    live_platform, http, served_schema, make_tenant, make_agent, make_key
):
    tenant = make_tenant()
    agent = make_agent(tenant, "fuzzed")  # private: no key, no entry
    key = make_key(tenant)
    slugs = {"tenant_slug": tenant.slug, "agent_slug": agent.slug}
    agent_url = live_platform.agent_url(agent)
    # A real, finished task: listed, and the target of the known-task pass.
    sent = http.post(
        agent_url + "message:send",
        json={
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": "seed"}],
            }
        },
        headers={"X-API-Key": key},
    )
    assert sent.status_code == 200, sent.text
    task_id = sent.json()["task"]["id"]

    assert served_schema["paths"], "no operations to test"
    all_ids = {op["operationId"] for op in schema_operations(served_schema).values()}
    assert len(all_ids) == len(rest_routes())

    def load(**generation: Any) -> Any:
        config = schemathesis.Config.from_dict(
            {"base-url": live_platform.url, "generation": generation}
        )
        return schemathesis.openapi.from_dict(served_schema, config=config)

    started = time.monotonic()
    # With the key: positive and negative cases, the key only in X-API-Key (no generated
    # security headers, which would replace it).
    keyed = Run("with a key", key)
    exercise(
        load(**{"with-security-parameters": False}),
        keyed,
        base_url=live_platform.url,
        path_parameters=slugs,
        modes=(GenerationMode.POSITIVE, GenerationMode.NEGATIVE),
        max_examples=MAX_EXAMPLES,
    )
    # The documented examples: they must work.
    examples = Run("with a key, documented examples", key)
    exercise_examples(
        load(**{"with-security-parameters": False}),
        examples,
        base_url=live_platform.url,
        path_parameters=slugs,
    )
    # The same operations on the real task.
    task_ids = {
        op["operationId"]
        for (_, path), op in schema_operations(served_schema).items()
        if "{task_id}" in path
    }
    known = Run("with a key, on a real task", key)
    exercise(
        load(**{"with-security-parameters": False}),
        known,
        base_url=live_platform.url,
        path_parameters={**slugs, "task_id": task_id},
        modes=(GenerationMode.POSITIVE,),
        max_examples=KNOWN_TASK_EXAMPLES,
        only=task_ids,
    )
    # Without the key (schemathesis may make up credentials): 401 everywhere.
    anonymous = Run("without a key", None)
    exercise(
        load(),
        anonymous,
        base_url=live_platform.url,
        path_parameters=slugs,
        modes=(GenerationMode.POSITIVE,),
        max_examples=UNAUTHENTICATED_EXAMPLES,
    )
    elapsed = time.monotonic() - started
    runs = (keyed, examples, known, anonymous)
    report = "\n".join(figures(run) for run in runs)
    report += f"\n{elapsed:.0f} s"
    print(report)

    # Every operation was exercised, with the key, on the real task and without a key.
    assert set(keyed.calls) == all_ids, report
    assert set(known.calls) == task_ids, report
    assert set(anonymous.calls) == all_ids, report
    # The key and the slugs were used: never an unknown agent, never a 401 with the key.
    for run in (keyed, known):
        for operation_id in run.calls:
            assert run.reasons[operation_id]["AGENT_NOT_FOUND"] == 0, report
            assert run.statuses[operation_id][401] == 0, report
    # Cases got past validation: the agent answered messages in both versions.
    sends = {
        f"v{v}_{op}" for v in ("1_0", "0_3") for op in ("send_message", "send_streaming_message")
    }
    assert set(examples.calls) == sends, report
    for operation_id in sends:
        assert examples.statuses[operation_id][200] > 0, report
    for operation_id in ("v1_0_get_task", "v0_3_get_task"):
        assert known.statuses[operation_id][200] > 0, report
    # Without a key, a private agent refuses every operation.
    for operation_id in all_ids:
        assert anonymous.statuses[operation_id][401] > 0, report

    failures = [failure for run in runs for failure in run.failures]
    if failures:
        log = (live_platform.log_dir / "daphne.log").read_text(errors="replace")
        entries = re.split(r"\n(?=\d{4}-\d\d-\d\d )", log)
        errors = [entry for entry in entries if " ERROR " in entry.split("\n", 1)[0]]
        report += "\nServer log, errors:\n" + "\n".join(errors[-6:])[-6000:]
    assert not failures, f"{len(failures)} server errors or dropped requests:\n" + report
