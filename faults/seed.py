"""A cluster's tenant, agents and key, made in a process with the cluster's settings.

    python -m faults.seed < spec.json

The spec: {"tenant": slug, "agents": {slug: {"kind": "python", "config": {...},
"fields": {...}}}, "limits": {...}}; `limits` are the tenant's own (agents.plans), skipped on a
platform without them; `fields` are further Agent fields (visibility, or the worker-loss policy:
`worker_loss`, `worker_loss_attempts`), each set only if this platform's Agent has it, so
the suite runs before and after a field lands. Prints one JSON line: {"key", "skipped"}.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def seed(spec: dict[str, Any]) -> dict[str, Any]:
    from agents.models import Agent, Tenant
    from agents.services import agent_create, api_key_create, tenant_create

    tenant = tenant_create(slug=spec["tenant"], name=spec["tenant"].title())
    skipped: list[str] = []
    if spec.get("limits"):
        if "limits" in {f.name for f in Tenant._meta.get_fields()}:
            tenant.limits = spec["limits"]
            tenant.save(update_fields=["limits"])
        else:
            skipped.append("tenant.limits")
    known = {f.name for f in Agent._meta.get_fields()}
    for slug, agent in spec["agents"].items():
        fields = {k: v for k, v in (agent.get("fields") or {}).items() if k in known}
        skipped += [f"{slug}.{k}" for k in agent.get("fields") or {} if k not in known]
        agent_create(
            tenant=tenant,
            slug=slug,
            name=slug.title(),
            description=f"The {slug} agent of the fault suite.",
            executor_kind=agent.get("kind", "echo"),
            executor_config=agent.get("config") or {},
            **fields,
        )
    _, key = api_key_create(tenant=tenant, name="faults")
    return {"key": key, "skipped": skipped}


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "a2a_platform.settings")
    import django

    django.setup()
    print(json.dumps(seed(json.load(sys.stdin))))


if __name__ == "__main__":
    main()
