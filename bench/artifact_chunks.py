"""The worker's cost of storing a streamed reply: N appended text chunks of one artifact
recorded through `tasks_app.services.task_event_record`, as a run records a model's tokens.
Prints the CPU and wall time of the best of `--runs` runs.

    source scripts/services.sh && services_start   # or any DATABASE_URL
    DJANGO_SECRET_KEY=x .venv/bin/python bench/artifact_chunks.py [--chunks 2000] [--runs 3]

CPU time is this process's (the ORM, protobuf and JSON work per chunk); the database's own
time shows in the wall time only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "a2a_platform.settings")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    import django

    django.setup()
    from a2a.types import Artifact, Part, TaskArtifactUpdateEvent
    from django.core.management import call_command

    from agents.services import agent_create, tenant_create
    from tasks_app.services import task_event_record
    from tests.factories import task_send

    call_command("migrate", verbosity=0)
    tenant = tenant_create(slug=f"bench-{uuid.uuid4().hex[:8]}", name="Bench")
    agent = agent_create(
        tenant=tenant,
        slug="chunks",
        name="Chunks",
        description="Stores streamed chunks.",
        executor_kind="echo",
        executor_config={},
    )
    results = []
    for _ in range(args.runs):
        task_id = task_send(agent).task_id
        cpu, wall = time.process_time(), time.perf_counter()
        for i in range(args.chunks):
            chunk = Artifact(artifact_id="reply", name="response", parts=[Part(text=f"tok{i} ")])
            event = TaskArtifactUpdateEvent(task_id=str(task_id), append=i > 0, artifact=chunk)
            task_event_record(task_id=task_id, event=event)
        results.append((time.process_time() - cpu, time.perf_counter() - wall))
    cpu, wall = min(results)
    print(f"{args.chunks} chunks: {cpu:.2f} s CPU, {wall:.2f} s wall (best of {args.runs})")


if __name__ == "__main__":
    main()
