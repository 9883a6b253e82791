"""The PostgreSQL backend's check of pooled connections (a2a_platform/postgresql/base.py), on
the real server: a pooled connection whose session the server ended (as a restart ends them
all) is replaced as it is taken, where Django's own backend hands it out dead."""

from __future__ import annotations

import copy
import time

import psycopg
import pytest
from django.db import connections
from django.db.backends.postgresql.base import DatabaseWrapper as DjangoWrapper

from a2a_platform.postgresql.base import DatabaseWrapper


def a_pool_of_one(wrapper_class: type[DjangoWrapper], alias: str) -> DjangoWrapper:
    settings = copy.deepcopy(connections["default"].settings_dict)
    settings["OPTIONS"]["pool"] = {"min_size": 1, "max_size": 1, "timeout": 10}
    settings["CONN_HEALTH_CHECKS"] = False
    return wrapper_class(settings, alias=alias)


def pid_of(wrapper: DjangoWrapper) -> int:
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def end_session(wrapper: DjangoWrapper, pid: int) -> None:
    """What a restart does to an idle pooled connection: its session ended by the server."""
    params = wrapper.get_connection_params()
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        deadline = time.monotonic() + 10
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
            assert time.monotonic() < deadline
            time.sleep(0.02)


@pytest.mark.django_db(transaction=True)
def test_a_pooled_connection_the_server_ended_is_replaced_as_it_is_taken():
    ours = a_pool_of_one(DatabaseWrapper, "pool_check")
    try:
        first = pid_of(ours)
        ours.close()  # back to the pool, idle
        end_session(ours, first)
        assert pid_of(ours) != first  # a new session, and the query ran on it
    finally:
        ours.close()
        ours.close_pool()


@pytest.mark.django_db(transaction=True)
def test_djangos_own_backend_hands_out_the_dead_connection():
    """The check above is what makes the difference (with CONN_HEALTH_CHECKS off)."""
    djangos = a_pool_of_one(DjangoWrapper, "pool_nocheck")
    try:
        first = pid_of(djangos)
        djangos.close()
        end_session(djangos, first)
        with pytest.raises(Exception) as caught:
            pid_of(djangos)
        assert "terminat" in str(caught.value) or "closed" in str(caught.value)
    finally:
        djangos.close()
        djangos.close_pool()
