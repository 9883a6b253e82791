import importlib

from django.db import migrations, models

# SQLite adds these columns by rebuilding the table, which its push config trigger (0007) names:
# the trigger is dropped for the rebuild and made again after it. PostgreSQL adds a column with
# a constant default in place, the trigger untouched.
_trigger = importlib.import_module("tasks_app.migrations.0007_push_config_flag_trigger")


def _on_sqlite(step):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            step(apps, schema_editor)

    return run


class Migration(migrations.Migration):
    """The version and REST spelling of the request that created a task. Existing tasks get ""
    (the database default: no rewrite of the table), which reads as "not recorded"."""

    dependencies = [
        ("tasks_app", "0009_executor_state"),
    ]

    operations = [
        migrations.RunPython(
            _on_sqlite(_trigger.drop_trigger), _on_sqlite(_trigger.create_trigger)
        ),
        migrations.AddField(
            model_name="task",
            name="dialect",
            field=models.CharField(blank=True, db_default="", default="", max_length=8),
        ),
        migrations.AddField(
            model_name="task",
            name="spelling",
            field=models.CharField(blank=True, db_default="", default="", max_length=16),
        ),
        migrations.RunPython(
            _on_sqlite(_trigger.create_trigger), _on_sqlite(_trigger.drop_trigger)
        ),
    ]
