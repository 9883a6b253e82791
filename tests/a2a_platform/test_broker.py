"""The embedded profile's filesystem broker never hands a consumer a half-written message; the
production profile's Redis broker shares one client per channel and delivers every message."""

from __future__ import annotations

import threading

from kombu import Connection

import a2a_platform.celery  # noqa: F401  (installs the atomic transport, as every process does)

MESSAGES = 300
PAYLOAD = "x" * 200_000  # big messages widen the window a non-atomic write leaves open


def test_concurrent_producer_and_consumer_see_only_whole_messages(tmp_path):
    options = {
        "data_folder_in": str(tmp_path),
        "data_folder_out": str(tmp_path),
        "control_folder": str(tmp_path / "control"),
        "polling_interval": 0.001,
    }
    received: list[int] = []
    errors: list[BaseException] = []

    def consume() -> None:
        with Connection("filesystem://", transport_options=options) as connection:
            queue = connection.SimpleQueue("race")
            try:
                while len(received) < MESSAGES:
                    message = queue.get(timeout=10)
                    assert message.payload["pad"] == PAYLOAD
                    received.append(message.payload["n"])
                    message.ack()
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

    consumer = threading.Thread(target=consume)
    consumer.start()
    with Connection("filesystem://", transport_options=options) as connection:
        queue = connection.SimpleQueue("race")
        for n in range(MESSAGES):
            queue.put({"n": n, "pad": PAYLOAD})
    consumer.join(60)
    assert not errors, errors[0]
    assert sorted(received) == list(range(MESSAGES))


def test_a_message_file_appears_in_the_queue_only_once_complete(tmp_path, monkeypatch):
    """Deterministic form of the race: while the producer is still writing, the queue folder
    must not show a `<queue>.msg` file (kombu's own transport shows an empty one)."""
    import builtins

    options = {
        "data_folder_in": str(tmp_path),
        "data_folder_out": str(tmp_path),
        "control_folder": str(tmp_path / "control"),
    }
    visible_while_writing: list[list[str]] = []
    real_open = builtins.open

    class Spy:
        def __init__(self, f):
            self.f = f

        def write(self, data):
            visible_while_writing.append(
                [p.name for p in tmp_path.iterdir() if p.name.endswith(".spy.msg")]
            )
            return self.f.write(data)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self.f.__exit__(*exc)

    def spying_open(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        return Spy(f) if "w" in mode and str(file).startswith(str(tmp_path)) else f

    with Connection("filesystem://", transport_options=options) as connection:
        queue = connection.SimpleQueue("spy")
        monkeypatch.setattr(builtins, "open", spying_open)
        queue.put({"n": 1})
        monkeypatch.undo()
        assert visible_while_writing == [[]]
        assert queue.get(timeout=1).payload == {"n": 1}


def test_a_binding_another_thread_is_still_writing_does_not_drop_messages(tmp_path):
    """kombu records a binding in a process-wide state before it writes the exchange table. A
    thread that binds the same queue in between must still find the table written before it
    publishes, or its messages are routed nowhere."""
    import uuid

    options = {
        "data_folder_in": str(tmp_path),
        "data_folder_out": str(tmp_path),
        "control_folder": str(tmp_path / "control"),
    }
    name = f"late-{uuid.uuid4().hex}"
    with Connection("filesystem://", transport_options=options) as connection:
        channel = connection.default_channel
        channel.exchange_declare(name, "direct", durable=True)
        # Another thread has recorded the binding and not yet written the table.
        channel.state.binding_declare(name, name, name, None)
        assert not (tmp_path / "control" / f"{name}.exchange").exists()
        queue = connection.SimpleQueue(name)
        queue.put({"n": 1})
        assert queue.get(timeout=1).payload == {"n": 1}


def _redis_url() -> str:
    import os

    from tests.conftest import require

    url = os.environ.get("REDIS_URL", "")
    require(bool(url), "Redis (REDIS_URL; `make test` starts one)")
    return url


def test_the_redis_broker_shares_one_client_per_channel_and_delivers_every_message():
    from a2a_platform.broker import RedisChannel

    url = _redis_url()
    with Connection(url, transport_options={"visibility_timeout": 1}) as connection:
        channel = connection.default_channel
        assert isinstance(channel, RedisChannel)  # installed for redis:// URLs
        client = channel._create_client()
        assert channel._create_client() is client
        queue = connection.SimpleQueue(f"shared-{threading.get_ident()}")
        for n in range(20):
            queue.put({"n": n})
        got = []
        for _ in range(20):
            message = queue.get(timeout=5)
            got.append(message.payload["n"])
            message.ack()
        assert sorted(got) == list(range(20))
        assert channel._create_client() is client  # the same client all along
        # When kombu replaces the channel's pool (after a fork), a new client follows it.
        channel._disconnect_pools()
        fresh = channel._create_client()
        assert fresh is not client and fresh.connection_pool is channel.pool
        assert fresh.ping()
        queue.close()
