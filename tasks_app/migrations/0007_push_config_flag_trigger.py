"""Every push config stored, by any code (a process of the previous version during a rolling
upgrade, the admin, SQL), flags its task in the same transaction: a database trigger, so an
event never skips the outbox of a task that has a config (tasks_app.services._event_append)."""

from django.db import migrations

TRIGGER = "push_config_flags_task"
FUNCTION = "tasks_app_flag_push_configs"


def _tables(apps, schema_editor):
    quote = schema_editor.quote_name
    task = apps.get_model("tasks_app", "Task")._meta.db_table
    config = apps.get_model("push_app", "PushConfig")._meta.db_table
    return quote(task), quote(config)


def create_trigger(apps, schema_editor):
    task, config = _tables(apps, schema_editor)
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(
            f"CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger AS $$ BEGIN "
            f"UPDATE {task} SET has_push_configs = true "
            "WHERE id = NEW.task_id AND NOT has_push_configs; "
            "RETURN NEW; END $$ LANGUAGE plpgsql"
        )
        schema_editor.execute(
            f"CREATE TRIGGER {TRIGGER} AFTER INSERT ON {config} "
            f"FOR EACH ROW EXECUTE FUNCTION {FUNCTION}()"
        )
    elif vendor == "sqlite":
        schema_editor.execute(
            f"CREATE TRIGGER {TRIGGER} AFTER INSERT ON {config} FOR EACH ROW BEGIN "
            f"UPDATE {task} SET has_push_configs = 1 "
            "WHERE id = NEW.task_id AND has_push_configs = 0; END"
        )
    else:
        raise NotImplementedError(f"No push config trigger for {vendor}.")
    # Configs stored between migration 0006 and now by processes that did not set the flag.
    Task = apps.get_model("tasks_app", "Task")
    PushConfig = apps.get_model("push_app", "PushConfig")
    Task.objects.filter(pk__in=PushConfig.objects.values("task_id")).update(has_push_configs=True)


def drop_trigger(apps, schema_editor):
    _, config = _tables(apps, schema_editor)
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER} ON {config}")
        schema_editor.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}()")
    else:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}")


class Migration(migrations.Migration):
    dependencies = [
        ("tasks_app", "0006_task_has_push_configs"),
        ("push_app", "0002_pushconfig_headers_encrypted"),
    ]

    operations = [migrations.RunPython(create_trigger, drop_trigger)]
