"""The A2A protocol paths' own ASGI handler runs a chosen part of settings.MIDDLEWARE; a
middleware added to the settings must be placed on one side or the other, never skipped
silently."""

from __future__ import annotations

from django.conf import settings

from a2a_platform.asgi import A2A_PATH_MIDDLEWARE

# What the A2A views have no use for: they authenticate API keys themselves, are CSRF-exempt,
# and neither read nor set a session, a user or messages.
LEFT_OUT = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]


def test_every_middleware_is_either_run_on_the_a2a_paths_or_known_to_be_left_out():
    run_there = [m for m in settings.MIDDLEWARE if m in A2A_PATH_MIDDLEWARE]
    assert run_there == A2A_PATH_MIDDLEWARE, "same middleware, same order"
    assert [m for m in settings.MIDDLEWARE if m not in A2A_PATH_MIDDLEWARE] == LEFT_OUT
