from django.db import migrations, models


def flag_tasks_with_configs(apps, schema_editor):
    """Tasks that already have push configs keep getting their deliveries."""
    Task = apps.get_model("tasks_app", "Task")
    PushConfig = apps.get_model("push_app", "PushConfig")
    task_ids = PushConfig.objects.values("task_id")
    Task.objects.filter(pk__in=task_ids).update(has_push_configs=True)


class Migration(migrations.Migration):
    dependencies = [
        ("tasks_app", "0005_list_indexes_and_task_counts"),
        ("push_app", "0002_pushconfig_headers_encrypted"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="has_push_configs",
            field=models.BooleanField(default=False, db_default=False),
        ),
        migrations.RunPython(flag_tasks_with_configs, migrations.RunPython.noop),
    ]
