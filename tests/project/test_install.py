"""tokenmill installed as users install it: `pip install .`, and the wheel that
`maturin build --release` makes, each into a fresh virtual environment; what the
wheel's metadata asks for, per extra; and what the Makefile installs.

The wheel is built once per session: maturin reuses native/target, so after the
editable install it only packs (a second). Each fresh environment costs a pip
install of the runtime (pyarrow, polars, numpy: ~10 s); it is deleted after its test.
"""

from __future__ import annotations

import ast
import configparser
import email.parser
import functools
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pipeline" / "tokenmill"
VERSION = tomllib.loads((ROOT / "native" / "Cargo.toml").read_text())["package"]["version"]
# The optional imports of the package, each with the extra that brings it (the one its
# error message names; fsspec comes with universal-pathlib; tokenizers, where installed,
# checks that Oniguruma compiles an exported pattern).
OPTIONAL = {
    "ray": "ray",
    "upath": "cloud",
    "fsspec": "cloud",
    "tiktoken": "interop",
    "tokenizers": "interop",
}
# The trainers' readers `tokenmill check` uses where the user has them installed
# (layouts' framework_read), else tokenmill's own: no extra brings them (torch).
TRAINERS = {"megatron", "datatrove", "olmo_core"}
# What each extra is documented to make importable.
PROMISED = {
    "cloud": {"s3fs", "upath"},
    "ray": {"ray"},
    "interop": {"tiktoken", "tokenizers", "transformers", "datasets"},
}
TOOLS = {"pytest", "pytest-xdist", "hypothesis", "ruff", "mypy", "maturin"}
DOCS = ["the cat sat on the mat", "καλημέρα κόσμε, café naïve 東京 don't"]


def run(*cmd, cwd: Path | None = None) -> str:
    result = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(map(str, cmd))}:\n{result.stdout}{result.stderr}"
    return result.stdout


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # maturin moves cargo's library from native/target/maturin/ into the wheel
    # it packs, and cargo, finding the build fresh, does not put it back: a
    # second build after the editable one fails to find it. Cargo's own copy
    # in native/target/release/ is the same build.
    target = ROOT / "native" / "target"
    staged, built = target / "maturin" / "lib_native.so", target / "release" / "lib_native.so"
    # A fresh checkout's editable install may have moved cargo's copy too; the
    # one it installed into the source tree is the same build.
    installed = ROOT / "pipeline" / "tokenmill" / "_native.abi3.so"
    found = [p for p in (built, installed) if p.exists()]
    if not staged.exists() and found:
        staged.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(found[0], staged)
    maturin = [sys.executable, "-m", "maturin", "build", "--release", "--out", str(out)]
    cmd = [*maturin, "--interpreter", sys.executable]
    # After `make test`'s editable install cargo finds native/target fresh and
    # maturin only packs (a second, not a 50 s build from scratch).
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        # Where the editable install left no core to pack, a target folder of its own.
        shutil.rmtree(out)
        out.mkdir()
        target_dir = tmp_path_factory.mktemp("target")
        env = {**os.environ, "CARGO_TARGET_DIR": str(target_dir)}
        result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    built = list(out.iterdir())
    assert len(built) == 1, built
    return built[0]


def wheel_metadata(wheel: Path):
    with zipfile.ZipFile(wheel) as z:
        return email.parser.Parser().parsestr(
            z.read(f"tokenmill-{VERSION}.dist-info/METADATA").decode()
        )


def requirements(wheel: Path, extra: str | None = None) -> list[Requirement]:
    """The wheel's requirements: unconditional ones, or those of `extra` alone."""
    found = []
    for req in map(Requirement, wheel_metadata(wheel).get_all("Requires-Dist")):
        base = req.marker is None or req.marker.evaluate({"extra": ""})
        if (extra is None and base) or (
            extra and not base and req.marker.evaluate({"extra": extra})
        ):
            found.append(req)
    return found


def names(reqs: list[Requirement]) -> set[str]:
    return {canonicalize_name(r.name) for r in reqs}


def closure(wheel: Path, reqs: list[Requirement]) -> set[str]:
    """Every distribution that installing `reqs` brings, from the metadata of this
    environment's distributions (tokenmill's own from the wheel)."""
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = list(reqs)
    while todo:
        req = todo.pop()
        name, extras = canonicalize_name(req.name), frozenset(req.extras)
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        if name == "tokenmill":
            todo += requirements(wheel) + [r for e in extras for r in requirements(wheel, e)]
            continue
        try:
            subs = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            subs = []
        for sub in map(Requirement, subs):
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in {"", *extras}):
                todo.append(sub)
    return {name for name, _ in seen}


@functools.cache
def provided_by() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def distributions(module: str) -> set[str]:
    """The distributions in this environment that provide top-level `module`."""
    return {canonicalize_name(d) for d in provided_by().get(module, [])}


class Imports(ast.NodeVisitor):
    """The top-level modules a file imports when it runs: anywhere (in functions
    too), but not under `if TYPE_CHECKING:`, which only type checkers read."""

    def __init__(self) -> None:
        self.found: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found |= {alias.name.partition(".")[0] for alias in node.names}

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            self.found.add(node.module.partition(".")[0])

    def visit_Call(self, node: ast.Call) -> None:  # pytest.importorskip("name")
        if getattr(node.func, "attr", None) == "importorskip" and node.args:
            if isinstance(node.args[0], ast.Constant):
                self.found.add(str(node.args[0].value).partition(".")[0])
        self.generic_visit(node)


def third_party_imports(folder: Path, local: set[str] = frozenset()) -> set[str]:
    """Top-level modules the Python files under `folder` import, less the standard
    library, tokenmill and `local` ones."""
    imports = Imports()
    for path in folder.rglob("*.py"):
        imports.visit(ast.parse(path.read_text(encoding="utf-8")))
    return imports.found - set(sys.stdlib_module_names) - local - {"tokenmill", "__future__"}


def sorted_readers() -> list[str]:
    """The Makefile's TRAINER_READERS, as written."""
    makefile = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    line = next(line for line in makefile.splitlines() if line.startswith("TRAINER_READERS :="))
    return line.partition(":=")[2].split()


def trainer_readers() -> set[str]:
    """The trainers' readers that `make test` installs without their dependencies
    (the Makefile's TRAINER_READERS): the tests read the layouts back with them."""
    return {canonicalize_name(Requirement(r).name) for r in sorted_readers()}


def imports_of_the_tests() -> set[str]:
    """What the tests import; their helpers and modules are on sys.path by name."""
    tests = ROOT / "tests"
    return third_party_imports(tests, {p.stem for p in tests.rglob("*.py")})


def interpreter(version: str) -> str | None:
    """A Python `version` ("3.12") on this machine: this one, one on PATH, or one that
    pyenv installed (its shims fail for a version that is not selected)."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    installed = sorted(pyenv.glob(f"versions/{version}.*/bin/python{version}"), reverse=True)
    for candidate in [shutil.which(f"python{version}"), *installed]:
        if candidate and subprocess.run([candidate, "-c", ""], capture_output=True).returncode == 0:
            return str(candidate)
    return None


@pytest.fixture
def fresh_venv(tmp_path):
    """fresh_venv(version) -> its bin/ folder; pip comes from this environment
    (`pip --python`), which saves seeding each one with its own."""
    made = []

    def make(version: str) -> Path:
        python = interpreter(version)
        if python is None:
            pytest.skip(f"no Python {version} on this machine")
        venv = tmp_path / f"venv{version}"
        run(python, "-m", "venv", "--without-pip", venv)
        made.append(venv)
        return venv / "bin"

    yield make
    for venv in made:
        shutil.rmtree(venv, ignore_errors=True)


def pip_install(bin_dir: Path, *args) -> dict[str, str]:
    """Install into the environment of `bin_dir`; returns what it then holds, by name."""
    pip = [sys.executable, "-m", "pip", "--python", bin_dir / "python"]
    # --no-compile: byte-compiling pyarrow, numpy and the rest is a third of the
    # install's time, and pip only warns where it fails; importing is the check.
    run(*pip, "install", "--quiet", "--no-compile", *args)
    listed = json.loads(run(*pip, "list", "--format", "json"))
    return {canonicalize_name(d["name"]): d["version"] for d in listed}


def tiny_corpus(folder: Path) -> Path:
    data = folder / "docs"
    data.mkdir()
    lines = "".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in DOCS)
    (data / "a.jsonl").write_text(lines, encoding="utf-8")
    return data


# The wheel and its metadata


def test_maturin_builds_one_abi3_wheel_of_the_cargo_version(wheel):
    name, version, _, tags = parse_wheel_filename(wheel.name)
    assert (name, str(version)) == ("tokenmill", VERSION)
    assert {(t.interpreter, t.abi) for t in tags} == {("cp311", "abi3")}
    assert wheel_metadata(wheel)["Version"] == VERSION


def test_the_wheel_holds_the_tokenmill_package_and_nothing_else(wheel):
    with zipfile.ZipFile(wheel) as z:
        files = z.namelist()
        entry_points = z.read(f"tokenmill-{VERSION}.dist-info/entry_points.txt").decode()
    outside = [
        f for f in files if not f.startswith(("tokenmill/", f"tokenmill-{VERSION}.dist-info/"))
    ]
    assert not outside
    assert {"tokenmill/__init__.py", "tokenmill/_native.abi3.so", "tokenmill/cli.py"} <= set(files)
    assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc")]
    scripts = configparser.ConfigParser()
    scripts.read_string(entry_points)
    assert dict(scripts["console_scripts"]) == {"tokenmill": "tokenmill.entry:main"}


def test_the_runtime_requires_exactly_what_the_package_imports(wheel):
    imported = third_party_imports(PACKAGE)
    assert set(OPTIONAL) | TRAINERS <= imported
    needed = set().union(*(distributions(m) for m in imported - set(OPTIONAL) - TRAINERS))
    assert names(requirements(wheel)) == needed
    for req in requirements(wheel):
        assert any(s.operator == ">=" for s in req.specifier), f"{req}: no lower bound"


def test_each_extra_installs_what_it_promises_and_nothing_of_the_others(wheel):
    for extra, modules in PROMISED.items():
        reqs = requirements(wheel, extra)
        assert names(reqs) == set().union(*(distributions(m) for m in modules)), extra
        for req in reqs:
            assert any(s.operator == ">=" for s in req.specifier), f"{extra}: {req}: no lower bound"
    for module, extra in OPTIONAL.items():
        assert distributions(module) <= closure(wheel, requirements(wheel, extra)), module


def unconditional(reqs: list[Requirement]) -> set[str]:
    """The requirements as written, less their `extra ==` markers."""
    return {str(Requirement(str(r).partition(";")[0])) for r in reqs}


def test_dev_installs_the_tools_every_extra_and_whatever_the_tests_import(wheel):
    dev = requirements(wheel, "dev")
    assert TOOLS <= names(dev)
    # Written out again in pyproject.toml; the same bounds.
    for extra in PROMISED:
        assert unconditional(requirements(wheel, extra)) <= unconditional(dev), extra
    everything = closure(wheel, dev) | trainer_readers()
    missing = {m for m in imports_of_the_tests() if not distributions(m) & everything}
    assert not missing, f"tests import {sorted(missing)}, which the dev extra does not install"


# Fresh environments


def test_pip_install_of_the_source_brings_the_runtime_only_and_a_working_command(
    wheel, fresh_venv, tmp_path
):
    bin_dir = fresh_venv("3.11")
    installed = pip_install(bin_dir, ROOT)
    # Whatever some extra brings that the runtime does not (ray, transformers, pytest, ...).
    extras_only = closure(wheel, requirements(wheel, "dev")) - closure(wheel, requirements(wheel))
    assert installed.keys() & (extras_only - {"tokenmill"}) == set()
    assert names(requirements(wheel)) <= installed.keys()
    # No module of the package needs an extra to import.
    walk = (
        "import importlib, pkgutil, tokenmill\n"
        "for m in pkgutil.walk_packages(tokenmill.__path__, 'tokenmill.'):\n"
        "    if m.name != 'tokenmill.__main__':\n"
        "        importlib.import_module(m.name)\n"
    )
    run(bin_dir / "python", "-c", walk, cwd=tmp_path)
    assert run(bin_dir / "tokenmill", "--version").strip() == f"tokenmill, version {VERSION}"
    data = tiny_corpus(tmp_path)
    run(bin_dir / "tokenmill", "run", data, tmp_path / "out", "--vocab-size", "300", cwd=tmp_path)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["documents"] == len(DOCS)


@pytest.mark.parametrize("version", ["3.11", "3.12"])
def test_the_wheel_installs_and_runs_on_python(version, wheel, fresh_venv, tmp_path):
    bin_dir = fresh_venv(version)
    installed = pip_install(bin_dir, wheel)
    assert installed["tokenmill"] == VERSION
    python = bin_dir / "python"
    assert run(python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])").strip() == version
    assert run(python, "-c", "import tokenmill; print(tokenmill.__version__)").strip() == VERSION
    assert run(bin_dir / "tokenmill", "--version").strip() == f"tokenmill, version {VERSION}"
    data, out = tiny_corpus(tmp_path), tmp_path / "out"
    run(python, "-m", "tokenmill", "run", data, out, "--vocab-size", "300", cwd=tmp_path)
    shard = out / "tokens" / "a.jsonl.parquet"
    for row, doc in enumerate(DOCS):
        assert run(bin_dir / "tokenmill", "decode", "--shard", shard, "--row", row) == doc


def test_the_oldest_versions_the_runtime_allows_run_the_pipeline(wheel, fresh_venv, tmp_path):
    # Each runtime requirement at its lower bound (wheels of the oldest ones stop at 3.11).
    floors = {}
    for req in requirements(wheel):
        (bound,) = [s.version for s in req.specifier if s.operator == ">="]
        floors[canonicalize_name(req.name)] = bound
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in floors.items()))
    bin_dir = fresh_venv("3.11")
    installed = pip_install(bin_dir, wheel, "--constraint", constraints)
    assert {n: Version(installed[n]) for n in floors} == {n: Version(v) for n, v in floors.items()}
    data = tiny_corpus(tmp_path)
    tokenmill = bin_dir / "tokenmill"
    run(tokenmill, "run", data, tmp_path / "out", "--vocab-size", "300", cwd=tmp_path)
    shard = tmp_path / "out" / "tokens" / "a.jsonl.parquet"
    assert run(tokenmill, "decode", "--shard", shard, "--row", 1) == DOCS[1]
    for command in (["stats"], ["verify"], ["pack", "--seq-len", "8"], ["report"], ["sweep"]):
        out = tmp_path / "out"
        args = [out / "tokens", tmp_path / "packed"] if command[0] == "pack" else [out]
        run(tokenmill, command[0], *args, *command[1:], cwd=tmp_path)


# The Makefile


def make_dry_run(target: str, venv: Path) -> list[str]:
    """The commands `make TARGET` would run with its environment at `venv`."""
    return run("make", "-n", target, f"VENV={venv}", cwd=ROOT).splitlines()


def installs(lines: list[str]) -> list[str]:
    return [line for line in lines if "pip install" in line and "--upgrade pip" not in line]


def stamp(venv: Path, name: str, fresh: bool = True) -> None:
    """Mark an install done (newer than every source, even one being edited now) or stale."""
    path = venv / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    when = time.time() + 3600 if fresh else 0
    os.utime(path, (when, when))


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_tokenize_installs_the_runtime_only_and_says_so_and_test_adds_dev(tmp_path):
    venv = tmp_path / ".venv"
    tokenize = make_dry_run("tokenize", venv)
    assert any("-m venv" in line for line in tokenize)
    assert [line.split("python ", 1)[1] for line in installs(tokenize)] == ["-m pip install -e ."]
    assert any("Rust core" in line and "echo" in line for line in tokenize)
    test = make_dry_run("test", venv)
    readers = "-m pip install -q --no-deps " + " ".join(sorted_readers())
    assert [line.split("python ", 1)[1] for line in installs(test)] == [
        "-m pip install -e '.[dev]'",
        readers,
    ]

    # After `make tokenize`: tokenize installs nothing more, test still installs dev.
    stamp(venv, "bin/python")
    stamp(venv, ".installed-runtime")
    assert installs(make_dry_run("tokenize", venv)) == []
    assert len(installs(make_dry_run("test", venv))) == 2
    # After `make test`: neither installs; a changed source (a stale stamp) installs again.
    stamp(venv, ".installed-dev")
    assert installs(make_dry_run("test", venv)) == installs(make_dry_run("tokenize", venv)) == []
    stamp(venv, ".installed-runtime", fresh=False)
    assert len(installs(make_dry_run("tokenize", venv))) == 1


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_tokenize_and_job_pass_a_path_with_a_space_as_one_argument(tmp_path):
    # Unquoted, `DATA="my data"` ran `tokenmill run my data OUT` (an extra argument),
    # and with OUT= empty, read `my` into `data`.
    import shlex

    venv = tmp_path / ".venv"
    stamp(venv, "bin/python")
    stamp(venv, ".installed-runtime")
    extra = ["DATA=my data", "OUT=the out"]
    lines = run("make", "-n", "tokenize", f"VENV={venv}", *extra, cwd=ROOT).splitlines()
    [command] = [shlex.split(line) for line in lines if "tokenmill run" in line]
    assert command[1:] == ["run", "--", "my data", "the out"]
    lines = run("make", "-n", "job", f"VENV={venv}", "JOB=my jobs/a.toml", cwd=ROOT).splitlines()
    [command] = [shlex.split(line) for line in lines if "tokenmill run" in line]
    assert command[1:] == ["run", "--job", "my jobs/a.toml"]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize(
    "name", ["b`id`", 'a"b', "a$$HOME", "x$(id)", "it's", "a\\b", "$", "-n", "--force"]
)
def test_make_passes_a_name_with_shell_or_make_syntax_as_it_is(tmp_path, name):
    # In double quotes, `make tokenize DATA='b`id`'` ran `id`; make itself read $.
    import shlex

    venv = tmp_path / ".venv"
    stamp(venv, "bin/python")
    stamp(venv, ".installed-runtime")
    for target, extra, args in [
        # After --: a name starting with - is no option.
        ("tokenize", [f"DATA={name}", f"OUT={name}o"], ["run", "--", name, f"{name}o"]),
        ("job", [f"JOB={name}"], ["run", "--job", name]),
    ]:
        lines = run("make", "-n", target, f"VENV={venv}", *extra, cwd=ROOT).splitlines()
        [line] = [line for line in lines if "tokenmill run" in line]
        assert shlex.split(line)[1:] == args, line
        # What the shell runs: the command echoes its arguments instead.
        said = subprocess.run(
            ["sh", "-c", line.replace(f"{venv}/bin/tokenmill", "printf '%s\\n'", 1)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert said.stdout.splitlines() == args, line
