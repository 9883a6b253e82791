"""`make lock`: write constraints.txt, the exact version of every package the project installs,
resolved by pip for this Python (3.11, the image's) from pyproject.toml's ranges.

Each run resolves afresh, picking the newest versions the ranges allow: running it is how the
pins are upgraded. `make setup` and the Dockerfile install with `-c constraints.txt`, so the
development environment, the tests and the image run the same versions.

    python scripts/lock.py [extra pip options, e.g. -c other-constraints.txt]
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "constraints.txt"
PYTHON = (3, 11)
HEADER = f"""\
# The exact version of every package the platform installs, Python {PYTHON[0]}.{PYTHON[1]}, Linux.
# Made by `make lock` (scripts/lock.py) from pyproject.toml; do not edit by hand.
# `make setup` installs with `-c constraints.txt`, the Dockerfile the runtime part only.
"""


def _name(raw: str) -> str:
    """The normalised project name (PEP 503), as pip compares them."""
    return re.sub(r"[-_.]+", "-", raw).lower()


def resolve(requirement: str, *pip_options: str) -> dict[str, str]:
    """name -> version of everything pip would install for `requirement`, ignoring what this
    environment already has."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--dry-run",
                "--ignore-installed",
                "--quiet",
                "--disable-pip-version-check",
                "--report",
                str(report),
                *pip_options,
                requirement,
            ],
            cwd=ROOT,
            check=True,
        )
        installs = json.loads(report.read_text())["install"]
    return {
        _name(item["metadata"]["name"]): item["metadata"]["version"]
        for item in installs
        if _name(item["metadata"]["name"]) != "a2a-platform"
    }


def main(pip_options: list[str]) -> None:
    if sys.version_info[:2] != PYTHON:
        sys.exit(
            f"scripts/lock.py resolves for Python {PYTHON[0]}.{PYTHON[1]} (the image's); this "
            f"is {sys.version.split()[0]}: run it with a {PYTHON[0]}.{PYTHON[1]} virtualenv."
        )
    everything = resolve(".[dev,bench]", *pip_options)
    # The runtime set, held to the same versions, so that each package has one pin.
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as pins:
        pins.write("".join(f"{name}=={version}\n" for name, version in everything.items()))
        pins.flush()
        runtime = resolve(".", *pip_options, "-c", pins.name)
    extras = {name: version for name, version in everything.items() if name not in runtime}
    lines = [HEADER, "\n# Runtime (pyproject.toml's dependencies, and theirs)\n"]
    lines += [f"{name}=={runtime[name]}\n" for name in sorted(runtime)]
    lines.append("\n# Development and benchmark only (the dev and bench extras)\n")
    lines += [f"{name}=={extras[name]}\n" for name in sorted(extras)]
    OUTPUT.write_text("".join(lines))
    print(f"{OUTPUT.name}: {len(runtime)} runtime and {len(extras)} more packages pinned")


if __name__ == "__main__":
    main(sys.argv[1:])
