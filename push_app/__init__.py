"""Push notifications: configs per task, a delivery outbox, and Celery delivery (to come)."""
