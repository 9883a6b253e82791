import importlib

import django.db.models.deletion
from django.db import migrations, models

# SQLite adds a column by rebuilding the table, which its push config trigger (0007) names: the
# trigger is dropped for the rebuild and made again after it (as in 0010).
_trigger = importlib.import_module("tasks_app.migrations.0007_push_config_flag_trigger")
_origin = importlib.import_module("tasks_app.migrations.0010_task_origin")


class Migration(migrations.Migration):
    """The messageIds callers sent (idempotent sends), and which run of its turn a task is on
    (Agent.worker_loss "retry"). Existing tasks get attempt 1, the database default: no rewrite
    of the table on PostgreSQL."""

    dependencies = [
        ("agents", "0007_agent_worker_loss"),
        ("tasks_app", "0010_task_origin"),
    ]

    operations = [
        migrations.RunPython(
            _origin._on_sqlite(_trigger.drop_trigger), _origin._on_sqlite(_trigger.create_trigger)
        ),
        migrations.AddField(
            model_name="task",
            name="attempt",
            field=models.PositiveSmallIntegerField(db_default=1, default=1),
        ),
        migrations.RunPython(
            _origin._on_sqlite(_trigger.create_trigger), _origin._on_sqlite(_trigger.drop_trigger)
        ),
        migrations.CreateModel(
            name="SentMessage",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("owner", models.CharField(max_length=220)),
                ("message_id", models.CharField(max_length=200)),
                ("since_seq", models.PositiveIntegerField()),
                ("created_task", models.BooleanField()),
                ("created_at", models.DateTimeField()),
                (
                    "agent",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="agents.agent",
                    ),
                ),
                (
                    "task",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="tasks_app.task",
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["created_at"], name="sent_message_age")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("agent", "owner", "message_id"), name="sent_message_key"
                    )
                ],
            },
        ),
    ]
