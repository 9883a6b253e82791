"""The README and docs link only to files that exist (the console tour's screenshots among them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_links_and_images_exist(doc):
    targets = [t for t in LINK.findall(doc.read_text()) if "://" not in t]
    missing = [t for t in targets if not (doc.parent / t).exists()]
    assert not missing, f"{doc.name} links to missing files: {missing}"


def test_the_readme_tour_shows_screenshots():
    readme = (ROOT / "README.md").read_text()
    tour = readme.split("## The console: a short tour", 1)[1].split("\n## ", 1)[0]
    images = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", tour)
    assert len(images) >= 6
    for image in images:
        assert (ROOT / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", image
