"""Django's PostgreSQL backend, with a check of pooled connections that costs no round trip
(`base.DatabaseWrapper`)."""
