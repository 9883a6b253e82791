"""/healthz and /readyz on real daphne processes: readiness names what cannot be reached."""

from __future__ import annotations

import httpx
import pytest

from ..conftest import _free_port, start_web, stop_process

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_live_platform_is_alive_and_ready(live_platform):
    with httpx.Client(timeout=30) as http:
        assert http.get(f"{live_platform.url}/healthz").json() == {"status": "ok"}
        response = http.get(f"{live_platform.url}/readyz")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "status": "ready",
        "checks": {"database": "ok", "broker": "ok", "channel_layer": "ok"},
    }


def test_readiness_names_what_is_unreachable(live_platform, tmp_path):
    closed = f"redis://127.0.0.1:{_free_port()}/0"  # nothing listens there
    port = _free_port()
    env = {**live_platform.env, "CELERY_BROKER_URL": closed, "REDIS_URL": closed}
    web = start_web(port, env, tmp_path / "daphne.log")
    try:
        with httpx.Client(timeout=30) as http:
            assert http.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
            response = http.get(f"http://127.0.0.1:{port}/readyz")
    finally:
        stop_process(web)
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["status"] == "not ready"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["broker"].startswith("unreachable")
    assert body["checks"]["channel_layer"].startswith("unreachable")
