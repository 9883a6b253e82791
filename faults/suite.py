"""The fault suite: processes of a running cluster die while clients use it, and what the
clients saw and the database holds afterwards is counted (docs/reliability.md).

Each trial starts a few tasks on a slow agent (tests/agents/fault_executors.StepsExecutor: an
artifact every half second for three seconds), each followed by a streaming client through the
front (faults/observe.py), injects its fault while the runs are under way, brings the process
or server back as a supervisor would, and waits, at most `SETTLE_SECONDS`, for every task to
end. Then, per task:

- stuck: the task is not terminal by then (or never came to be);
- lost: an event the stream skipped (a gap in the event numbers it received, or the end it
  never received), a task that did not end COMPLETED, a push event never delivered;
- duplicated: an event a stream received twice, a second task for one messageId, a step one
  attempt of the run wrote twice or a run that went on writing after the next attempt began,
  a push event delivered twice.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .cluster import FAULT_EXECUTORS, Cluster
from .observe import TERMINAL, Followed, Ledger, Sent, blocking_send, follow_send

# A task must end within this long of its fault: a worker loss takes a lease (10 s) and a
# reaper round (5 s) to notice, a lost job up to 30 s to be queued again, then the run itself.
SETTLE_SECONDS = 90.0
# How long a trial waits for its runs to be under way before it strikes anyway.
UNDER_WAY_SECONDS = 45.0
STEPS, STEP_SECONDS = 6, 0.5
# Events a push config hears (A2A_PUSH_EVENT_KINDS' default).
PUSHED_KINDS = ("status_update", "artifact_update")

# The agents of the suite: `steps` is run again after a lost worker (Agent.worker_loss).
AGENTS: dict[str, dict[str, Any]] = {
    "steps": {
        "kind": "python",
        "config": {
            "class_path": FAULT_EXECUTORS,
            "init_kwargs": {"steps": STEPS, "seconds": STEP_SECONDS},
        },
        "fields": {"worker_loss": "retry", "worker_loss_attempts": 3},
    },
    # Ten steps a second apart: runs that outlast a web process's drain (A2A_DRAIN_SECONDS, 5).
    "long": {
        "kind": "python",
        "config": {"class_path": FAULT_EXECUTORS, "init_kwargs": {"steps": 10, "seconds": 1.0}},
        "fields": {"worker_loss": "retry", "worker_loss_attempts": 3},
    },
}

# The cluster's settings for the suite, beside the defaults (lease, reaper, requeue):
SETTINGS = {
    # Two runs per worker: more tasks than that wait in the broker's queue (the Redis fault).
    "A2A_WORKER_MAX_RUNS": "2",
    # A stopped worker hands its runs back after 1 s instead of letting them finish: the
    # path a long run takes, which the three-second runs would not otherwise reach.
    "A2A_WORKER_GRACE_SECONDS": "1",
    # Push retries within seconds, not the production backoff of minutes.
    "A2A_PUSH_BACKOFF_BASE_SECONDS": "0.5",
    "A2A_PUSH_BACKOFF_MAX_SECONDS": "2",
}


@dataclass
class Counts:
    tasks: int = 0
    stuck: int = 0
    lost: int = 0
    duplicated: int = 0
    notes: Counter[str] = field(default_factory=Counter)  # what was counted, and why
    # What the fault did to the clients without costing anything (a stream resumed, a send
    # made again): that the fault struck where it was meant to.
    seen: Counter[str] = field(default_factory=Counter)

    def add(self, other: Counts) -> None:
        self.tasks += other.tasks
        self.stuck += other.stuck
        self.lost += other.lost
        self.duplicated += other.duplicated
        self.notes.update(other.notes)
        self.seen.update(other.seen)

    @property
    def clean(self) -> bool:
        return not (self.stuck or self.lost or self.duplicated)


@dataclass
class Trial:
    """What a trial works with: the cluster, its agents and key, the database."""

    cluster: Cluster
    made: dict[str, Any]
    ledger: Ledger
    http: httpx.AsyncClient
    receiver: Any  # tests.e2e.webhook.Receiver, for the webhook fault
    pause: float = 0.0  # extra seconds a fault stays on (longer outages)

    agent: str = "steps"

    @property
    def url(self) -> str:
        return str(self.made["agents"][self.agent])

    @property
    def key(self) -> str:
        return str(self.made["key"])

    def follow(self, n: int, *, push: Callable[[str], dict[str, str]] | None = None) -> Following:
        """`n` streamed sends, each followed to its end by a client of its own."""
        deadline = time.monotonic() + UNDER_WAY_SECONDS + SETTLE_SECONDS
        following = Following()
        for i in range(n):
            followed = Followed(f"fault-{time.time_ns()}-{i}")
            coroutine = follow_send(
                self.http,
                self.url,
                self.key,
                f"task {i}",
                push=push(followed.message_id) if push else None,
                deadline=deadline,
                followed=followed,
            )
            following.seen.append(followed)
            following.tasks.append(asyncio.ensure_future(coroutine))
        return following

    async def under_way(self, following: Following, count: int) -> None:
        """Until `count` of the tasks have a run under way (a step written), or the bound."""
        deadline = time.monotonic() + UNDER_WAY_SECONDS
        while time.monotonic() < deadline:
            ids = following.task_ids()
            if len(ids) >= count and await asyncio.to_thread(self._stepped, ids) >= count:
                return
            await asyncio.sleep(0.1)

    def _stepped(self, task_ids: list[str]) -> int:
        return sum(1 for t in task_ids if self.ledger.step_artifacts(t))


@dataclass
class Following:
    """Streams under way: what each has seen so far, and the clients following them."""

    seen: list[Followed] = field(default_factory=list)
    tasks: list[asyncio.Future[Followed]] = field(default_factory=list)

    def task_ids(self) -> list[str]:
        return [f.task_id for f in self.seen if f.task_id]

    async def ended(self) -> list[Followed]:
        return list(await asyncio.gather(*self.tasks))


# --- judging -----------------------------------------------------------------------------------


def judge_task(ledger: Ledger, task_id: str, mid: str) -> Counts:
    """What the database holds of one task: its end, its steps, the tasks of its messageId."""
    counts = Counts(tasks=1)
    tasks = ledger.tasks_of_message(mid)
    if len(tasks) > 1:
        counts.duplicated += len(tasks) - 1
        counts.notes["a second task for one messageId"] += len(tasks) - 1
    row = ledger.task(task_id) if task_id else None
    if row is None:
        counts.stuck += 1
        counts.notes["no task"] += 1
        return counts
    state, _ = row
    if state not in TERMINAL:
        counts.stuck += 1
        counts.notes[f"still {state}"] += 1
    elif state != "TASK_STATE_COMPLETED":
        counts.lost += 1
        counts.notes[f"{state}: {ledger.status_text(task_id)[:90]}"] += 1
    steps = ledger.step_artifacts(task_id)
    twice = sum(n - 1 for n in Counter(steps).values() if n > 1)
    if twice:
        counts.duplicated += twice
        counts.notes["a step written twice by one attempt"] += twice
    attempts = [int(s.split("-")[1]) for s in steps if s.startswith("attempt-")]
    late = sum(1 for n in range(1, len(attempts)) if attempts[n] < max(attempts[:n]))
    if late:
        counts.duplicated += late
        counts.notes["a run wrote after the next attempt began"] += late
    return counts


def judge_stream(ledger: Ledger, followed: Followed) -> Counts:
    counts = judge_task(ledger, followed.task_id, followed.message_id)
    lost, repeated = followed.lost_and_repeated()
    row = ledger.task(followed.task_id) if followed.task_id else None
    if row is not None and row[0] in TERMINAL:
        seen = max(followed.seqs, default=0)
        if seen < row[1]:  # the task ended, and its last events never reached the client
            lost += row[1] - seen
    if lost:
        counts.lost += lost
        counts.notes["an event the stream skipped"] += lost
    if repeated:
        counts.duplicated += repeated
        counts.notes["an event the stream received twice"] += repeated
    if resumed := followed.posts - 1 - followed.resends:
        counts.seen["stream resumed with Last-Event-ID"] += resumed
    if followed.resends:
        counts.seen["streamed send made again (no frame came)"] += followed.resends
    for error in followed.errors:
        counts.seen[f"stream cut: {error_kind(error)}"] += 1
    return counts


def error_kind(error: str) -> str:
    """What kind of cut a client saw: an HTTP status, an error frame's code, an exception."""
    kind = error.split(":", 1)[0]
    if code := re.search(r'"code": (-?\d+)', error):
        kind += f" {code.group(1)}"
    return kind


def judge_blocking(ledger: Ledger, sent: Sent) -> Counts:
    counts = judge_task(ledger, sent.task_id, sent.message_id)
    if not sent.task_id:
        counts.notes["the sender never got its task: " + (sent.errors or ["?"])[-1][:80]] += 1
    if sent.tries > 1:
        counts.seen["blocking send made again (its answer was lost)"] += sent.tries - 1
    if sent.state and sent.state not in TERMINAL:
        counts.seen[f"blocking send answered {sent.state}"] += 1
    return counts


async def wait_terminal(ledger: Ledger, task_ids: list[str], deadline: float) -> None:
    """Until every task is terminal in the database, or the deadline."""
    while time.monotonic() < deadline:
        rows = await asyncio.to_thread(lambda: [ledger.task(t) for t in task_ids if t])
        if all(r is not None and r[0] in TERMINAL for r in rows):
            return
        await asyncio.sleep(0.25)


def judge_all(ledger: Ledger, followed: list[Followed]) -> Counts:
    total = Counts()
    for one in followed:
        total.add(judge_stream(ledger, one))
    return total


# --- the faults --------------------------------------------------------------------------------


async def _busiest_worker(trial: Trial, following: Following) -> tuple[str, int]:
    """The agents worker running most of the trial's tasks (a runner id holds its pid), and
    how many it runs."""
    runners = await asyncio.to_thread(trial.ledger.running_runners, following.task_ids())
    workers = [m for m in trial.cluster.members.values() if m.role == "agents" and m.alive]
    by_runs = Counter(m.name for m in workers for r in runners.values() if f".{m.pid}." in f".{r}.")
    return by_runs.most_common(1)[0] if by_runs else (workers[0].name, 0)


async def worker_kill(trial: Trial) -> Counts:
    """SIGKILL to the agents worker running most of the runs; a supervisor starts it again."""
    following = trial.follow(4)
    await trial.under_way(following, 4)
    victim, runs = await _busiest_worker(trial, following)
    await asyncio.to_thread(trial.cluster.kill, victim)
    await asyncio.sleep(trial.pause)
    restart = asyncio.ensure_future(asyncio.to_thread(trial.cluster.restart, victim))
    followed = await following.ended()
    await restart
    counts = await asyncio.to_thread(judge_all, trial.ledger, followed)
    counts.seen["runs on the killed worker"] += runs
    return counts


async def worker_term(trial: Trial) -> Counts:
    """SIGTERM to the agents worker running most of the runs (a deploy, a scale-down): it
    drains and exits; a supervisor starts it again."""
    following = trial.follow(4)
    await trial.under_way(following, 4)
    victim, runs = await _busiest_worker(trial, following)
    await asyncio.to_thread(trial.cluster.terminate, victim)
    restart = asyncio.ensure_future(asyncio.to_thread(trial.cluster.restart, victim))
    followed = await following.ended()
    await restart
    counts = await asyncio.to_thread(judge_all, trial.ledger, followed)
    counts.seen["runs on the stopped worker"] += runs
    return counts


async def redis_restart(trial: Trial) -> Counts:
    """Redis (broker and channel layer) killed and started again, empty, while four runs are
    under way and two more wait in its queue."""
    following = trial.follow(6)
    await trial.under_way(following, 4)
    services = trial.cluster.services
    waiting = await asyncio.to_thread(services.queued, "agents")
    await asyncio.to_thread(services.stop_redis)
    await asyncio.sleep(1.0 + trial.pause)
    await asyncio.to_thread(services.start_redis)
    followed = await following.ended()
    counts = await asyncio.to_thread(judge_all, trial.ledger, followed)
    counts.seen["jobs waiting in the broker when it died"] += waiting
    return counts


async def postgres_restart(trial: Trial) -> Counts:
    """PostgreSQL stopped (every session ended) and started again two seconds later while
    runs are under way."""
    following = trial.follow(4)
    await trial.under_way(following, 4)
    services = trial.cluster.services
    await asyncio.to_thread(services.stop_postgres)
    await asyncio.sleep(2.0 + trial.pause)
    await asyncio.to_thread(services.start_postgres)
    followed = await following.ended()
    counts = await asyncio.to_thread(judge_all, trial.ledger, followed)
    repeated = await asyncio.to_thread(trial.ledger.repeated_runs, following.task_ids())
    counts.seen["runs started again after losing the database"] += repeated
    return counts


async def web_term(trial: Trial) -> Counts:
    """SIGTERM to the web process serving the open streams while blocking sends wait on it
    too (a deploy), on runs that outlast its drain; a supervisor starts it again. Streams
    resume through the front; a blocking sender whose answer is lost sends again with the
    same messageId."""
    trial.agent = "long"
    following = trial.follow(2)
    deadline = time.monotonic() + UNDER_WAY_SECONDS + SETTLE_SECONDS
    senders = [
        asyncio.ensure_future(
            blocking_send(trial.http, trial.url, trial.key, f"blocking {i}", deadline=deadline)
        )
        for i in range(2)
    ]
    await trial.under_way(following, 2)
    serving = Counter(f.served_by[-1] for f in following.seen if f.served_by)
    victim = serving.most_common(1)[0][0] if serving else "web1"
    await asyncio.to_thread(trial.cluster.terminate, victim)
    restart = asyncio.ensure_future(asyncio.to_thread(trial.cluster.restart, victim))
    followed = await following.ended()
    sent = list(await asyncio.gather(*senders))
    await wait_terminal(trial.ledger, [s.task_id for s in sent], deadline)
    await restart

    def judge() -> Counts:
        counts = judge_all(trial.ledger, followed)
        for one in sent:
            counts.add(judge_blocking(trial.ledger, one))
        return counts

    return await asyncio.to_thread(judge)


async def webhook_outage(trial: Trial) -> Counts:
    """The push receiver is down (connections refused) for three seconds while the runs
    write the events it should hear, then back: every event is delivered, once."""
    receiver = trial.receiver
    token = "fault-suite"

    def push(mid: str) -> dict[str, str]:
        return {"url": f"{receiver.url}/hook/{mid}", "token": token}

    following = trial.follow(4, push=push)
    await trial.under_way(following, 4)
    await asyncio.to_thread(receiver.stop)
    await asyncio.sleep(3.0 + trial.pause)
    await asyncio.to_thread(receiver.start)
    followed = await following.ended()
    deadline = time.monotonic() + SETTLE_SECONDS
    ids = [f.task_id for f in followed if f.task_id]
    while time.monotonic() < deadline:
        pending = await asyncio.to_thread(
            lambda: [
                d
                for t in ids
                for d in trial.ledger.deliveries(t)
                if d[1] not in ("delivered", "dead")
            ]
        )
        if not pending:
            break
        await asyncio.sleep(0.25)

    def judge() -> Counts:
        counts = judge_all(trial.ledger, followed)
        received = [r for r in receiver.requests() if r.answered == 200]
        for one in followed:
            if not one.task_id:
                continue
            expected = trial.ledger.pushed_seqs(one.task_id, PUSHED_KINDS)
            states = dict(trial.ledger.deliveries(one.task_id))
            bodies = [r.body for r in received if r.path == f"/hook/{one.message_id}"]
            unsettled = sum(1 for s in expected if states.get(s) not in ("delivered", "dead"))
            if unsettled:
                counts.stuck += unsettled
                counts.notes["a push delivery not settled"] += unsettled
            missing = max(0, len(expected) - len(set(bodies)))
            if missing:
                counts.lost += missing
                counts.notes["a push event never delivered"] += missing
            twice = len(bodies) - len(set(bodies))
            if twice:
                counts.duplicated += twice
                counts.notes["a push event delivered twice"] += twice
            if refused := trial.ledger.failed_push_attempts(one.task_id):
                counts.seen["push attempts that failed (to be retried)"] += refused
        return counts

    return await asyncio.to_thread(judge)


@dataclass(frozen=True)
class Fault:
    name: str
    strike: Callable[[Trial], Awaitable[Counts]]

    @property
    def what(self) -> str:
        return " ".join((self.strike.__doc__ or "").split("\n\n")[0].split())


FAULTS = [
    Fault("worker-sigkill", worker_kill),
    Fault("worker-sigterm", worker_term),
    Fault("redis-restart", redis_restart),
    Fault("postgres-restart", postgres_restart),
    Fault("web-sigterm", web_term),
    Fault("webhook-outage", webhook_outage),
]


# --- running -----------------------------------------------------------------------------------


def heal(cluster: Cluster) -> list[str]:
    """Start again whatever exited without being told to (as a supervisor would), and wait
    until every process is ready and the front sees every server up. Returns who was
    restarted."""
    revived = []
    for member in cluster.exited():
        revived.append(f"{member.name} (exit {member.popen.returncode if member.popen else '?'})")
        cluster.restart(member.name)
    for name in cluster.members:
        cluster.wait_ready(name)
    cluster.wait_front_up()
    return revived


@dataclass
class Outcome:
    fault: Fault
    trials: int = 0
    counts: Counts = field(default_factory=Counts)
    revived: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def run_fault(
    fault: Fault,
    cluster: Cluster,
    made: dict[str, Any],
    receiver: Any,
    *,
    trials: int,
    log: Callable[[str], None] = print,
) -> Outcome:
    outcome = Outcome(fault)
    ledger = Ledger(cluster.env["DATABASE_URL"])
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=0)
    # Each client's own deadline bounds its calls; this only outlasts the longest quiet wait
    # (a blocking send: A2A_BLOCKING_TIMEOUT_SECONDS, 60).
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        for n in range(1, trials + 1):
            outcome.revived += await asyncio.to_thread(heal, cluster)
            trial = Trial(cluster, made, ledger, http, receiver)
            started = time.monotonic()
            counts = await fault.strike(trial)
            outcome.trials += 1
            outcome.counts.add(counts)
            notes = "; ".join(f"{k} ×{v}" for k, v in (counts.notes + counts.seen).items())
            log(
                f"{fault.name} trial {n}/{trials}: {counts.tasks} tasks, stuck {counts.stuck}, "
                f"lost {counts.lost}, duplicated {counts.duplicated} "
                f"({time.monotonic() - started:.0f} s){'; ' + notes if notes else ''}"
            )
    outcome.revived += await asyncio.to_thread(heal, cluster)
    return outcome


def table(outcomes: list[Outcome]) -> str:
    headers = ["fault", "trials", "tasks", "stuck", "lost", "duplicated"]
    rows = [
        [o.fault.name, o.trials, o.counts.tasks, o.counts.stuck, o.counts.lost, o.counts.duplicated]
        for o in outcomes
    ]
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = [
        "  ".join(
            str(c).rjust(w) if i else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in [headers, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def notes(outcomes: list[Outcome]) -> str:
    out = []
    for outcome in outcomes:
        for note, n in outcome.counts.notes.most_common():
            out.append(f"{outcome.fault.name}: {note} ×{n}")
        for fact, n in outcome.counts.seen.most_common():
            out.append(f"{outcome.fault.name}: (seen) {fact} ×{n}")
        for revived in outcome.revived:
            out.append(f"{outcome.fault.name}: restarted after it exited unasked: {revived}")
    return "\n".join(out)


def receiver_for(run_dir: Path) -> Any:
    """The push receiver of the webhook fault: the test suite's (tests/e2e/webhook.py), a
    process of its own that the fault stops and starts on the same port."""
    from tests.e2e.webhook import Receiver

    return Receiver(run_dir / "receiver").start()
