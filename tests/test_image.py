"""The image, built and started without a Docker engine: the files the Dockerfile's COPY
instructions take from the build context (the checkout, through .dockerignore as docker build
reads it), installed in a fresh virtualenv by the Dockerfile's own RUN commands, then run from
there with the image's environment and compose's: `manage.py check --deploy`, `migrate` against
a database of its own, and `runweb` (the image's CMD) answering a real request. Nothing of the
checkout is on that interpreter's path: a package the image leaves out is missing there too.

What cannot be done without Docker is stood in for, and said where: the base image's Python is
this interpreter's (the same minor version), pip installs offline from wheels of the
distributions this environment has installed (the same files, at the versions constraints.txt
pins), and the image's root paths (/app, /var/lib/a2a) live under a temporary directory.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata
import io
import json
import os
import posixpath
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import tomllib
import urllib.request
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .conftest import _free_port, _wait_for_port, require, stop_process
from .e2e.helpers import poll

ROOT = Path(__file__).resolve().parent.parent

# The first test builds the dependency layer: about a hundred distributions installed and
# compiled, a minute or two on a busy machine, inside that test's time.
pytestmark = pytest.mark.timeout(600)


# --- .dockerignore, as docker build reads it ---------------------------------------------------


@dataclass(frozen=True)
class IgnorePattern:
    exclusion: bool  # `!pattern`: what it matches goes back into the context
    text: str
    regex: re.Pattern[str]


def _go_pattern_regex(pattern: str) -> re.Pattern[str]:
    """moby/patternmatcher's translation of a pattern: `*` and `?` stop at `/`, `**` spans
    directories, `[...]` is a class, `\\` escapes the next character."""
    out, i = "^", 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if pattern.startswith("/", i):
                i += 1
            out += ".*" if i == len(pattern) else "(.*/)?"
            continue
        if char == "*":
            out += "[^/]*"
        elif char == "?":
            out += "[^/]"
        elif char in "[]":
            out += char
        elif char == "\\" and i + 1 < len(pattern):
            i += 1
            out += re.escape(pattern[i])
        else:
            out += re.escape(char)
        i += 1
    return re.compile(out + "$")


def dockerignore_patterns(text: str) -> list[IgnorePattern]:
    """The patterns of a .dockerignore, read as moby/patternmatcher's ignorefile.ReadAll does:
    `#` lines are comments, each line is trimmed and cleaned (filepath.Clean), a leading `/`
    is dropped, `!` marks an exception."""
    patterns = []
    for number, line in enumerate(text.splitlines()):
        if number == 0:
            line = line.removeprefix("\ufeff")
        if line.startswith("#"):
            continue
        line = line.strip()
        if not line:
            continue
        exclusion = line.startswith("!")
        if exclusion:
            line = line[1:].strip()
        line = re.sub("^/+", "/", posixpath.normpath(line))
        if len(line) > 1 and line.startswith("/"):
            line = line[1:]
        assert line != ".", f"{text!r}: a pattern of nothing"
        patterns.append(IgnorePattern(exclusion, line, _go_pattern_regex(line)))
    return patterns


def ignored(path: str, patterns: list[IgnorePattern]) -> bool:
    """Whether docker build leaves `path` (relative to the context, `/`-separated) out:
    patternmatcher's MatchesOrParentMatches. A pattern matches the path or a directory it is
    in; the last pattern that matches decides."""
    parts = path.split("/")
    candidates = [path, *("/".join(parts[: i + 1]) for i in range(len(parts) - 1))]
    left_out = False
    for pattern in patterns:
        if any(pattern.regex.match(candidate) for candidate in candidates):
            left_out = not pattern.exclusion
    return left_out


def _may_hold_exceptions(directory: str, patterns: list[IgnorePattern]) -> bool:
    """Whether an exception could bring back something under a directory that is left out
    (BuildKit walks into such a directory only then)."""
    for pattern in patterns:
        if not pattern.exclusion:
            continue
        literal = re.split(r"[*?\[\\]", pattern.text, maxsplit=1)[0]
        if literal == pattern.text and not literal.startswith(directory + "/"):
            continue  # no wildcard: only a path under the directory could be brought back
        if literal.startswith(directory + "/") or (directory + "/").startswith(literal):
            return True
    return False


def build_context(context: Path) -> dict[str, Path]:
    """The files docker build sends from `context`, .dockerignore applied: {path relative to
    the context: its file}. Symbolic links are sent as links, not followed."""
    ignore = context / ".dockerignore"
    patterns = dockerignore_patterns(ignore.read_text()) if ignore.exists() else []
    files: dict[str, Path] = {}
    for folder, directories, names in os.walk(context):
        relative = Path(folder).relative_to(context).as_posix()
        prefix = "" if relative == "." else relative + "/"
        directories[:] = [
            d
            for d in sorted(directories)
            if not (context / folder / d).is_symlink()
            and (not ignored(prefix + d, patterns) or _may_hold_exceptions(prefix + d, patterns))
        ]
        for name in sorted(names) + sorted(
            d for d in os.listdir(folder) if (Path(folder) / d).is_symlink()
        ):
            if not ignored(prefix + name, patterns):
                files[prefix + name] = Path(folder) / name
    return files


# --- the Dockerfile ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case
    arguments: str  # with continuation lines joined, as the builder joins them

    def __str__(self) -> str:
        return f"{self.keyword} {self.arguments}"


def dockerfile_instructions(text: str) -> list[Instruction]:
    """The instructions of a Dockerfile: comment lines dropped (inside continuations too), a
    line ending in `\\` joined to the next without the backslash and the line break."""
    assert not re.match(r"#\s*escape\s*=", text), "an escape directive is not understood here"
    instructions, pending = [], ""
    for line in text.splitlines():
        if not pending and not line.strip():
            continue
        if line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1]
            continue
        whole = (pending + line).strip()
        pending = ""
        if whole:
            keyword, _, arguments = whole.partition(" ")
            instructions.append(Instruction(keyword.upper(), arguments.strip()))
    assert not pending, "the Dockerfile ends inside a continuation"
    return instructions


def env_assignments(arguments: str) -> dict[str, str]:
    """`ENV a=1 b="2 3"` (or the old `ENV a 1`): the variables it sets."""
    words = shlex.split(arguments)
    if "=" not in words[0]:
        return {words[0]: arguments.partition(" ")[2].strip()}
    assignments = dict(word.split("=", 1) for word in words)
    assert not any("$" in value for value in assignments.values()), f"ENV {arguments}"
    return assignments


def copy_arguments(arguments: str) -> tuple[list[str], str]:
    """COPY's sources and destination; its flags change no file's content (`--chown`,
    `--chmod`, `--link`), and `--from` is not emulated."""
    words = json.loads(arguments) if arguments.startswith("[") else shlex.split(arguments)
    flags = [word for word in words if word.startswith("--")]
    assert not any(f.startswith("--from") for f in flags), "COPY --from is not emulated here"
    *sources, destination = [word for word in words if not word.startswith("--")]
    return sources, destination


def copy_plan(
    context: dict[str, Path], sources: list[str], destination: str, existing_folder: bool
) -> dict[str, str]:
    """What a COPY writes: {path under its destination: context path}. A directory (`.` is
    the context's root) gives its contents; a file goes into the destination when that is a
    folder (a trailing `/`, several sources, or a folder already there), else it is the
    destination. A source that is missing or left out is an error, as in docker build."""
    folders = {
        "/".join(path.split("/")[:depth])
        for path in context
        for depth in range(1, path.count("/") + 1)
    }
    into_folder = destination.endswith("/") or len(sources) > 1 or existing_folder
    plan: dict[str, str] = {}
    for source in sources:
        source = posixpath.normpath(source.lstrip("/"))
        if re.search(r"[*?\[]", source):
            pattern = _go_pattern_regex(source)
            matches = sorted(e for e in {*context, *folders} if pattern.match(e))
            into_folder = into_folder or len(matches) > 1
        else:
            matches = [source]
        found = False
        for match in matches:
            if match in context:
                plan[posixpath.basename(match) if into_folder else ""] = match
                found = True
                continue
            prefix = "" if match == "." else match + "/"
            for path in context:
                if path.startswith(prefix):
                    plan[path[len(prefix) :]] = path
                    found = True
        assert found, (
            f"COPY {source}: not in the build context (missing, or left out by .dockerignore)"
        )
    return plan


# Build steps that set up the system (its user, the directory it writes) rather than Python:
# done by hand below, never run on this machine.
SYSTEM_STEP = re.compile(r"(useradd|groupadd|mkdir -p|chown|chmod) [^&|;]*")


def copy_targets(
    arguments: str, workdir: str, context: dict[str, Path], is_folder: Any
) -> dict[str, str]:
    """What `COPY <arguments>` writes: {path in the image: context path}; `is_folder` says
    whether a path of the image is a folder already."""
    sources, destination = copy_arguments(arguments)
    target = posixpath.join(workdir, destination)
    plan = copy_plan(context, sources, destination, is_folder(target))
    return {
        posixpath.normpath(posixpath.join(target, below) if below else target): path
        for below, path in plan.items()
    }


def copied_files(context: Path) -> dict[str, str]:
    """The files the Dockerfile in `context` copies into its image: {path in the image:
    context path}, the RUN instructions aside."""
    files = build_context(context)
    copied: dict[str, str] = {}
    folders: set[str] = {"/"}
    workdir = "/"
    for instruction in dockerfile_instructions((context / "Dockerfile").read_text()):
        if instruction.keyword == "WORKDIR":
            workdir = posixpath.join(workdir, instruction.arguments)
            folders.add(workdir)
        elif instruction.keyword == "COPY":
            copied.update(
                copy_targets(
                    instruction.arguments,
                    workdir,
                    files,
                    lambda path: path in folders or any(c.startswith(path + "/") for c in copied),
                )
            )
    return copied


# --- wheels of what this environment has installed ---------------------------------------------


def distribution_closure(requirements: Iterable[str]) -> dict[str, set[str]]:
    """Every distribution the requirements need, as installed here, with the extras asked of
    each."""
    wanted = [Requirement(r) for r in requirements]
    needed: dict[str, set[str]] = {}
    while wanted:
        requirement = wanted.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        seen = name in needed
        extras = needed.setdefault(name, set())
        new = set(requirement.extras) - extras
        if seen and not new:
            continue
        extras |= new
        for raw in importlib.metadata.distribution(name).requires or []:
            dependency = Requirement(raw)
            if dependency.marker is None or any(
                dependency.marker.evaluate({"extra": extra}) for extra in extras | {""}
            ):
                wanted.append(Requirement(str(dependency).split(";")[0]))
    return needed


def write_wheel(
    directory: Path, dist_info: str, tags: list[str], files: Iterable[tuple[str, bytes]]
) -> Path:
    """A wheel of `files` (dist-info included, RECORD written here) in `directory`."""
    name, version = dist_info.removesuffix(".dist-info").rsplit("-", 1)
    triples = [tag.split("-") for tag in tags]
    compressed = "-".join(".".join(dict.fromkeys(t[i] for t in triples)) for i in range(3))
    path = directory / f"{re.sub(r'[-_.]+', '_', name)}-{version}-{compressed}.whl"
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as wheel:
        for arcname, data in files:
            wheel.writestr(arcname, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            writer.writerow((arcname, f"sha256={digest.decode()}", len(data)))
        writer.writerow((f"{dist_info}/RECORD", "", ""))
        wheel.writestr(f"{dist_info}/RECORD", record.getvalue())
    return path


# What pip writes into a dist-info when it installs, rather than what the wheel carried.
INSTALLER_FILES = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}


def rewheel(name: str, directory: Path) -> Path:
    """The installed distribution `name` as a wheel again: the files its RECORD lists within
    site-packages, without bytecode. Scripts outside it are made again by pip from the
    distribution's entry points."""
    distribution = importlib.metadata.distribution(name)
    wheel_metadata = distribution.read_text("WHEEL")
    assert wheel_metadata, f"{name} was not installed from a wheel"
    tags = [line.split(":", 1)[1].strip() for line in wheel_metadata.splitlines() if "Tag:" in line]
    base = Path(distribution.locate_file(""))
    dist_info = next(
        p for p in {f.parts[0] for f in distribution.files or []} if p.endswith(".dist-info")
    )
    files = [
        (f.as_posix(), (base / f).read_bytes())
        for f in distribution.files or []
        if not f.as_posix().startswith("..")
        and "__pycache__" not in f.parts
        and not (f.parts[0] == dist_info and f.name in INSTALLER_FILES and len(f.parts) == 2)
    ]
    return write_wheel(directory, dist_info, tags, files)


def project() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def project_packages() -> list[str]:
    """The project's top-level packages: pyproject.toml's list, which pip installs."""
    include = project()["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({pattern.rstrip("*").rstrip(".") for pattern in include})


# --- building and running an image here --------------------------------------------------------


# python:3.11-slim's PATH, behind the image's Python (its /usr/local/bin).
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass
class Image:
    """An image as built here: its file system's /app and /var/lib/a2a under `root`, its
    Python the virtualenv `venv`, and what its Dockerfile set."""

    root: Path
    venv: Path
    workdir: str = "/"
    env: dict[str, str] = field(default_factory=dict)
    cmd: list[str] = field(default_factory=list)
    build: str = ""  # what was built on `venv`, to tell whether it is still there

    def installed(self) -> bool:
        """Whether `venv` still holds this image (a later build replaces what it installed)."""
        marker = self.venv / "built"
        return marker.exists() and marker.read_text() == self.build

    @property
    def site_packages(self) -> Path:
        return next((self.venv / "lib").glob("python*/site-packages"))

    def path(self, image_path: str) -> Path:
        """Where a path of the image's file system is here."""
        return self.root / image_path.lstrip("/")

    def environment(self, *layers: dict[str, str]) -> dict[str, str]:
        """A container's environment: the image's PATH (its Python first), the base image's
        locale, the Dockerfile's ENV, then `layers` (compose's environment, the test's
        services); paths of the image's file system are mapped to where they are here."""
        environment = {
            "PATH": f"{self.venv / 'bin'}:{BASE_PATH}",
            "LANG": "C.UTF-8",  # python:3.11-slim's ENV
            "HOME": str(self.path("/root")),
            **self.env,
        }
        for layer in layers:
            environment.update(layer)
        if "A2A_VAR_DIR" in environment:
            environment["A2A_VAR_DIR"] = str(self.path(environment["A2A_VAR_DIR"]))
        return environment

    def run(
        self, argv: list[str], env: dict[str, str], timeout: float = 120, cwd: str = ""
    ) -> subprocess.CompletedProcess[str]:
        """`argv` in a container of this image: from its WORKDIR (or `cwd`), with `env` and
        nothing else."""
        assert self.installed(), "another image was built on this one's virtualenv since"
        return subprocess.run(
            argv,
            cwd=self.path(cwd or self.workdir),
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            executable=shutil.which(argv[0], path=env["PATH"]),
        )

    def start(self, argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
        assert self.installed(), "another image was built on this one's virtualenv since"
        return subprocess.Popen(
            argv,
            cwd=self.path(self.workdir),
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            executable=shutil.which(argv[0], path=env["PATH"]),
        )


class Builder:
    """Builds images from Dockerfiles, instruction by instruction, on this machine.

    FROM is a fresh virtualenv of this interpreter; COPY copies from the build context as
    docker build sends it; RUN runs with `/bin/sh -c` in the WORKDIR, the image's Python first
    on PATH, pip installing offline from `wheelhouse`; steps that set up the system (its user,
    its directories) are done by hand instead. Like docker build's cache, the dependency layer
    (the first RUN that installs) is built once: a later build with the same instructions and
    copied files up to it starts from it again, pip uninstalling whatever a build since then
    added on top (its project or an executor package). USER is not emulated: the processes
    run as this test's user."""

    def __init__(self, workspace: Path, wheelhouse: Path) -> None:
        self.workspace = workspace
        self.wheelhouse = wheelhouse
        # cache key of a dependency layer -> (its virtualenv, its distributions)
        self.layers: dict[str, tuple[Path, set[str]]] = {}
        self.images: dict[Path, Image] = {}
        self.builds = 0

    def build(self, context: Path) -> Image:
        """The image of the Dockerfile in `context`; built again only if a build since has
        replaced it on its virtualenv."""
        if (built := self.images.get(context)) and built.installed():
            return built
        self.builds += 1
        image = Image(root=self.workspace / f"image-{self.builds}", venv=Path())
        image.path("/root").mkdir(parents=True)  # HOME
        text = (context / "Dockerfile").read_text()
        self._execute(image, dockerfile_instructions(text), build_context(context))
        self.images[context] = image
        return image

    def derive(self, base: Image, dockerfile: str, context: Path, name: str) -> Image:
        """An image `FROM <base>`: the base's files and Python, the instructions on top."""
        instructions = dockerfile_instructions(dockerfile)
        assert instructions[0].keyword == "FROM" and instructions[0].arguments == name
        assert base.installed(), "the base image is no longer installed"
        derived = Image(
            root=base.root,
            venv=base.venv,
            workdir=base.workdir,
            env=dict(base.env),
            cmd=list(base.cmd),
            build=base.build,
        )
        self._execute(derived, instructions[1:], build_context(context), layers=False)
        return derived

    def _execute(
        self,
        image: Image,
        instructions: list[Instruction],
        context: dict[str, Path],
        layers: bool = True,
    ) -> None:
        key = hashlib.sha256()
        cached = False
        for instruction in instructions:
            key.update(str(instruction).encode())
            arguments = instruction.arguments
            match instruction.keyword:
                case "FROM":
                    version = re.fullmatch(r"python:(\d+\.\d+)(-slim)?", arguments)
                    assert version, f"FROM {arguments}: only python:<x.y>[-slim] is stood in for"
                    require(
                        version.group(1) == "{}.{}".format(*sys.version_info[:2]),
                        f"the image's Python is {version.group(1)}, this one is not",
                    )
                case "ENV":
                    image.env.update(env_assignments(arguments))
                case "WORKDIR":
                    image.workdir = posixpath.join(image.workdir, arguments)
                    image.path(image.workdir).mkdir(parents=True, exist_ok=True)
                case "COPY":
                    targets = copy_targets(
                        arguments, image.workdir, context, lambda path: image.path(path).is_dir()
                    )
                    for to, path in sorted(targets.items()):
                        image.path(to).parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(context[path], image.path(to), follow_symlinks=False)
                        key.update(f"{path}\0".encode() + context[path].read_bytes())
                case "RUN":
                    assert not arguments.startswith("["), "RUN's exec form is not emulated"
                    if SYSTEM_STEP.sub("", arguments).replace("&&", "").strip() == "":
                        # The user and the directories it owns: made here without a user.
                        for folder in re.findall(r"mkdir -p ([^&|;]+)", arguments):
                            for each in folder.split():
                                image.path(each).mkdir(parents=True, exist_ok=True)
                        continue
                    assert not SYSTEM_STEP.search(arguments), (
                        f"RUN {arguments}: keep system steps (users, directories) in a RUN "
                        "of their own, so that the installs can be run here"
                    )
                    layer = key.hexdigest()
                    if layers and not cached and layer in self.layers:
                        image.venv, distributions = self.layers[layer]
                        self._restore(image.venv, distributions)
                        cached = True
                        continue
                    if image.venv == Path():
                        image.venv = self._fresh_venv()
                    self._run(image, arguments)
                    if layers and not cached:
                        self.layers[layer] = (image.venv, self._distributions(image.venv))
                        cached = True
                case "CMD":
                    image.cmd = json.loads(arguments)
                case "EXPOSE" | "LABEL" | "USER":
                    pass
                case _:
                    raise AssertionError(f"{instruction.keyword} is not emulated here")
        assert image.venv != Path(), "the Dockerfile installs nothing"
        image.build = key.hexdigest()
        (image.venv / "built").write_text(image.build)

    def _fresh_venv(self) -> Path:
        venv = self.workspace / f"venv-{len(self.layers) + 1}"
        # The base image's Python, with pip and nothing else: this interpreter's installation
        # (sys._base_executable, not this virtualenv), so nothing installed here is seen.
        subprocess.run(
            [getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)],
            check=True,
            env={"PATH": os.environ["PATH"]},
            timeout=300,
        )
        return venv

    def _run(self, image: Image, command: str) -> None:
        env = image.environment(
            {
                # Offline: the wheels of what this environment has installed, nothing else.
                "PIP_NO_INDEX": "1",
                "PIP_FIND_LINKS": str(self.wheelhouse),
            }
        )
        done = subprocess.run(
            ["/bin/sh", "-c", command],
            cwd=image.path(image.workdir),
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"RUN {command}\n{done.stdout[-3000:]}{done.stderr[-5000:]}"

    def _distributions(self, venv: Path) -> set[str]:
        site = next((venv / "lib").glob("python*/site-packages"))
        return {path.name for path in site.glob("*.dist-info")}

    def _restore(self, venv: Path, distributions: set[str]) -> None:
        """The virtualenv as the layer left it: what later builds installed is uninstalled."""
        now = self._distributions(venv)
        assert distributions <= now, f"{distributions - now} changed since the layer was built"
        added = sorted(d.removesuffix(".dist-info").rsplit("-", 1)[0] for d in now - distributions)
        if added:
            subprocess.run(
                [str(venv / "bin" / "python"), "-m", "pip", "uninstall", "--yes", *added],
                check=True,
                capture_output=True,
                env={"PATH": os.environ["PATH"], "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
                timeout=120,
            )
        (venv / "built").unlink(missing_ok=True)


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Wheels of what the image's pip commands may install: pyproject.toml's dependencies, and
    its build requirements (pip builds the project in an environment of its own), each as
    installed in this environment. pip chooses from them with the pins, offline: a needed
    distribution missing here, or at another version than constraints.txt pins, fails the
    build instead of being fetched; the dev extras are not among them."""
    directory = tmp_path_factory.mktemp("wheelhouse")
    wanted = [*project()["project"]["dependencies"], *project()["build-system"]["requires"]]
    for name in sorted(distribution_closure(wanted)):
        rewheel(name, directory)
    return directory


@pytest.fixture(scope="module")
def builder(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Builder:
    return Builder(tmp_path_factory.mktemp("images"), wheelhouse)


@pytest.fixture
def image(builder: Builder) -> Image:
    """The platform's image, built from the checkout (again if a test built another since)."""
    return builder.build(ROOT)


@pytest.fixture(scope="module")
def suite_services() -> dict[str, str]:
    """Where the suite's PostgreSQL server and Redis are (scripts/test.sh starts them)."""
    from django.db import connection

    db = connection.settings_dict
    require(db["ENGINE"].endswith("postgresql"), "the image test needs PostgreSQL (make test)")
    require(os.environ.get("REDIS_URL", "").startswith("redis://"), "it needs Redis (make test)")
    return {
        "host": db["HOST"] or "localhost",
        "port": str(db["PORT"] or 5432),
        "user": db["USER"],
        "password": db["PASSWORD"] or "",
        "maintenance": db["NAME"],
        "REDIS_URL": os.environ["REDIS_URL"],
        "CELERY_BROKER_URL": os.environ.get("CELERY_BROKER_URL", os.environ["REDIS_URL"]),
    }


@pytest.fixture(scope="module")
def image_database(suite_services: dict[str, str]) -> Iterator[dict[str, str]]:
    """A new, empty database on the suite's server for the image's processes, dropped after:
    the settings of compose's services, pointed at the suite's PostgreSQL and Redis."""
    import psycopg
    from psycopg import sql

    s = suite_services
    name = f"image_{os.getpid()}"
    admin = {"host": s["host"], "port": s["port"], "user": s["user"], "dbname": s["maintenance"]}
    if s["password"]:
        admin["password"] = s["password"]
    with psycopg.connect(**admin, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    user = quote(s["user"], safe="") + (
        f":{quote(s['password'], safe='')}" if s["password"] else ""
    )
    yield {
        "DATABASE_URL": f"postgres://{user}@{s['host']}:{s['port']}/{name}",
        "REDIS_URL": s["REDIS_URL"],
        "CELERY_BROKER_URL": s["CELERY_BROKER_URL"],
    }
    with psycopg.connect(**admin, autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture
def migrated(image: Image, image_database: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """compose's migrate, run once by the platform's image on the image's database."""
    url = image_database["DATABASE_URL"]
    if url not in MIGRATED:
        migrate = compose_service("migrate")["command"]
        env = image.environment(compose_environment("migrate"), image_database)
        MIGRATED[url] = image.run(migrate, env)
    return MIGRATED[url]


MIGRATED: dict[str, subprocess.CompletedProcess[str]] = {}
# The required secrets, one set for the whole module: what migrate encrypts, later commands
# decrypt with the same A2A_ENCRYPTION_KEYS.
SAMPLES: dict[str, str] = {}


def compose_environment(service: str) -> dict[str, str]:
    """The environment compose gives `service` when only the required variables are set."""
    from .test_deployment import _required_samples, platform_services, resolved_environment

    if not SAMPLES:
        SAMPLES.update(_required_samples())
    return resolved_environment(platform_services()[service], SAMPLES)


def compose_service(name: str) -> dict[str, Any]:
    from .test_deployment import compose

    return compose()["services"][name]


def output(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-6000:]}"


# Where a fresh interpreter finds the project's packages (`bindings` has no __init__.py: a
# namespace package, which gathers a folder of that name from every entry of the path) and
# which of them pip installed in site-packages, its path and its import finders (an editable
# install adds a finder of its own).
WHERE = """
import importlib.metadata, importlib.util, json, sys, sysconfig
from importlib.machinery import PathFinder

def found(name):
    return list(importlib.util.find_spec(name).submodule_search_locations)

def installed(name):
    spec = PathFinder.find_spec(name, [sysconfig.get_paths()["purelib"]])
    return list(spec.submodule_search_locations) if spec else []

print(json.dumps({
    "found": {name: found(name) for name in sys.argv[1:]},
    "installed": {name: installed(name) for name in sys.argv[1:]},
    "distribution": str(importlib.metadata.distribution("a2a-platform").locate_file("")),
    "path": sys.path,
    "finders": [repr(finder) for finder in sys.meta_path],
    "prefix": sys.prefix,
}))
"""


# --- the image ---------------------------------------------------------------------------------


def test_the_image_checks_migrates_and_serves_from_its_own_files(
    image: Image,
    image_database: dict[str, str],
    migrated: subprocess.CompletedProcess[str],
    tmp_path: Path,
) -> None:
    # Two daphne processes (compose's default is one per core): the path of many, with the
    # memory of a many-core machine's runner bounded.
    processes = {"A2A_WEB_PROCESSES": "2"}
    web = image.environment(compose_environment("web"), image_database, processes)
    app = image.path(image.workdir)

    # Nothing of the checkout is on the image's Python's path: the project is imported from
    # /app (WORKDIR, where `python manage.py` runs), and pip installed it in site-packages.
    assert "PYTHONPATH" not in web
    done = image.run(["python", "-c", WHERE, *project_packages()], web)
    assert done.returncode == 0, output(done)
    where = json.loads(done.stdout)
    for package in project_packages():
        parents = [Path(f).parent for f in where["found"][package]]
        assert parents[0] == app and set(parents) <= {app, image.site_packages}, parents
        assert [Path(f).parent for f in where["installed"][package]] == [image.site_packages]
    assert Path(where["distribution"]) == image.site_packages
    assert Path(where["prefix"]) == image.venv
    assert not any(entry and Path(entry).is_relative_to(ROOT) for entry in where["path"])
    assert not any("editable" in f or str(ROOT) in f for f in where["finders"]), where["finders"]

    # `check --deploy` with a production public URL (https): no issue. (With compose's trial
    # default, http://localhost:8000, the console's cookies are not Secure: W012 and W016.)
    production = {**web, "A2A_PUBLIC_BASE_URL": "https://a2a.example.com"}
    strict = ["python", "manage.py", "check", "--deploy", "--fail-level", "WARNING"]
    done = image.run(strict, production)
    assert done.returncode == 0, output(done)
    assert "System check identified no issues (2 silenced)." in done.stdout, output(done)

    # compose's migrate made the tables, on a database of its own (the fixture ran it).
    assert migrated.returncode == 0, output(migrated)
    assert "Applying agents.0001_initial... OK" in migrated.stdout, output(migrated)

    # The image's CMD (compose's web command) serves: /readyz reaches PostgreSQL, the broker
    # and the channel layer. It listens on a free port of the loopback address here.
    assert image.cmd == compose_service("web")["command"]
    port = _free_port()
    command = list(image.cmd)
    command[command.index("--bind") + 1] = "127.0.0.1"
    command[command.index("--port") + 1] = str(port)
    log = tmp_path / "runweb.log"
    runweb = image.start(command, web, log)
    try:
        _wait_for_port(port, runweb, log)
        # Every daphne process has started (a stop before that ends one by the signal).
        listening = processes["A2A_WEB_PROCESSES"]
        started = poll(
            lambda: log.read_text().count("Listening on TCP") == int(listening), timeout=90
        )
        assert started, log.read_text()[-4000:]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=90) as answer:
            status, body = answer.status, json.loads(answer.read())
    finally:
        # runweb passes SIGTERM on and waits for its daphne processes (their drain): given the
        # time, no daphne outlives it.
        runweb.terminate()
        try:
            runweb.wait(timeout=60)
        except subprocess.TimeoutExpired:
            stop_process(runweb)
    assert status == 200 and body["status"] == "ready", (body, log.read_text()[-4000:])
    assert set(body["checks"].values()) == {"ok"}, body
    assert "Traceback" not in log.read_text(), log.read_text()[-4000:]
    assert runweb.returncode == 0, log.read_text()[-4000:]  # it drained and stopped


def fenced(text: str, language: str) -> list[str]:
    """The code blocks of a Markdown text in `language`, unindented."""
    return [
        textwrap.dedent(block)
        for block in re.findall(rf"^ *```{language}\n(.*?)^ *```", text, re.M | re.S)
    ]


def test_the_production_guide_recipe_for_python_executors_works(
    builder: Builder,
    image: Image,
    image_database: dict[str, str],
    migrated: subprocess.CompletedProcess[str],
    tmp_path: Path,
) -> None:
    """docs/production.md's image on top of the platform's, built as written: its Dockerfile
    lines install a package holding docs/agents.md's WeatherExecutor, and its create_agent
    command registers an agent of kind `python` that uses it."""
    guide = (ROOT / "docs" / "production.md").read_text()
    recipe = guide.split("### Tenants' own `python` executors", 1)[1].split("\n## ", 1)[0]
    (dockerfile,) = fenced(recipe, "dockerfile")
    (override,) = [yaml.safe_load(block) for block in fenced(recipe, "yaml")]
    from .test_deployment import platform_services

    base_name = compose_service("web")["image"]
    assert set(override["services"]) == set(platform_services())
    for service in override["services"].values():
        assert service["image"] != base_name and (tmp_path / service["build"]).name in recipe

    # given the executor's package, with the class agents.md writes, as the wheel the recipe
    # copies (its name says the distribution and version)
    (weather,) = [
        block
        for block in fenced((ROOT / "docs" / "agents.md").read_text(), "python")
        if block.startswith("# acme_agents/weather.py")
    ]
    wheel_name = next(w for w in shlex.split(dockerfile) if w.endswith(".whl"))
    distribution, version = wheel_name.split("-")[:2]
    dist_info = f"{distribution}-{version}.dist-info"
    context = tmp_path / override["services"]["web"]["build"]
    context.mkdir()
    built = write_wheel(
        context,
        dist_info,
        ["py3-none-any"],
        [
            ("acme_agents/__init__.py", b""),
            ("acme_agents/weather.py", weather.encode()),
            (
                f"{dist_info}/METADATA",
                f"Metadata-Version: 2.1\nName: {distribution}\n"
                f"Version: {version}\nRequires-Dist: a2a-sdk\n".encode(),
            ),
            (
                f"{dist_info}/WHEEL",
                b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
            ),
        ],
    )
    assert built.name == wheel_name

    # when the recipe's image is built on the platform's
    acme = builder.derive(image, dockerfile, context, name=base_name)
    env = acme.environment(compose_environment("web"), image_database)

    # then the class is installed in the image's site-packages, and the agent is registered
    executors = env["A2A_PYTHON_EXECUTORS"].split(",")
    assert executors == ["acme_agents.weather.WeatherExecutor"]
    module, _, _ = executors[0].rpartition(".")
    done = acme.run(["python", "-c", f"import {module} as m; print(m.__file__)"], env)
    assert Path(done.stdout.strip()).is_relative_to(acme.site_packages), output(done)
    assert migrated.returncode == 0, output(migrated)
    for argv in (
        ["python", "manage.py", "create_tenant", "acme", "--name", "Acme"],
        next(
            shlex.split(line)[shlex.split(line).index("python") :]
            for line in recipe.splitlines()
            if "create_agent" in line and "--kind python" in line
        ),
    ):
        done = acme.run(argv, env)
        assert done.returncode == 0, f"{argv}\n{output(done)}"
    assert "/a2a/acme/weather/.well-known/agent-card.json" in done.stdout, output(done)


def test_an_image_without_one_of_the_packages_fails_its_check(
    builder: Builder, tmp_path: Path
) -> None:
    """The same build from a checkout whose .dockerignore leaves `bindings` out (as the
    Dockerfile that copied each package by name did): the image cannot even load its URLs."""
    # given a copy of the build context, one package left out
    scratch = tmp_path / "checkout"
    for path, file in {**build_context(ROOT), "Dockerfile": ROOT / "Dockerfile"}.items():
        (scratch / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, scratch / path)
    ignore = (ROOT / ".dockerignore").read_text() + "bindings/\n"
    (scratch / ".dockerignore").write_text(ignore)
    assert not any(path.startswith("bindings/") for path in build_context(scratch))

    # when it is built and checked with compose's environment
    image = builder.build(scratch)
    done = image.run(
        ["python", "manage.py", "check"], image.environment(compose_environment("web"))
    )

    # then the check fails, naming the package
    assert done.returncode == 1, output(done)
    assert "ModuleNotFoundError: No module named 'bindings'" in done.stderr, output(done)


# docs.docker.com's examples of .dockerignore (https://docs.docker.com/build/concepts/context/).
DOCKERIGNORE_EXAMPLES = [
    ("*/temp*", ["somedir/temporary.txt", "somedir/temp"], ["temp.txt", "a/b/temp"]),
    ("*/*/temp*", ["somedir/subdir/temporary.txt"], ["somedir/temp", "temp"]),
    ("temp?", ["tempa", "tempb", "tempa/inside.txt"], ["temp", "tempab", "a/tempa"]),
    ("**/*.go", ["main.go", "a/b/c.go"], ["main.golang"]),
    ("*.md\n!README*.md\nREADME-secret.md", ["a.md", "README-secret.md"], ["README.md"]),
    ("*.md\nREADME-secret.md\n!README*.md", ["a.md"], ["README.md", "README-secret.md"]),
    ("# comment\n/var/\n", ["var", "var/key"], ["a/var", "variable"]),
    ("*\n!keep/\n**/__pycache__/", ["x", "keep/__pycache__/a.pyc"], ["keep/a.py"]),
]


@pytest.mark.parametrize("text, left_out, sent", DOCKERIGNORE_EXAMPLES)
def test_dockerignore_is_read_as_docker_build_reads_it(
    text: str, left_out: list[str], sent: list[str]
) -> None:
    patterns = dockerignore_patterns(text)
    assert [p for p in left_out if not ignored(p, patterns)] == []
    assert [p for p in sent if ignored(p, patterns)] == []
