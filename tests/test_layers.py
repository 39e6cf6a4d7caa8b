"""The package layout is a stack of layers: a module imports only from its own layer or the ones below,
so no package depends on one above it and there are no circles between packages. Function-level
imports count too (they are imports all the same)."""

import ast
from pathlib import Path

import soma_local

# Lowest first. The top-level modules (errors, data_dir) are the ground every layer stands on.
LAYERS = ["", "s2", "s1", "engine", "calibration", "supervisor", "serve", "bench", "cli"]
ROOT = Path(soma_local.__file__).parent


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (ROOT / parts[1]).is_dir()) else ""


def _imports(path: Path):
    """(line, module) of every import of a soma_local module; ``from a import b`` counts as importing
    ``a.b`` where that is a module of its own."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("soma_local"):
            for alias in node.names:
                sub = Path(*node.module.split(".")[1:], alias.name)
                is_module = (ROOT / sub).is_dir() or (ROOT / sub).with_suffix(".py").is_file()
                yield node.lineno, f"{node.module}.{alias.name}" if is_module else node.module
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names if a.name.startswith("soma_local"))


def test_every_package_is_a_known_layer():
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(LAYERS) - {""}


# The one import upwards: ``from soma_local import Supervisor`` is the documented entry point of the Python
# API, so the package's ``__init__`` (ground layer) re-exports it, lazily (a module ``__getattr__``), so that
# importing any module of the package still loads nothing above the ground layer.
FACADE = {("soma_local/__init__.py", "soma_local.supervisor")}


def test_no_module_imports_from_a_layer_above_it():
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        module = "soma_local." + ".".join(path.relative_to(ROOT).with_suffix("").parts)
        mine = LAYERS.index(_layer(module))
        for line, target in _imports(path):
            if (str(path.relative_to(ROOT.parent)), target) in FACADE:
                continue
            if target.startswith("soma_local.") and LAYERS.index(_layer(target)) > mine:
                wrong.append(f"{path.relative_to(ROOT.parent)}:{line} ({_layer(module) or 'top'}) imports {target}")
    assert not wrong, "\n".join(wrong)


def test_the_facade_is_lazy():
    """Importing the package loads no layer above the ground; naming ``Supervisor`` loads the API."""
    import subprocess
    import sys

    code = ("import sys, soma_local; above = [m for m in sys.modules if m.startswith('soma_local.')]; "
            "assert not above, above; from soma_local import Supervisor; "
            "assert Supervisor.__module__ == 'soma_local.supervisor.supervisor'")
    subprocess.run([sys.executable, "-c", code], check=True)


# S1 may use S2's layer for one reason: the LLM-judge S1 *is* a language model, so it loads a GGUF,
# renders its chat template and runs it on the llama.cpp runtime, and the Jev S1 counts its input limit in
# an S2 tokenizer. Nothing else of S2 (the token loop, sessions, vLLM) is S1's business, and shared
# policy that both use (how many threads) lives in the ground layer (soma_local/threads.py), not in S2.
S1_USES_OF_S2 = {
    "soma_local/s1/llm_judge.py": {"soma_local.s2.formats", "soma_local.s2.llama_cpp"},
    "soma_local/s1/factory.py": {"soma_local.s2.model_files"},
}


def test_s1_uses_s2_only_to_run_a_language_model_s1():
    found = {}
    for path in sorted((ROOT / "s1").rglob("*.py")):
        targets = {t for _, t in _imports(path) if _layer(t) == "s2"}
        if targets:
            found[str(path.relative_to(ROOT.parent))] = targets
    assert found == S1_USES_OF_S2



# Beside the package, above every layer: benchmarks/ and training/ are packages of the installed project
# too (pyproject.toml), run as ``python -m benchmarks.NAME`` and ``python -m training.NAME``.
SCRIPTS = ("benchmarks", "training")


def _is_sys_path(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) \
        and node.value.id == "sys"


def _is_private(node: ast.AST) -> bool:
    """``obj._name``, where obj is not the object's own ``self`` or ``cls``."""
    return isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))


def test_the_script_packages_stand_above_the_engine_and_find_it_installed():
    """The engine imports neither script package; they find it as installed, never by editing sys.path;
    and a benchmark reads another object's public names only (a runtime grows a method for what it
    measures: ``LlamaCppS2.decode_counters``), so a change inside the engine cannot break one unseen."""
    climbs = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            climbs += [f"{path.relative_to(ROOT.parent)}:{node.lineno}" for n in names if n.split(".")[0] in SCRIPTS]
    assert not climbs, climbs
    edits, private = [], []
    for folder in SCRIPTS:
        assert (ROOT.parent / folder / "__init__.py").is_file()
        for path in sorted((ROOT.parent / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                where = f"{path.relative_to(ROOT.parent)}:{getattr(node, 'lineno', 0)}"
                edits += [where] if _is_sys_path(node) else []
                private += [f"{where} .{node.attr}"] if folder == "benchmarks" and _is_private(node) else []
    assert not edits, f"sys.path edited: {edits}"
    assert not private, f"private fields read: {private}"
