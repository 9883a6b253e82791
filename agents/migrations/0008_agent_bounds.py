import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0007_agent_worker_loss"),
    ]

    operations = [
        migrations.AlterField(
            model_name="agent",
            name="description",
            field=models.TextField(
                max_length=4000, validators=[django.core.validators.MaxLengthValidator(4000)]
            ),
        ),
        migrations.AlterField(
            model_name="agent",
            name="documentation_url",
            field=models.URLField(blank=True, max_length=2000),
        ),
        migrations.AlterField(
            model_name="agent",
            name="icon_url",
            field=models.URLField(blank=True, max_length=2000),
        ),
        migrations.AlterField(
            model_name="agent",
            name="provider_url",
            field=models.URLField(blank=True, max_length=2000),
        ),
    ]
