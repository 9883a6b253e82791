"""Drop the single-column indexes on the task of messages, artifacts and events: each table's
unique constraint starts with the task, and serves the lookups and cascades they did, so they
only cost every insert an index entry.

Only the indexes are dropped: Django's own AlterField would also drop and re-add the foreign
key constraints, and re-adding one checks every row of the table under a lock.
"""

from django.db import migrations, models

INDEXES = [
    ("tasks_app_message", "tasks_app_message_task_id_ca366896"),
    ("tasks_app_artifact", "tasks_app_artifact_task_id_2661089e"),
    ("tasks_app_taskevent", "tasks_app_taskevent_task_id_71b1f23c"),
]


def _field(related_name):
    return models.ForeignKey(
        db_index=False,
        on_delete=models.deletion.CASCADE,
        related_name=related_name,
        to="tasks_app.task",
    )


class Migration(migrations.Migration):
    dependencies = [
        ("tasks_app", "0007_push_config_flag_trigger"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{index}"',
                    reverse_sql=f'CREATE INDEX IF NOT EXISTS "{index}" ON "{table}" ("task_id")',
                )
                for table, index in INDEXES
            ],
            state_operations=[
                migrations.AlterField(model_name=model, name="task", field=_field(related))
                for model, related in (
                    ("message", "messages"),
                    ("artifact", "artifacts"),
                    ("taskevent", "events"),
                )
            ],
        ),
    ]
