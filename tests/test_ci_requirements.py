"""In CI (CI=true) a component the suite needs and cannot have fails the run, naming what is
missing; on a developer's machine the tests that need it skip with the same words.

scripts/test.sh and scripts/services.sh run here in a subprocess with a component's path set to
nowhere: each stops before it starts anything (no PostgreSQL, no Redis, no pytest)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import ROOT, require

NOWHERE = "/nonexistent/a2a-ci-requirements"
# Any executable passes the Chromium check: where a test is about the servers, this stands in.
AN_EXECUTABLE = "/bin/sh"
# Only so that a check that no longer stops (and goes on to start the servers and the suite)
# fails here instead of running for minutes.
GUARD_SECONDS = 20


def run(command: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=GUARD_SECONDS,
    )


def test_in_ci_make_test_stops_at_once_without_chromium():
    done = run("scripts/test.sh -q tests/browser", CI="true", A2A_CHROMIUM_BIN=NOWHERE)
    assert done.returncode != 0, done
    assert f"CI=true and Chromium ({NOWHERE}) is missing" in done.stderr, done.stderr
    assert "apt-get install --no-install-recommends chromium" in done.stderr, done.stderr
    assert "test: stopping: CI=true and the browser tests need Chromium" in done.stderr
    assert "PostgreSQL on" not in done.stderr, "the servers were started all the same"


@pytest.mark.parametrize(
    ("variable", "missing"),
    [
        ("A2A_PG_BIN", f"PostgreSQL cannot start: A2A_PG_BIN={NOWHERE} holds no initdb"),
        ("A2A_REDIS_SERVER", f"Redis cannot start: A2A_REDIS_SERVER={NOWHERE} is not"),
    ],
)
def test_make_test_stops_when_a_server_cannot_start(variable, missing):
    done = run(
        "scripts/test.sh -q tests/test_docs.py",
        CI="true",
        A2A_CHROMIUM_BIN=AN_EXECUTABLE,
        **{variable: NOWHERE},
    )
    assert done.returncode != 0, done
    assert missing in done.stderr, done.stderr
    assert "test: stopping: PostgreSQL and Redis are needed by the suite" in done.stderr
    assert "PostgreSQL on" not in done.stderr and "passed" not in done.stdout, done


@pytest.mark.parametrize(("ci", "says"), [("true", "cannot run"), ("", "browser tests will skip")])
def test_the_chromium_check_says_what_is_missing(ci, says):
    done = run(
        "source scripts/services.sh && services_ensure_chromium", CI=ci, A2A_CHROMIUM_BIN=NOWHERE
    )
    assert done.returncode == 1, done
    assert f"Chromium ({NOWHERE}) is missing" in done.stderr and says in done.stderr, done.stderr


def test_the_chromium_check_passes_for_an_executable_it_is_pointed_at():
    done = run(
        "source scripts/services.sh && services_ensure_chromium",
        CI="true",
        A2A_CHROMIUM_BIN=AN_EXECUTABLE,
    )
    assert done.returncode == 0 and done.stderr == "", done


def test_require_fails_in_ci_and_skips_elsewhere(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI lacks a component this test needs: Redis"):
        require(False, "Redis")
    require(True, "Redis")  # present: nothing happens
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="^Redis$"):
        require(False, "Redis")


def test_a_run_that_stops_early_leaves_the_servers_of_the_run_around_it_alone(tmp_path):
    # given: a server of a run in progress, as that run's exported SERVICES_DIR names it
    outer = tmp_path / "a2a-test-services.outer"
    (outer / "pg").mkdir(parents=True)
    server = subprocess.Popen(["sleep", "60"])
    try:
        (outer / "redis.pid").write_text(f"{server.pid}\n")
        # when: a run started inside it stops at once (no PostgreSQL)
        done = run(
            "scripts/test.sh -q tests/test_docs.py",
            CI="true",
            A2A_CHROMIUM_BIN=AN_EXECUTABLE,
            A2A_PG_BIN=NOWHERE,
            SERVICES_DIR=str(outer),
        )
        # then: it stopped, and the outer run's server and its folder are untouched
        assert done.returncode != 0, done
        assert server.poll() is None, "the inner run stopped the outer run's server"
        assert (outer / "pg").is_dir()
    finally:
        server.kill()
        server.wait()
