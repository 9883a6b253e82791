"""manage.py task_counts_reconcile: make ListTasks' task counts match the tasks again.

Run it once no process of a version older than the counts (migration 0005) writes tasks any
more; it is safe while the platform serves (docs/decisions.md, "Listing tasks at scale").
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from tasks_app.services import task_counts_reconcile


class Command(BaseCommand):
    help = "Recount the tasks of every agent by owner and state, and correct the stored counts."

    def handle(self, *args: Any, **options: Any) -> None:
        off = task_counts_reconcile()
        self.stdout.write(f"{off} count(s) corrected" if off else "task counts are exact")
