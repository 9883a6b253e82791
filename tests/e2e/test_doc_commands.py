"""The curl commands the README and docs/ give work as written: each one is replayed against the
live platform (its placeholders for the agent's URL and key filled in) and must be answered
2xx. A command missing a header the platform needs (a body without its Content-Type is 415)
fails here."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^\s*```(\w*)\s*$")
SHELL = {"", "sh", "bash", "shell", "console"}
# Where the docs' commands point, and what stands for the agent there: each is the agent the
# test registers. A command whose URL matches none of these fails the test, so a new example
# is either covered here or says where it points.
AGENT_URLS = (
    "$AGENT",
    "http://127.0.0.1:8000/a2a/demo/echo",
    "https://a2a.example.com/a2a/acme/helper",
)
PLATFORM_URLS = ("http://127.0.0.1:8000", "https://a2a.example.com")
KEYS = ("$KEY", "a2a_...")


def shell_blocks(text: str) -> list[str]:
    """The fenced code blocks of a Markdown text that hold shell (or say no language)."""
    blocks, lines, language = [], [], None
    for line in text.splitlines():
        fence = FENCE.match(line)
        if fence and language is None:
            language, lines = fence.group(1), []
        elif fence:
            if language in SHELL:
                blocks.append("\n".join(lines))
            language = None
        elif language is not None:
            lines.append(line)
    return blocks


def curl_commands() -> list[tuple[str, str]]:
    """(where, command) for every curl command in a shell block, continuation lines joined."""
    found = []
    for doc in DOCS:
        for block in shell_blocks(doc.read_text()):
            for command in block.replace("\\\n", " ").splitlines():
                command = command.strip()
                if command.startswith("curl "):
                    found.append((f"{doc.name}: {command[:70]}", command))
    return found


COMMANDS = curl_commands()


def request_of(command: str, *, agent_url: str, platform_url: str, key: str) -> dict:
    """The request a curl command makes, as httpx arguments, with the placeholders filled."""
    for url in AGENT_URLS:
        command = command.replace(url, agent_url)
    for url in PLATFORM_URLS:
        command = command.replace(url, platform_url)
    for placeholder in KEYS:
        command = command.replace(placeholder, key)
    words = shlex.split(command, comments=True)[1:]
    method, headers, body, url = "GET", {}, None, None
    while words:
        word = words.pop(0)
        if word == "-X":
            method = words.pop(0)
        elif word == "-H":
            name, _, value = words.pop(0).partition(":")
            headers[name.strip()] = value.strip()
        elif word in ("-d", "--data"):
            body = words.pop(0)
            method = "POST" if method == "GET" else method
        elif word.startswith("-"):
            assert set(word[1:]) <= set("sN"), f"an option the test does not know: {word}"
        else:
            url = word
    assert url and url.startswith(platform_url), f"the command's URL is not mapped: {url}"
    # curl sends a body it is given with `-d` as a form unless a Content-Type says otherwise.
    if body is not None and not any(h.lower() == "content-type" for h in headers):
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    return {"method": method, "url": url, "headers": headers, "content": body}


def test_the_docs_have_curl_commands():
    assert len(COMMANDS) >= 5, COMMANDS


@pytest.mark.parametrize("command", [c for _, c in COMMANDS], ids=[w for w, _ in COMMANDS])
def test_a_documented_curl_command_is_answered_2xx(
    command, live_platform, make_tenant, make_agent, make_key
):
    tenant = make_tenant()
    agent = make_agent(tenant, "echo")
    request = request_of(
        command,
        agent_url=live_platform.agent_url(agent).rstrip("/"),
        platform_url=live_platform.url,
        key=make_key(tenant),
    )
    with httpx.Client(timeout=30) as client, client.stream(**request) as response:
        body = response.read().decode(errors="replace")
    assert response.status_code < 300, (request, response.status_code, body[:500])
