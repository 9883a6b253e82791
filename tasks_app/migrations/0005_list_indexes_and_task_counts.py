# ListTasks at scale: an index per filter combination in the keyset order, and per-(agent,
# owner, state) task counts for totalSize, backfilled here (docs/decisions.md).

import django.db.models.deletion
from django.db import migrations, models


def backfill_task_counts(apps, schema_editor):
    # The tasks that exist now, counted once; from here on the services keep the counts. All
    # of a key's count goes to shard 0: only the sum over the shards is ever read.
    Task = apps.get_model("tasks_app", "Task")
    TaskCount = apps.get_model("tasks_app", "TaskCount")
    quote = schema_editor.connection.ops.quote_name
    schema_editor.execute(
        f"INSERT INTO {quote(TaskCount._meta.db_table)} (agent_id, owner, state, shard, n) "
        f"SELECT agent_id, owner, state, 0, COUNT(*) FROM {quote(Task._meta.db_table)} "
        "GROUP BY agent_id, owner, state"
    )


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0004_membership'),
        ('tasks_app', '0004_task_runner'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='task',
            index=models.Index(fields=['agent', 'owner', 'state', '-status_timestamp', '-id'], name='task_list_by_owner_state'),
        ),
        migrations.AddIndex(
            model_name='task',
            index=models.Index(fields=['agent', 'state', '-status_timestamp', '-id'], name='task_list_by_state'),
        ),
        migrations.AddIndex(
            model_name='task',
            index=models.Index(fields=['agent', 'context_id', '-status_timestamp', '-id'], name='task_list_by_context'),
        ),
        # Prefixes of the indexes above and of task_list_by_tenant.
        migrations.RemoveIndex(
            model_name='task',
            name='task_by_context',
        ),
        migrations.AlterField(
            model_name='task',
            name='agent',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='tasks', to='agents.agent'),
        ),
        migrations.AlterField(
            model_name='task',
            name='tenant',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='agents.tenant'),
        ),
        migrations.CreateModel(
            name='TaskCount',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('agent', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='agents.agent')),
                ('owner', models.CharField(max_length=220)),
                ('state', models.CharField(choices=[('TASK_STATE_SUBMITTED', 'TASK_STATE_SUBMITTED'), ('TASK_STATE_WORKING', 'TASK_STATE_WORKING'), ('TASK_STATE_COMPLETED', 'TASK_STATE_COMPLETED'), ('TASK_STATE_FAILED', 'TASK_STATE_FAILED'), ('TASK_STATE_CANCELED', 'TASK_STATE_CANCELED'), ('TASK_STATE_INPUT_REQUIRED', 'TASK_STATE_INPUT_REQUIRED'), ('TASK_STATE_REJECTED', 'TASK_STATE_REJECTED'), ('TASK_STATE_AUTH_REQUIRED', 'TASK_STATE_AUTH_REQUIRED')], max_length=32)),
                ('shard', models.PositiveSmallIntegerField()),
                ('n', models.BigIntegerField(default=0)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('agent', 'owner', 'state', 'shard'), name='task_count_key')],
            },
        ),
        migrations.RunPython(backfill_task_counts, migrations.RunPython.noop),
    ]
