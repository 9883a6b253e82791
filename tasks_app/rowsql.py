"""The statements of a run's event path (tasks_app.services), as SQL written once per model
and shape instead of built and compiled by the ORM on every call.

An echo run writes four events, each a transaction of a row lock, an INSERT and an UPDATE;
building those through the ORM was most of an agent worker's CPU (docs/decisions.md, "Request
hot paths"). The statements here are what `Model.save()` and `select_for_update().get()` send,
for models without save signals (none in this project has any): the same columns, the same
`pre_save` (auto_now timestamps, defaults) and the same value preparation (`get_db_prep_save`),
so the rows are the ones the ORM would write, and instances come back through `Model.from_db`
as the ORM makes them. On other databases (SQLite: no FOR UPDATE) each function is the ORM call
it stands for.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from typing import Any, TypeVar

from django.db import connection, models, transaction
from django.db.backends.utils import CursorWrapper

try:  # Django's PostgreSQL backend (psycopg 3)
    from django.db.backends.postgresql.base import CursorDebugWrapper, ServerBindingCursor
except ImportError:  # psycopg not installed: only SQLite is used
    CursorDebugWrapper = ServerBindingCursor = None


if CursorDebugWrapper is not None:

    class _LoggedCursor(CursorDebugWrapper):  # type: ignore[misc,valid-type]
        """Where queries are logged (DEBUG, tests), a statement is logged with its values, as
        the ORM's are: Django's own wrapper reads them from the client-side binding."""

        def execute(self, sql: str, params: Any = None) -> Any:
            with self.debug_sql(self.db.ops.compose_sql(sql, params), params):
                return CursorWrapper.execute(self, sql, params)


M = TypeVar("M", bound=models.Model)


def cursor() -> Any:
    """A cursor for the statements written once. On PostgreSQL it binds parameters on the
    server (the ORM's cursors bind them in the client), so that each connection prepares a
    statement once it has run a few times (`DATABASE_PREPARED_STATEMENTS`), and PostgreSQL
    parses and plans it once instead of on every call. Wrapped as `connection.cursor()` wraps
    its cursors: errors become Django's, and queries are logged where Django logs them."""
    if connection.vendor != "postgresql":
        return connection.cursor()
    connection.close_if_health_check_failed()  # as connection.cursor() does
    connection.ensure_connection()
    raw = ServerBindingCursor(connection.connection)
    connection.validate_thread_sharing()
    if connection.queries_logged:
        return _LoggedCursor(raw, connection)
    return connection.make_cursor(raw)


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


@functools.cache
def names(model: type[models.Model]) -> tuple[str, dict[str, str]]:
    """The model's table and its columns by field name, quoted: for statements written once."""
    columns = {f.name: _q(f.column) for f in model._meta.concrete_fields}
    return _q(model._meta.db_table), columns


def _fields(model: type[models.Model]) -> list[models.Field[Any, Any]]:
    return list(model._meta.concrete_fields)


@functools.cache
def _lock_sql(model: type[models.Model]) -> str:
    columns = ", ".join(_q(f.column) for f in _fields(model))
    return (
        f"SELECT {columns} FROM {_q(model._meta.db_table)} "
        f"WHERE {_q(model._meta.pk.column)} = %s FOR UPDATE"
    )


def lock(model: type[M], pk: Any) -> M | None:
    """`model.objects.select_for_update().filter(pk=pk).first()`: the row, locked until the
    transaction ends, or None."""
    if connection.vendor != "postgresql":
        return model._default_manager.select_for_update().filter(pk=pk).first()
    _reads("lock()")
    with cursor() as cur:
        cur.execute(_lock_sql(model), [pk])
        row = cur.fetchone()
    if row is None:
        return None
    fields = _fields(model)
    values = [
        f.from_db_value(v, None, connection) if hasattr(f, "from_db_value") else v  # type: ignore[attr-defined]
        for f, v in zip(fields, row, strict=True)
    ]
    return model.from_db(connection.alias, [f.attname for f in fields], values)


@functools.cache
def _insert_sql(model: type[models.Model]) -> tuple[str, tuple[models.Field[Any, Any], ...]]:
    pk = model._meta.pk
    fields = tuple(f for f in _fields(model) if not (f is pk and f.db_returning))
    placeholders = ", ".join(["%s"] * len(fields))
    sql = (
        f"INSERT INTO {_q(model._meta.db_table)} ({', '.join(_q(f.column) for f in fields)}) "
        f"VALUES ({placeholders})"
    )
    if pk.db_returning:  # an auto id: the database numbers the row
        sql += f" RETURNING {_q(pk.column)}"
    return sql, fields


# Statements of the `together()` block under way on this thread (the thread's connection).
_batch = threading.local()


class Batch:
    """What a `together()` block read: the row of its `read`, if it had one."""

    row: tuple[Any, ...] | None = None


@contextlib.contextmanager
def together(read: tuple[str, list[Any]] | None = None) -> Iterator[Batch]:
    """One transaction of the `insert`, `update` and `execute` statements in the block. On
    PostgreSQL they are held and sent when the block ends as one statement (`_as_one`): one
    round trip, one transaction, and a statement the connection can prepare. Their results are
    not read: an auto id is not set on the instance, so only rows whose ids nobody needs
    afterwards go in the block. The statements run on one snapshot, so none sees what another
    wrote, and no two may write the same row (`lock` and `append`, which read their results,
    refuse to run in it). Elsewhere the block is `transaction.atomic()`. If the block raises,
    nothing is written.

    `read`: a SELECT of one row, sent in the same round trip; it sees the database as it was
    before the block's writes (on PostgreSQL the snapshot they all share; elsewhere it is run
    first). Its row is the yielded Batch's `row` once the block has ended."""
    batch = Batch()
    if connection.vendor != "postgresql":
        with transaction.atomic():
            if read is not None:
                with connection.cursor() as cur:
                    cur.execute(*read)
                    batch.row = cur.fetchone()
            yield batch
        return
    if _held() is not None:
        raise RuntimeError("rowsql.together() blocks do not nest")
    _batch.statements = statements = []
    try:
        yield batch
    finally:
        _batch.statements = None
    if not statements and read is None:
        return
    reading = () if read is None else (read[0],)
    with cursor() as cur:
        cur.execute(
            _as_one(tuple(sql for sql, _ in statements), *reading),
            [p for _, ps in statements for p in ps] + ([] if read is None else list(read[1])),
        )
        if read is not None:
            batch.row = cur.fetchone()


@functools.lru_cache(maxsize=64)
def _as_one(statements: tuple[str, ...], read: str = "SELECT 1") -> str:
    """The statements as one: each a data-modifying WITH query, which PostgreSQL runs to
    completion whether or not anything reads its result, and `read` the main query. One
    statement, so the connection can prepare it (several separated by semicolons cannot be)."""
    if len(statements) == 1 and read == "SELECT 1":
        return statements[0]
    if not statements:
        return read
    return "WITH " + ", ".join(f"s{i} AS ({sql})" for i, sql in enumerate(statements)) + f" {read}"


def _held() -> list[tuple[str, list[Any]]] | None:
    """The statements of this thread's `together()` block, if one is under way."""
    return getattr(_batch, "statements", None)


def _reads(what: str) -> None:
    if _held() is not None:
        raise RuntimeError(f"rowsql.{what} reads its result, which a together() block does not")


def execute(sql: str, params: list[Any]) -> None:
    """Run a statement whose result is not read, or hold it for the `together()` block."""
    held = _held()
    if held is not None:
        held.append((sql, params))
        return
    with cursor() as cur:
        cur.execute(sql, params)


def insert(instance: M) -> M:
    """`instance.save(force_insert=True)` (in a `together()` block, held until it ends)."""
    if connection.vendor != "postgresql":
        instance.save(force_insert=True)
        return instance
    model = type(instance)
    sql, fields = _insert_sql(model)
    params = [f.get_db_prep_save(f.pre_save(instance, True), connection) for f in fields]
    if model._meta.pk.db_returning and _held() is None:
        with cursor() as cur:
            cur.execute(sql, params)
            setattr(instance, model._meta.pk.attname, cur.fetchone()[0])
    else:
        execute(sql, params)
    instance._state.adding = False
    instance._state.db = connection.alias
    return instance


@functools.cache
def _update_sql(
    model: type[models.Model], names: tuple[str, ...]
) -> tuple[str, tuple[models.Field[Any, Any], ...]]:
    meta = model._meta
    fields = tuple(meta.get_field(n) for n in _with_auto_now(model, names))
    assignments = ", ".join(f"{_q(f.column)} = %s" for f in fields)
    sql = f"UPDATE {_q(meta.db_table)} SET {assignments} WHERE {_q(meta.pk.column)} = %s"
    return sql, fields  # type: ignore[return-value]


def _with_auto_now(model: type[models.Model], names: tuple[str, ...]) -> tuple[str, ...]:
    """`names` and the model's auto_now fields (which save(update_fields=...) would leave)."""
    auto_now = [f.name for f in _fields(model) if getattr(f, "auto_now", False)]
    return (*names, *[n for n in auto_now if n not in names])


def update(instance: models.Model, names: tuple[str, ...]) -> None:
    """`instance.save(update_fields=names)` for a row that exists, with its auto_now fields
    (`updated_at`) written too, as a whole-row save() writes them."""
    if connection.vendor != "postgresql":
        instance.save(update_fields=_with_auto_now(type(instance), names))
        return
    sql, fields = _update_sql(type(instance), names)
    params = [f.get_db_prep_save(f.pre_save(instance, False), connection) for f in fields]
    execute(sql, [*params, instance.pk])


@functools.cache
def _append_sql(
    model: type[models.Model], within: str, order: str, unique: tuple[str, ...]
) -> tuple[str, tuple[models.Field[Any, Any], ...]]:
    meta = model._meta
    pk = meta.pk
    fields = tuple(f for f in _fields(model) if not (f is pk and f.db_returning))
    scope, place = meta.get_field(within), meta.get_field(order)
    values = ", ".join(
        f"COALESCE(MAX({_q(place.column)}) + 1, 0)" if f is place else "%s" for f in fields
    )
    conflict = ", ".join(_q(meta.get_field(n).column) for n in unique)
    sql = (
        f"INSERT INTO {_q(meta.db_table)} ({', '.join(_q(f.column) for f in fields)}) "
        f"SELECT {values} FROM {_q(meta.db_table)} WHERE {_q(scope.column)} = %s "
        f"ON CONFLICT ({conflict}) DO NOTHING "
        f"RETURNING {_q(pk.column)}, {_q(place.column)}"
    )
    return sql, tuple(f for f in fields if f is not place)


def append(instance: M, *, within: str, order: str, unique: tuple[str, ...]) -> bool:
    """INSERT `instance` after the last row with its `within` value (its `order` field becomes
    that row's plus one, or 0), unless a row with its `unique` fields exists: then nothing is
    written and False returned. One statement where the ORM takes a read for the position (and
    one for the conflict). The caller holds a lock that orders appends to the same `within`."""
    model = type(instance)
    if connection.vendor != "postgresql":
        place = model._meta.get_field(order)
        if model._default_manager.filter(
            **{n: getattr(instance, model._meta.get_field(n).attname) for n in unique}
        ).exists():
            return False
        last = (
            model._default_manager.filter(
                **{within: getattr(instance, model._meta.get_field(within).attname)}
            )
            .order_by(f"-{order}")
            .values_list(order, flat=True)
            .first()
        )
        setattr(instance, place.attname, 0 if last is None else last + 1)
        instance.save(force_insert=True)
        return True
    _reads("append()")
    sql, fields = _append_sql(model, within, order, unique)
    params = [f.get_db_prep_save(f.pre_save(instance, True), connection) for f in fields]
    scope = model._meta.get_field(within)
    with cursor() as cur:
        cur.execute(sql, [*params, getattr(instance, scope.attname)])
        row = cur.fetchone()
    if row is None:
        return False
    setattr(instance, model._meta.pk.attname, row[0])
    setattr(instance, model._meta.get_field(order).attname, row[1])
    instance._state.adding = False
    instance._state.db = connection.alias
    return True
