from django.db import migrations, models


class Migration(migrations.Migration):
    """The first request's fingerprint beside each remembered messageId (a repeat that asks
    something else is refused). Existing rows, and rows that processes of the previous version
    write while this one rolls out, get "" from the database, which matches any request: no
    rewrite of the table on PostgreSQL. No trigger names this table, so SQLite's rebuild of it
    needs nothing dropped (unlike the tasks table's, 0010-0012)."""

    dependencies = [
        ("tasks_app", "0012_lanes"),
    ]

    operations = [
        migrations.AddField(
            model_name="sentmessage",
            name="fingerprint",
            field=models.CharField(db_default="", default="", max_length=64),
        ),
    ]
