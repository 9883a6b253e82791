import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0006_agent_custom_domain"),
    ]

    operations = [
        migrations.AddField(
            model_name="agent",
            name="worker_loss",
            field=models.CharField(
                choices=[("fail", "Fail the task"), ("retry", "Run it again")],
                db_default="fail",
                default="fail",
                help_text="When the worker running a task dies: fail the task, or run it again on another worker.",
                max_length=8,
            ),
        ),
        migrations.AddField(
            model_name="agent",
            name="worker_loss_attempts",
            field=models.PositiveSmallIntegerField(
                db_default=3,
                default=3,
                help_text="With retry: how many runs a task gets in all, the first included (1-20).",
                validators=[
                    django.core.validators.MinValueValidator(1),
                    django.core.validators.MaxValueValidator(20),
                ],
            ),
        ),
    ]
