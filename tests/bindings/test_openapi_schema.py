"""The REST binding's OpenAPI schema generates without a warning (every REST view described)."""

from __future__ import annotations

from django.core.management import call_command


def test_schema_generates_and_validates_without_warnings(tmp_path):
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
    text = target.read_text()
    assert "v1_0_send_message" in text and "v0_3_send_message" in text
