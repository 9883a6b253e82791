"""An index for the records of what people did to a task from the console.

They are rows of Django's admin log (console.services.task_action_record), which has no index
on the object they name; the task page reads them on every view (and task.js re-reads the page
as a task's events arrive), so without one each view would scan the whole log.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0002_beatheartbeat"),
        ("admin", "0003_logentry_add_action_flag_choices"),
    ]

    operations = [
        migrations.RunSQL(
            "CREATE INDEX IF NOT EXISTS console_admin_log_object "
            "ON django_admin_log (content_type_id, object_id)",
            reverse_sql="DROP INDEX IF EXISTS console_admin_log_object",
        ),
    ]
