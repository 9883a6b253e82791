"""The rooms of docs/architecture.md hold: the import contracts pass, and every file and module
the page names exists, so a newcomer who follows it lands somewhere real."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"
PACKAGES = (
    "a2a_platform",
    "agents",
    "audit",
    "bindings",
    "console",
    "grpc_server",
    "push_app",
    "tasks_app",
)
ROOMS = "|".join(PACKAGES)


def test_the_import_contracts_hold():
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " 0 broken" in result.stdout, result.stdout[-4000:]


def test_the_contracts_cover_what_the_page_promises():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    assert layers.index("bindings") < next(
        i for i, layer in enumerate(layers) if "operations" in layer
    )
    guarded = {m for c in config["contracts"] for m in c.get("source_modules", [])}
    assert {"tasks_app", "push_app", "agents", "bindings.codecs", "a2a_platform.metrics"} <= guarded


def test_every_file_and_module_the_page_names_exists():
    text = PAGE.read_text()
    paths = set(re.findall(rf"`((?:{ROOMS})/[\w/]+\.py)`", text))
    assert len(paths) > 10
    missing = [p for p in sorted(paths) if not (ROOT / p).is_file()]
    assert not missing, missing
    dotted = set(re.findall(rf"`((?:{ROOMS})\.[\w.]+)`", text))
    unknown = []
    for name in sorted(dotted):
        module, attributes = name, []
        while module:
            try:
                target = importlib.import_module(module)
                break
            except ModuleNotFoundError:
                module, _, last = module.rpartition(".")
                attributes.insert(0, last)
        else:
            unknown.append(name)
            continue
        for attribute in attributes:
            if not hasattr(target, attribute):
                unknown.append(name)
                break
            target = getattr(target, attribute)
    assert not unknown, unknown
