"""The platform's side of bench/compare.py's set-up, run inside the platform under test.

    <platform python> bench/platform_seed.py --platform-dir DIR check
    <platform python> bench/platform_seed.py --platform-dir DIR setup --agents '{"echo": {}}'
    <platform python> bench/platform_seed.py --platform-dir DIR seed-tasks --agent scale1000 \\
        --start 0 --count 1000
    <platform python> bench/platform_seed.py --platform-dir DIR issuer --issuer URL \\
        --jwks-uri URL --audience URL
    <platform python> bench/platform_seed.py --platform-dir DIR tenants --spec \\
        '{"quiet": {"agents": {"echo": {}}}, "noisy": {"agents": {"slow": {"delay_seconds": 2}},
          "limits": {"running_runs": 50}}}'

It imports the platform from `--platform-dir` (a worktree of another commit, say), never the
copy installed in the venv, and prints one JSON object. Settings come from the environment, as
for the platform's own processes (DATABASE_URL unset: the embedded profile's SQLite).

`seed-tasks` writes stored tasks with one INSERT ... SELECT over a series per table (tasks,
their user message, their artifact): finished echo tasks, 90 % completed, 5 % failed, 5 %
canceled, ten per context, one second apart, ids `00000000-0000-4000-8000-<i, 12 digits>` (the
load client derives them from i). Columns it does not know get their model default or NULL,
so a column added to the models does not break it; a NOT NULL column with no default says
where to add it (`COLUMNS`). Afterwards `refresh_counters()` rebuilds any per-state counter
table the platform keeps for totalSize, through the platform's own helper when it has one.

`tenants` sets up several tenants as `setup` does, in one start of the platform's code, and
puts those given `limits` on a plan of their own (`agents.models.Plan`); a platform without
plans, or whose Plan lacks one of the limits, answers `"supported": false` and why, so that a
comparison with an older commit says so instead of failing.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

SEED_OWNER_PRINCIPAL = "bench"
STATES = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED")


def boot(platform_dir: Path) -> None:
    sys.path.insert(0, str(platform_dir))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "a2a_platform.settings")
    import django

    django.setup()
    import tasks_app

    where = Path(tasks_app.__file__).resolve()
    if platform_dir.resolve() not in where.parents:
        raise SystemExit(f"tasks_app was imported from {where}, not from {platform_dir}")


# --- set-up: tenant, agents, key ----------------------------------------------------------


def setup(tenant_slug: str, agents: dict[str, dict[str, Any]]) -> dict[str, Any]:
    from agents.cards import agent_base_url
    from agents.models import Agent, Tenant
    from agents.services import agent_create, api_key_create, tenant_create

    tenant = Tenant.objects.filter(slug=tenant_slug).first() or tenant_create(
        slug=tenant_slug, name="Bench"
    )
    out: dict[str, Any] = {"tenant_id": tenant.pk, "agents": {}}
    for slug, config in agents.items():
        agent = tenant.agents.filter(slug=slug).first() or agent_create(
            tenant=tenant,
            slug=slug,
            name=slug,
            description=f"The {slug} agent (bench).",
            executor_kind="echo",
            executor_config=config,
            visibility=Agent.Visibility.PRIVATE,
            skills=[{"id": "echo", "name": "Echo", "description": "Repeats.", "tags": ["bench"]}],
        )
        out["agents"][slug] = {"id": agent.pk, "url": agent_base_url(agent)}
    _, secret = api_key_create(tenant=tenant, name="bench", principal=SEED_OWNER_PRINCIPAL)
    out["key"] = secret
    out["owner"] = f"key:{SEED_OWNER_PRINCIPAL}"  # agents.auth: the owner of a key's tasks
    return out


# --- a token issuer -----------------------------------------------------------------------


def issuer(tenant_slug: str, *, issuer_url: str, jwks_uri: str, audience: str) -> dict[str, Any]:
    """The bench's own token issuer registered for the tenant (bench/compare.py serves its key
    set); `supported` False where the platform has no token issuers."""
    from agents import models

    if not hasattr(models, "Issuer"):
        return {"supported": False, "reason": "this platform has no agents.models.Issuer"}
    tenant = models.Tenant.objects.get(slug=tenant_slug)
    models.Issuer.objects.filter(tenant=tenant, issuer=issuer_url).delete()
    models.Issuer.objects.create(
        tenant=tenant,
        name="bench",
        issuer=issuer_url,
        jwks_uri=jwks_uri,
        audiences=[audience],
        algorithms=["RS256"],
    )
    return {"supported": True}


# --- a plan for a tenant -------------------------------------------------------------------


def plan(tenant_slug: str, limits: dict[str, int]) -> dict[str, Any]:
    """The tenant on a plan of its own (`bench-<tenant>`) with these limits, the others at
    their defaults (unlimited); `supported` False, and why, where the platform cannot."""
    from django.core.exceptions import FieldDoesNotExist, ValidationError

    from agents import models

    plan_model = getattr(models, "Plan", None)
    if plan_model is None:
        return {"supported": False, "reason": "this platform has no agents.models.Plan"}
    try:
        models.Tenant._meta.get_field("plan")
    except FieldDoesNotExist:
        return {"supported": False, "reason": "this platform's Tenant has no plan"}
    names = {f.name for f in plan_model._meta.concrete_fields}
    unknown = sorted(set(limits) - names)
    if unknown:
        return {
            "supported": False,
            "reason": f"this platform's Plan has no {', '.join(unknown)} "
            f"(it has {', '.join(sorted(names - {'id', 'name', 'description'}))})",
        }
    tenant = models.Tenant.objects.get(slug=tenant_slug)
    made = plan_model(name=f"bench-{tenant_slug}", **limits)
    try:
        made.full_clean()
    except ValidationError as exc:
        raise SystemExit(f"plan {limits}: {exc.message_dict}") from exc
    made.save()
    tenant.plan = made
    tenant.save(update_fields=["plan"])
    stored = {name: getattr(made, name) for name in sorted(names - {"id", "description"})}
    return {"supported": True, "plan": stored}


def tenants(spec: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each tenant of `spec` with its agents and a key (`setup`), and those given `limits` on
    a plan (`plan`); with the platform's task table, which the load client reads."""
    from tasks_app.models import Task

    out: dict[str, Any] = {"task_table": Task._meta.db_table, "tenants": {}, "plans": {}}
    for slug, wanted in spec.items():
        out["tenants"][slug] = setup(slug, wanted.get("agents", {}))
        if "limits" in wanted:
            out["plans"][slug] = plan(slug, wanted["limits"])
    return out


# --- seeding stored tasks -----------------------------------------------------------------


class Sql:
    """The few expressions that differ between PostgreSQL and SQLite."""

    def __init__(self, vendor: str) -> None:
        self.pg = vendor == "postgresql"
        if not self.pg and vendor != "sqlite":
            raise SystemExit(f"seeding knows postgresql and sqlite, not {vendor}")

    def series(self, start: int, stop: int) -> tuple[str, str]:
        """(WITH prefix, FROM clause) yielding i from start to stop inclusive."""
        if self.pg:
            return "", f"generate_series({start}, {stop}) AS g(i)"
        return (
            f"WITH RECURSIVE g(i) AS (SELECT {start} UNION ALL SELECT i + 1 FROM g "
            f"WHERE i < {stop}) ",
            "g",
        )

    def task_id(self, i: str = "i") -> str:
        if self.pg:
            return f"('00000000-0000-4000-8000-' || lpad(({i})::text, 12, '0'))::uuid"
        return f"('00000000000040008000' || printf('%012d', {i}))"  # Django: uuid as hex

    def task_id_text(self, i: str = "i") -> str:
        return f"'00000000-0000-4000-8000-' || {self.lpad12(i)}"

    def lpad12(self, i: str) -> str:
        return f"lpad(({i})::text, 12, '0')" if self.pg else f"printf('%012d', {i})"

    def ago(self, i: str = "i") -> str:
        """A timestamp i seconds before now, minus a day (older than anything live)."""
        if self.pg:
            return f"(now() - interval '1 day' - make_interval(secs => {i}))"
        return f"strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 day', '-' || ({i}) || ' seconds')"

    def iso(self, i: str = "i") -> str:
        if self.pg:
            return f"to_char({self.ago(i)} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
        return f"strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-1 day', '-' || ({i}) || ' seconds')"

    def obj(self, *pairs: str) -> str:
        return ("jsonb_build_object(" if self.pg else "json_object(") + ", ".join(pairs) + ")"

    def arr(self, *items: str) -> str:
        return ("jsonb_build_array(" if self.pg else "json_array(") + ", ".join(items) + ")"

    def text(self, expr: str) -> str:
        return f"({expr})::text" if self.pg else f"CAST(({expr}) AS TEXT)"

    def now(self) -> str:
        return "now()" if self.pg else "strftime('%Y-%m-%d %H:%M:%f', 'now')"

    def state(self, i: str = "i") -> str:
        return (
            f"CASE WHEN ({i}) % 20 = 0 THEN '{STATES[1]}' WHEN ({i}) % 20 = 1 THEN '{STATES[2]}' "
            f"ELSE '{STATES[0]}' END"
        )


def _columns(sql: Sql, *, tenant_id: int, agent_id: int, owner: str) -> dict[str, dict[str, str]]:
    """Per table (model label), the SQL expression of each column the seed sets itself."""
    ctx = f"'ctx-' || {sql.text('i / 10')}"
    text = f"'seeded ' || {sql.text('i')}"
    part = sql.obj("'text'", text)
    user_message = sql.obj(
        "'messageId'", f"'m-' || {sql.text('i')}",
        "'contextId'", ctx,
        "'taskId'", sql.task_id_text(),
        "'role'", "'ROLE_USER'",
        "'parts'", sql.arr(part),
    )  # fmt: skip
    agent_message = sql.obj(
        "'messageId'", f"'a-' || {sql.text('i')}",
        "'contextId'", ctx,
        "'taskId'", sql.task_id_text(),
        "'role'", "'ROLE_AGENT'",
        "'parts'", sql.arr(sql.obj("'text'", f"'Echoed: ' || {text}")),
    )  # fmt: skip
    artifact = sql.obj(
        "'artifactId'", f"'art-' || {sql.text('i')}",
        "'name'", "'echo'",
        "'parts'", sql.arr(part),
    )  # fmt: skip
    return {
        "tasks_app.Task": {
            "id": sql.task_id(),
            "tenant_id": str(int(tenant_id)),
            "agent_id": str(int(agent_id)),
            "context_id": ctx,
            "owner": "'" + owner.replace("'", "''") + "'",
            "state": sql.state(),
            "status_message": agent_message,
            "status_timestamp": sql.ago(),
            "last_seq": "4",
            "created_at": sql.ago(),
            "updated_at": sql.ago(),
        },
        "tasks_app.Message": {
            "task_id": sql.task_id(),
            "position": "0",
            "message_id": f"'m-' || {sql.text('i')}",
            "role": "'ROLE_USER'",
            "data": user_message,
            "created_at": sql.ago(),
        },
        "tasks_app.Artifact": {
            "task_id": sql.task_id(),
            "artifact_id": f"'art-' || {sql.text('i')}",
            "position": "0",
            "data": artifact,
            "updated_at": sql.ago(),
        },
    }


def _insert(model: Any, known: dict[str, str], *, start: int, stop: int, sql: Sql) -> None:
    """INSERT INTO <model's table> (...) SELECT ... over i in [start, stop]."""
    from django.db import connection

    names, exprs, params = [], [], []
    for field in model._meta.concrete_fields:
        column = field.column
        if column in known:
            names.append(column)
            exprs.append(known[column].replace("%", "%%"))  # the statement has parameters
            continue
        if field.primary_key and field.get_internal_type() in ("AutoField", "BigAutoField"):
            continue  # the sequence fills it
        default = field.get_default()
        if default is None and not field.null:
            raise SystemExit(
                f"{model._meta.label}.{field.name} is NOT NULL with no default: give it a value "
                "in bench/platform_seed.py _columns()"
            )
        names.append(column)
        exprs.append("%s")
        params.append(field.get_db_prep_save(default, connection))
    prefix, source = sql.series(start, stop)
    table = connection.ops.quote_name(model._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(n) for n in names)
    statement = f"INSERT INTO {table} ({columns}) {prefix}SELECT {', '.join(exprs)} FROM {source}"
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def seed_tasks(*, agent_slug: str, tenant_slug: str, start: int, count: int) -> dict[str, Any]:
    """Stored, finished tasks i = start .. start + count - 1 for one agent, owned by the key
    setup() made. Rows per task: the task, its user message, its artifact."""
    from django.apps import apps
    from django.db import connection, transaction

    from agents.models import Agent

    agent = Agent.objects.select_related("tenant").get(tenant__slug=tenant_slug, slug=agent_slug)
    sql = Sql(connection.vendor)
    known = _columns(
        sql, tenant_id=agent.tenant_id, agent_id=agent.pk, owner=f"key:{SEED_OWNER_PRINCIPAL}"
    )
    started = time.monotonic()
    batch = 250_000  # bounded transactions (and SQLite's recursion) for the million
    for first in range(start, start + count, batch):
        last = min(first + batch, start + count) - 1
        with transaction.atomic():
            for label, columns in known.items():
                _insert(apps.get_model(label), columns, start=first, stop=last, sql=sql)
    seeded = time.monotonic() - started
    counters = refresh_counters(agent=agent)
    with connection.cursor() as cursor:  # fresh planner statistics, as a live table would have
        for label in known:
            table = connection.ops.quote_name(apps.get_model(label)._meta.db_table)
            cursor.execute(f"ANALYZE {table}")
    return {"seeded": count, "seconds": round(seeded, 1), "counters": counters}


def refresh_counters(*, agent: Any) -> str:
    """Bring any per-state task counter (for ListTasks' totalSize) in line with the rows the
    seed wrote behind the ORM's back. Looks for a counter model in tasks_app and for a helper
    named like a recount in the platform's modules; says what it did."""
    from django.apps import apps

    counters = [
        m for m in apps.get_app_config("tasks_app").get_models() if "count" in m.__name__.lower()
    ]
    if not counters:
        return "no counter table"
    for module_name in ("tasks_app.services", "tasks_app.counters", "tasks_app.selectors"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name, func in inspect.getmembers(module, inspect.isfunction):
            lowered = name.lower()
            if func.__module__ != module_name or "count" not in lowered:
                continue
            if not any(
                word in lowered
                for word in ("rebuild", "refresh", "recount", "recompute", "reconcile")
            ):
                continue
            accepted = inspect.signature(func).parameters
            kwargs = {k: v for k, v in (("agent", agent), ("agent_id", agent.pk)) if k in accepted}
            func(**kwargs)
            return f"{module_name}.{name}({', '.join(kwargs)})"
    return (
        f"counter table(s) {[m._meta.db_table for m in counters]} found but no recount helper: "
        "adapt refresh_counters() in bench/platform_seed.py"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform-dir", type=Path, required=True)
    parser.add_argument("--tenant", default="bench")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("check")
    commands.add_parser("setup").add_argument("--agents", required=True)
    commands.add_parser("tenants").add_argument(
        "--spec", required=True, help='JSON: {tenant: {"agents": {...}, "limits": {...}}}'
    )
    issued = commands.add_parser("issuer")
    for name in ("--issuer", "--jwks-uri", "--audience"):
        issued.add_argument(name, required=True)
    seed = commands.add_parser("seed-tasks")
    seed.add_argument("--agent", required=True)
    seed.add_argument("--start", type=int, default=0)
    seed.add_argument("--count", type=int, required=True)
    args = parser.parse_args()
    boot(args.platform_dir)
    if args.command == "check":
        import django
        from django.db import connection

        import tasks_app
        from tasks_app.models import Task

        result: dict[str, Any] = {
            "tasks_app": tasks_app.__file__,
            "django": django.get_version(),
            "database": connection.vendor,
            "task_table": Task._meta.db_table,
        }
    elif args.command == "setup":
        result = setup(args.tenant, json.loads(args.agents))
    elif args.command == "tenants":
        result = tenants(json.loads(args.spec))
    elif args.command == "issuer":
        result = issuer(
            args.tenant, issuer_url=args.issuer, jwks_uri=args.jwks_uri, audience=args.audience
        )
    else:
        result = seed_tasks(
            agent_slug=args.agent, tenant_slug=args.tenant, start=args.start, count=args.count
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
