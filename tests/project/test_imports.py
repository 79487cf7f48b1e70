"""The shape of the package: no import cycles among pipeline modules (imports
inside functions count too: a deferred import must never be what keeps a cycle
from failing), and no module reaching into another's private names."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pipeline" / "tokenmill"

# Cycles being broken elsewhere, each the sorted modules of one cycle (none now:
# tokenmill.formats <-> tokenmill.tokenizer is gone with the tokenizer package).
KNOWN_CYCLES: set[tuple[str, ...]] = set()


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of `tree` but those under `if TYPE_CHECKING:`, which never
    run: what type checkers import makes no cycle."""
    nodes, todo = [], [tree]
    while todo:
        node = todo.pop()
        nodes.append(node)
        for child in ast.iter_child_nodes(node):
            test = child.test if isinstance(child, ast.If) else None
            if isinstance(test, ast.Name | ast.Attribute) and "TYPE_CHECKING" in ast.unparse(test):
                todo += child.orelse
                continue
            todo.append(child)
    return nodes


def imports(
    path: Path, name: str, known: dict[str, Path], runtime: bool = False
) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for every import in the file,
    at any depth (`runtime`: but those only type checkers make), resolved to
    pipeline modules."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in runtime_nodes(tree) if runtime else ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:  # `from tokenmill.formats import hf`: the module itself
                    found.append((sub, []))
                else:
                    found.append((base, [alias.name]))
    return [(m, names) for m, names in found if m == "tokenmill" or m.startswith("tokenmill.")]


def graph() -> dict[str, set[str]]:
    known = modules()
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        targets = set()
        for target, _ in imports(path, name, known, runtime=True):
            if target in known and target != name:
                targets.add(target)
            # Importing tokenmill.a.b first runs pipeline/tokenmill/a/__init__.py: an edge to the
            # package too, unless the importer lives inside it (its own container).
            parent = target.rpartition(".")[0]
            while parent.count(".") >= 1:
                if not name.startswith(parent + ".") and parent != name:
                    targets.add(parent)
                parent = parent.rpartition(".")[0]
        edges[name] = targets
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_walk_sees_deferred_and_package_imports():
    edges = graph()
    assert "tokenmill.cli" in edges and "tokenmill.stages.run" in edges["tokenmill.cli"]
    assert "tokenmill.stages.count" in edges["tokenmill.stages.run"]


def test_no_import_cycles():
    found = [tuple(c) for c in cycles(graph())]
    unexpected = [c for c in found if c not in KNOWN_CYCLES]
    assert not unexpected, "import cycles: " + "; ".join(" <-> ".join(c) for c in unexpected)


def private(module: str, name: str) -> bool:
    # tokenmill._native is the compiled core itself, not a private name; dunders
    # (__version__) are public.
    if module == "tokenmill" and name == "_native":
        return False
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_private_imports_across_modules():
    known = modules()
    bad = []
    for name, path in known.items():
        for target, names in imports(path, name, known):
            if target == name:
                continue
            bad += [f"{name}: {target}.{n}" for n in names if private(target, n)]
    assert not bad, "private names imported from other modules: " + ", ".join(bad)


def test_building_a_config_does_not_load_the_native_core():
    # Checking options (every command does, first) must not pay for loading the
    # native core, nor fail on a machine where it is not built yet.
    code = (
        "import sys; from tokenmill.config import Config; Config(mode='char', vocab_size=500); "
        "print('tokenmill._native' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_encoding_parquet_does_not_import_pandas(tmp_path):
    # PyArrow imports pandas (a fifth of a second of every run's start-up)
    # the first time it converts a Python list, scalar or NumPy array: the
    # encode command makes its arrays from buffers instead. Nor does it need
    # pyarrow.compute (~25 ms to import), or tqdm (~15 ms) without a terminal.
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["hello world", "καλημέρα", ""]}), tmp_path / "a.parquet")
    vocab = PACKAGE.parents[1] / "vocabularies" / "gpt2.tiktoken"
    args = [str(tmp_path / "a.parquet"), str(tmp_path / "out"), "--tokenizer", str(vocab)]
    code = (
        "import sys; from tokenmill.entry import main\n"
        f"sys.argv = ['tokenmill', 'encode', *{args!r}, '--pattern', 'gpt2', '--workers', '1']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print([m for m in ('pandas', 'pyarrow.compute', 'tqdm') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "1 shard " in out.stderr + out.stdout and out.stdout.strip().endswith("[]")


def test_loading_a_tokenizer_and_encoding_a_string_imports_no_pyarrow():
    """`tokenmill.load` of a .tiktoken file and `encode` of a str need neither
    PyArrow nor NumPy (a third of that start-up): they are imported where used."""
    script = (
        "import sys, tokenmill\n"
        f"tok = tokenmill.load({str(PACKAGE.parents[1] / 'vocabularies' / 'gpt2.tiktoken')!r})\n"
        "assert tok.encode('hello world')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyarrow', 'numpy')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
