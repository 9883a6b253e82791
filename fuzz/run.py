"""One fuzz run: learn a few real ids from the platform, make the cases from the seed, send them
a few at a time, judge every answer, and report.

Case `i` of a run is made from `random.Random(f"{seed}:{i}")` alone (the schema-driven cases
from hypothesis seeded with the seed), so `--case i` with the same seed and request count sends
that case again: the reproducer printed with every bad answer.
"""

from __future__ import annotations

import base64
import json
import random
import re
import sys
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, TextIO

import grpc

from . import grpc_cases, jsonrpc_cases, rest_cases, schema_cases
from .judge import KNOWN, judge_grpc, judge_http, known_cause
from .target import Target, loopback_address
from .wire import GrpcAnswer, GrpcCase, HttpAnswer, HttpCase, send_grpc, send_http

# The share of each kind of case. "schema" cases are REST cases made by schemathesis.
WEIGHTS: tuple[tuple[str, float], ...] = (
    ("jsonrpc", 0.36),
    ("rest", 0.24),
    ("schema", 0.15),
    ("grpc", 0.25),
)


class SetupError(RuntimeError):
    """The platform could not be reached or would not create a task with the key given."""


@dataclass(frozen=True)
class Options:
    requests: int
    web: str
    grpc: str
    key: str
    agent: str  # <tenant>/<agent>
    seed: int = 0
    timeout: float = 30.0  # seconds an answer may take: the bound of a hang
    concurrency: int = 4
    allow_known: bool = False
    only_case: int | None = None

    def command(self, case: int | None = None) -> str:
        """The command line that makes this run (or only `case` of it) again."""
        parts = [
            "python -m fuzz",
            f"--requests {self.requests}",
            f"--seed {self.seed}",
            f"--web {self.web}",
            f"--grpc {self.grpc}",
            "--key $A2A_KEY",
            f"--agent {self.agent}",
        ]
        if case is not None:
            parts.append(f"--case {case}")
        return " ".join(parts)


Case = HttpCase | GrpcCase
Answer = HttpAnswer | GrpcAnswer


@dataclass
class Outcome:
    index: int
    kind: str  # jsonrpc, rest, schema or grpc
    case: Case
    answer: Answer
    verdict: str  # "" for a good answer
    known: str = ""  # the owner of a known bad answer (fuzz.judge.KNOWN)


@dataclass
class Report:
    options: Options
    seconds: float = 0.0
    sent: Counter[str] = field(default_factory=Counter)  # by kind
    dialects: Counter[tuple[str, str]] = field(default_factory=Counter)
    answers: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, status)
    bad: list[Outcome] = field(default_factory=list)
    known: list[Outcome] = field(default_factory=list)
    unsent: list[Outcome] = field(default_factory=list)  # the fuzzer's own failures
    slowest: dict[str, tuple[float, int]] = field(default_factory=dict)  # kind -> (s, index)

    @property
    def failed(self) -> bool:
        return bool(self.bad or self.unsent or (self.known and not self.options.allow_known))

    def add(self, outcome: Outcome) -> None:
        self.sent[outcome.kind] += 1
        self.dialects[(outcome.kind, outcome.case.dialect or "none")] += 1
        answer = outcome.answer
        if isinstance(answer, HttpAnswer):
            status = str(answer.status) if answer.status else "no answer"
        else:
            status = answer.code if not answer.failure else "not sent"
        self.answers[(outcome.kind, status)] += 1
        if answer.seconds > self.slowest.get(outcome.kind, (-1.0, 0))[0]:
            self.slowest[outcome.kind] = (answer.seconds, outcome.index)
        if outcome.verdict.startswith("client error"):
            self.unsent.append(outcome)
        elif outcome.known:
            self.known.append(outcome)
        elif outcome.verdict:
            self.bad.append(outcome)


# --- set-up: real ids to aim at ---------------------------------------------------------------


def _post_jsonrpc(
    target: Target, method: str, params: dict[str, Any], version: str, timeout: float
) -> Any:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    headers = [(b"Content-Type", b"application/json"), (b"X-API-Key", target.key.encode())]
    if version:
        headers.append((b"A2A-Version", version.encode()))
    case = HttpCase(
        "jsonrpc", version, "set-up", "POST", target.root.encode(), tuple(headers), body
    )
    answer = send_http(case, target.host, target.port, timeout)
    if answer.failure or answer.status != 200:
        raise SetupError(
            f"{method} (A2A-Version {version or 'none'}) to {target.root}: "
            f"{answer.failure or answer.status} {answer.body[:300]!r}"
        )
    reply = json.loads(answer.body)
    if "error" in reply:
        raise SetupError(f"{method} to {target.root}: {reply['error']}")
    return reply["result"]


def learn(
    target: Target, catalog: grpc_cases.Catalog, channel: grpc.Channel, timeout: float
) -> None:
    """Create a few tasks in every dialect, and a push config, for the cases to aim at."""
    text = [{"text": "fuzz set-up"}]
    for blocking in (True, False):
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": text}
        params: dict[str, Any] = {"message": message}
        if not blocking:
            params["configuration"] = {"returnImmediately": True}
        task = _post_jsonrpc(target, "SendMessage", params, "1.0", timeout)["task"]
        target.tasks.setdefault("1.0", []).append(task["id"])
        target.context_ids.append(task["contextId"])
    message03 = {
        "kind": "message",
        "messageId": str(uuid.uuid4()),
        "role": "user",
        "parts": [{"kind": "text", "text": "fuzz set-up"}],
    }
    task03 = _post_jsonrpc(target, "message/send", {"message": message03}, "", timeout)
    target.tasks.setdefault("0.3", []).append(task03["id"])
    v01_id = uuid.uuid4().hex
    v01_message = {"role": "user", "parts": [{"type": "text", "text": "fuzz set-up"}]}
    _post_jsonrpc(target, "tasks/send", {"id": v01_id, "message": v01_message}, "0.1", timeout)
    target.tasks.setdefault("0.1", []).append(v01_id)
    page = _post_jsonrpc(target, "ListTasks", {"pageSize": 1}, "1.0", timeout)
    target.page_token = page.get("nextPageToken", "")
    grpc_task = _grpc_send(target, catalog, channel, timeout)
    target.tasks.setdefault("grpc", []).append(grpc_task)
    target.config_task = target.tasks["1.0"][0]
    config = {
        "taskId": target.config_task,
        "id": target.config_id,
        "url": jsonrpc_cases.PUSH_URL,
        "token": "fuzz",
    }
    try:
        _post_jsonrpc(target, "CreateTaskPushNotificationConfig", config, "1.0", timeout)
    except SetupError:
        pass  # an agent without push notifications: those calls are refused, still fuzzed


def _grpc_send(
    target: Target, catalog: grpc_cases.Catalog, channel: grpc.Channel, timeout: float
) -> str:
    request_class = catalog.message_class("lf.a2a.v1.SendMessageRequest")
    request = request_class()
    request.tenant = target.agent_path
    request.message.message_id = str(uuid.uuid4())
    request.message.role = 1  # ROLE_USER
    request.message.parts.add().text = "fuzz set-up"
    try:
        data = channel.unary_unary(f"/{grpc_cases.V10_SERVICE}/SendMessage")(
            request.SerializeToString(),
            metadata=[("x-api-key", target.key)],
            timeout=timeout,
        )
    except grpc.RpcError as error:
        raise SetupError(f"gRPC SendMessage to {target.grpc_address}: {error}") from None
    response = catalog.message_class("lf.a2a.v1.SendMessageResponse").FromString(data)
    return response.task.id


# --- the plan -------------------------------------------------------------------------------


def _kind(rng: random.Random) -> str:
    roll, total = rng.random(), 0.0
    for kind, weight in WEIGHTS:
        total += weight
        if roll < total:
            return kind
    return WEIGHTS[-1][0]


def plan(
    options: Options, target: Target, catalog: grpc_cases.Catalog, document: dict[str, Any]
) -> list[tuple[int, str, Case]]:
    """Every case of the run (or the one asked for), by index."""
    kinds = [_kind(random.Random(f"{options.seed}:{i}:kind")) for i in range(options.requests)]
    # The schema-driven cases are drawn as one pool (its size shapes it); a reproducer of
    # another kind needs none of them.
    wanted = options.only_case
    drawn = kinds.count("schema") if wanted is None or kinds[wanted] == "schema" else 0
    schema_pool = iter(schema_cases.schema_cases(document, target, drawn, options.seed))
    cases: list[tuple[int, str, Case]] = []
    for index, kind in enumerate(kinds):
        if wanted is not None and index != wanted:
            if kind == "schema":
                next(schema_pool, None)  # the pool's order is the run's
            continue
        rng = random.Random(f"{options.seed}:{index}")
        case: Case | None
        if kind == "schema":
            case = next(schema_pool, None)
            if case is None:  # fewer schema cases than asked for: a mutated REST case
                kind, case = "rest", rest_cases.rest_case(rng, target)
        elif kind == "jsonrpc":
            case = jsonrpc_cases.jsonrpc_case(rng, target)
        elif kind == "rest":
            case = rest_cases.rest_case(rng, target)
        else:
            case = grpc_cases.grpc_case(rng, target, catalog)
        cases.append((index, kind, case))
    return cases


# --- running ----------------------------------------------------------------------------------


def _send_one(
    index: int,
    kind: str,
    case: Case,
    target: Target,
    channel: grpc.Channel,
    catalog: grpc_cases.Catalog,
    timeout: float,
) -> Outcome:
    try:
        return _sent(index, kind, case, target, channel, catalog, timeout)
    except Exception as exc:  # the fuzzer's own fault: counted, and the run goes on
        failed = HttpAnswer() if isinstance(case, HttpCase) else GrpcAnswer()
        return Outcome(index, kind, case, failed, f"client error (the fuzzer's): {exc!r}")


def _sent(
    index: int,
    kind: str,
    case: Case,
    target: Target,
    channel: grpc.Channel,
    catalog: grpc_cases.Catalog,
    timeout: float,
) -> Outcome:
    if isinstance(case, HttpCase):
        answer: Answer = send_http(case, target.host, target.port, timeout)
        verdict = judge_http(case, answer, f"{target.host}:{target.port}")
    else:
        answer = send_grpc(channel, case, timeout)
        verdict = judge_grpc(case, answer, catalog.message_class)
    known = ""
    if verdict and isinstance(case, HttpCase) and isinstance(answer, HttpAnswer):
        known = KNOWN.get(known_cause(case, answer, f"{target.host}:{target.port}"), "")
    if not verdict:  # a good answer is counted, not kept: a run holds thousands
        if isinstance(answer, HttpAnswer):
            answer.body = b""
        else:
            answer.responses = []
    return Outcome(index, kind, case, answer, verdict, known)


def fuzz(options: Options, progress: TextIO | None = None) -> Report:
    """The whole run; raises SetupError when the platform cannot be fuzzed at all."""
    host, port = loopback_address(options.web, "--web")
    grpc_host, grpc_port = loopback_address(options.grpc, "--grpc")
    tenant, _, agent = options.agent.partition("/")
    if not tenant or not agent:
        raise SetupError(f"--agent must be <tenant>/<agent>, not {options.agent!r}")
    target = Target(host, port, f"{grpc_host}:{grpc_port}", options.key, tenant, agent)
    report = Report(options)
    started = time.monotonic()
    channel_options = [("grpc.max_receive_message_length", -1)]
    with grpc.insecure_channel(target.grpc_address, options=channel_options) as channel:
        try:
            catalog = grpc_cases.Catalog(channel)
        except grpc.RpcError as error:
            raise SetupError(f"gRPC reflection at {target.grpc_address}: {error}") from None
        learn(target, catalog, channel, options.timeout)
        try:
            document = schema_cases.schema_document(target, options.timeout)
        except Exception as exc:
            raise SetupError(f"the OpenAPI document at {options.web}/api/schema/: {exc}") from exc
        cases = plan(options, target, catalog, document)
        _log(progress, f"fuzz: {len(cases)} cases made in {time.monotonic() - started:.0f} s")
        with ThreadPoolExecutor(max_workers=max(1, options.concurrency)) as pool:
            futures = [
                pool.submit(_send_one, i, k, c, target, channel, catalog, options.timeout)
                for i, k, c in cases
            ]
            for done, future in enumerate(as_completed(futures), start=1):
                report.add(future.result())
                if done % 1000 == 0:
                    _log(progress, f"fuzz: {done} sent, {len(report.bad)} bad")
    report.bad.sort(key=lambda o: o.index)
    report.known.sort(key=lambda o: o.index)
    report.seconds = time.monotonic() - started
    return report


def _log(stream: TextIO | None, line: str) -> None:
    if stream is not None:
        print(line, file=stream, flush=True)


# --- the summary ------------------------------------------------------------------------------

SHOWN_BYTES = 1_500


# A byte repeated this often is shown as one run (`<b'x' * 17000>`), so that a request with a
# 17 KB path still fits on a screen; --report has every byte.
_RUN = re.compile(rb"(.)\1{39,}", re.DOTALL)


def _shown(data: bytes, key: str) -> str:
    parts, start = [], 0
    for run in _RUN.finditer(data):
        parts.append(repr(data[start : run.start()]))
        parts.append(f"<{run.group(1)!r} * {len(run.group())}>")
        start = run.end()
    parts.append(repr(data[start:]))
    text = " + ".join(p for p in parts if p != "b''") or "b''"
    if len(text) > SHOWN_BYTES:
        text = text[:SHOWN_BYTES] + f" ... ({len(data)} bytes in all)"
    return text.replace(key, "$A2A_KEY")


def reproducer(outcome: Outcome, options: Options, host: str) -> str:
    """The case, the answer, and the command that sends the case again."""
    case, answer, key = outcome.case, outcome.answer, options.key
    lines = [
        f"#{outcome.index} [{outcome.kind} v{case.dialect or '?'}] {case.what}"[:400],
        f"  why: {outcome.verdict}" + (f" (known: {outcome.known})" if outcome.known else ""),
        f"  again: {options.command(outcome.index)}",
    ]
    if isinstance(case, HttpCase) and isinstance(answer, HttpAnswer):
        lines.append(f"  request: {_shown(case.raw(host), key)}")
        if answer.status:
            lines.append(
                f"  answer: HTTP {answer.status} {answer.reason}; "
                f"Content-Type {answer.header('Content-Type')!r}; {answer.seconds:.1f} s; "
                f"body {_shown(answer.body, key)}"
            )
    elif isinstance(case, GrpcCase) and isinstance(answer, GrpcAnswer):
        metadata = [(k, v if isinstance(v, str) else f"<{len(v)} bytes>") for k, v in case.metadata]
        lines.append(
            f"  request: {case.path} streaming={case.streaming} metadata={metadata!r}".replace(
                key, "$A2A_KEY"
            )
        )
        lines.append(f"  payload (base64): {base64.b64encode(case.payload[:SHOWN_BYTES]).decode()}")
        lines.append(f"  answer: {answer.code} {answer.details[:500]!r}; {answer.seconds:.1f} s")
    return "\n".join(lines)


def summary(report: Report) -> str:
    options = report.options
    total = sum(report.sent.values())
    lines = [
        f"fuzz: {total} requests in {report.seconds:.0f} s, seed {options.seed}, "
        f"{options.concurrency} at a time, agent {options.agent}",
    ]
    for kind, _ in WEIGHTS:
        if not report.sent[kind]:
            continue
        dialects = ", ".join(
            f"v{d} {n}" for (k, d), n in sorted(report.dialects.items()) if k == kind
        )
        answers = ", ".join(
            f"{s} x{n}" for (k, s), n in sorted(report.answers.items()) if k == kind
        )
        seconds, index = report.slowest[kind]
        lines.append(f"  {kind:8} {report.sent[kind]:6}  ({dialects})")
        lines.append(f"           answers: {answers}")
        lines.append(f"           slowest: {seconds:.1f} s (#{index})")
    host = options.web.split("//")[-1]
    lines.append(f"bad answers: {len(report.bad)}")
    lines += [reproducer(o, options, host) for o in report.bad]
    if report.known:
        counted = "not counted (--allow-known)" if options.allow_known else "counted as bad"
        lines.append(f"known bad answers, owned by other work: {len(report.known)} ({counted})")
        by_owner = Counter(o.known for o in report.known)
        lines += [f"  {n} x {owner}" for owner, n in by_owner.items()]
        lines += [reproducer(o, options, host) for o in report.known[:5]]
    if report.unsent:
        lines.append(f"not sent (a fault of the fuzzer itself): {len(report.unsent)}")
        lines += [reproducer(o, options, host) for o in report.unsent[:10]]
    lines.append("result: " + ("FAILED" if report.failed else "ok"))
    return "\n".join(lines)


def write_report(report: Report, path: str) -> None:
    """Every bad, known and unsent case as a JSON line, with its full request in base64."""
    with open(path, "w", encoding="utf-8") as out:
        for outcome in (*report.bad, *report.known, *report.unsent):
            case = outcome.case
            record: dict[str, Any] = {
                "index": outcome.index,
                "kind": outcome.kind,
                "what": case.what,
                "why": outcome.verdict,
                "known": outcome.known,
            }
            if isinstance(case, HttpCase):
                raw = case.raw(report.options.web.split("//")[-1])
                record["request"] = base64.b64encode(raw).decode()
            else:
                record["path"] = case.path
                record["payload"] = base64.b64encode(case.payload).decode()
            out.write(json.dumps(record) + "\n")


def main_run(options: Options, report_path: str | None = None) -> int:
    try:
        report = fuzz(options, progress=sys.stderr)
    except SetupError as exc:
        print(f"fuzz: cannot start: {exc}", file=sys.stderr)
        return 2
    print(summary(report))
    if report_path:
        write_report(report, report_path)
    return 1 if report.failed else 0
