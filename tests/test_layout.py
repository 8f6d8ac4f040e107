"""The package layout's import rules (issue 17), read from the source with ``ast``; nothing is imported.

What counts as an import of module M: an ``import`` or ``from ... import`` statement anywhere in M
(module level, in a function or a class, under ``if TYPE_CHECKING``), relative ones resolved, and an
``importlib.import_module("...")`` or ``importlib.util.find_spec("...")`` call with a constant
string. ``from P import n`` imports ``P.n`` where that is a module of ours, else ``P``.

The rules, each the one its package's ``__init__.py`` docstring states:

* engine_bridge (training included) never imports Qt (PySide6, shiboken, pyqtgraph, matplotlib's Qt
  backends) or ``app``; one named exception: the CLI's launcher starts the desktop app by name.
* engine_bridge's sub-packages import only what ``EB_ALLOWED`` lists: runtime only common (never
  models, bench or cli), models not runtime, common nothing of ours. The one seam between the two
  is the pairing checks' (``PREFLIGHT``), models -> runtime only: the checks read the K/V types
  asked for and the build's backend. The engine gets the checks from its caller
  (``preflight=models.pair_preflight.PAIR_PREFLIGHT``), so no runtime module imports models.
* app's sub-packages import only what ``APP_ALLOWED`` lists (all of them may import engine_bridge).
* No circle: the graph of module-level imports has no cycle, and neither has the graph of all
  imports (function level included, the kind bench_report / bench_report_html had).
"""

from __future__ import annotations

import ast
import fnmatch
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOPS = ("engine_bridge", "app")
QT = (
    "PySide6",
    "PySide2",
    "shiboken6",
    "shiboken2",
    "PyQt5",
    "PyQt6",
    "pyqtgraph",
    "matplotlib.backends.backend_qt",
    "matplotlib.backends.qt_compat",
)

#: sub-package -> the other sub-packages of engine_bridge it may import (itself always; the root
#: package ``engine_bridge`` holds only ``__version__`` and may be imported by all)
EB_ALLOWED = {
    "common": set(),
    "runtime": {"common"},
    "models": {"common"},
    "bench": {"common", "runtime", "models"},
    "training": {"common", "runtime", "models"},
    "serve": {"common", "runtime", "models"},
    "cli": {"common", "runtime", "models", "bench", "training", "serve"},
}

#: The pairing checks' imports of runtime, the only imports between runtime and models (never
#: runtime -> models: Engine.load is handed the checks by its caller, runtime.preflight):
#: (importer, imported, function level only?)
PREFLIGHT = {
    # the checks judge the K/V cache types the engine is asked for (KVTypes, KV_TYPES, QUANTISED_KV)
    ("engine_bridge.models.compat", "engine_bridge.runtime.config", False),
    # ... and need the build's backend (llama_ffi.build_info), read only when a check runs
    ("engine_bridge.models.compat", "engine_bridge.runtime.llama_ffi", True),
}

#: The CLI hands over to the desktop app when no subcommand is given (importlib, by name).
LAUNCHER = ("engine_bridge.cli.dispatch", "app.shell.main")

#: sub-package of app -> the other app sub-packages it may import (engine_bridge always allowed)
APP_ALLOWED = {
    "common": set(),
    "chat": {"common", "shell"},  # the chat session drives the engine worker (shell.workers)
    "pairing": {"common"},
    "diagnostics": {"common"},
    "bench": {"common"},
    "models": {"common", "shell"},  # shell.status_bar's byte formatting
    "training": {"common", "chat"},  # chat_session.describe_error for a failed load
    "serve": {"common", "shell"},  # the local server runs its requests on the engine worker (shell.workers)
    "shell": {"common", "chat", "pairing", "diagnostics", "bench", "models", "training", "serve"},
}


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # absolute dotted name (one of ours where it resolves to one)
    line: int
    in_function: bool
    dynamic: bool  # importlib by name

    def where(self) -> str:
        kind = "importlib" if self.dynamic else ("function-level import" if self.in_function else "import")
        return f"{module_file(self.importer)}:{self.line}: {self.importer} -> {self.target} ({kind})"


def our_modules() -> dict[str, Path]:
    mods = {}
    for top in TOPS:
        for p in sorted((ROOT / top).rglob("*.py")):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = p
    return mods


MODULES = our_modules()


def module_file(name: str) -> str:
    return str(MODULES[name].relative_to(ROOT)) if name in MODULES else name


def imports_of(name: str) -> list[Import]:
    path = MODULES[name]
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []

    def add(target: str, node, in_fn: bool, dynamic: bool = False):
        found.append(Import(name, target, node.lineno, in_fn, dynamic))

    def visit(node, in_fn: bool):
        for child in ast.iter_child_nodes(node):
            child_fn = in_fn or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    add(alias.name, child, in_fn)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - child.level + 1]
                    base = ".".join(up + ([child.module] if child.module else []))
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    add(full if full in MODULES else base, child, in_fn)
            elif isinstance(child, ast.Call) and _dynamic_name(child):
                add(_dynamic_name(child), child, in_fn, dynamic=True)
            visit(child, child_fn)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)
    return found


def _dynamic_name(call: ast.Call) -> str | None:
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    if (
        name in ("import_module", "find_spec")
        and call.args
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, str)
    ):
        return call.args[0].value
    return None


ALL = {name: imports_of(name) for name in MODULES}


def sub_package(name: str) -> str | None:
    """engine_bridge.runtime.engine -> runtime; engine_bridge -> None (the root)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else None


def is_under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


# --- the rules -----------------------------------------------------------------------------------
def qt_or_app_violations(imports: dict[str, list[Import]]) -> list[str]:
    bad = []
    for name, found in imports.items():
        if not is_under(name, "engine_bridge"):
            continue
        for imp in found:
            if any(is_under(imp.target, q) for q in QT):
                bad.append(f"{imp.where()}: engine_bridge never imports Qt")
            elif is_under(imp.target, "app") and (imp.importer, imp.target) != LAUNCHER:
                bad.append(f"{imp.where()}: engine_bridge never imports app")
    return bad


def engine_bridge_violations(imports: dict[str, list[Import]]) -> list[str]:
    bad = []
    for name, found in imports.items():
        own = sub_package(name) if is_under(name, "engine_bridge") else None
        if own is None:
            continue
        for imp in found:
            if not is_under(imp.target, "engine_bridge") or imp.target == "engine_bridge":
                continue
            other = sub_package(imp.target)
            if other == own or other in EB_ALLOWED[own]:
                continue
            seam = {(a, b) for a, b, _ in PREFLIGHT}
            fn_only = {(a, b) for a, b, f in PREFLIGHT if f}
            key = (imp.importer, imp.target)
            if key in seam and not (key in fn_only and not imp.in_function):
                continue
            why = (
                "runtime imports only common; models reaches runtime only for the pairing checks (PREFLIGHT)"
                if {own, other} == {"runtime", "models"}
                else f"engine_bridge.{own} may import {sorted(EB_ALLOWED[own]) or 'nothing else of ours'}"
            )
            bad.append(f"{imp.where()}: {why}")
    return bad


def app_violations(imports: dict[str, list[Import]]) -> list[str]:
    bad = []
    for name, found in imports.items():
        own = sub_package(name) if is_under(name, "app") else None
        if own is None:
            continue
        for imp in found:
            if not is_under(imp.target, "app") or imp.target == "app":
                continue
            other = sub_package(imp.target)
            if other != own and other not in APP_ALLOWED[own]:
                bad.append(f"{imp.where()}: app.{own} may import {sorted(APP_ALLOWED[own]) or 'no other app package'}")
    return bad


def cycles(imports: dict[str, list[Import]], module_level_only: bool) -> list[list[str]]:
    """Strongly connected components of more than one module (or a module importing itself)."""
    graph: dict[str, set[str]] = {name: set() for name in imports}
    for name, found in imports.items():
        for imp in found:
            if (
                imp.target in MODULES
                and imp.target != name
                and not imp.dynamic
                and not (module_level_only and imp.in_function)
            ):
                graph[name].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def describe_cycle(comp: list[str], imports: dict[str, list[Import]], module_level_only: bool) -> str:
    members = set(comp)
    edges = [
        imp.where()
        for name in comp
        for imp in imports[name]
        if imp.target in members
        and imp.target != name
        and not imp.dynamic
        and not (module_level_only and imp.in_function)
    ]
    return "circle " + " <-> ".join(comp) + ":\n    " + "\n    ".join(dict.fromkeys(edges))


# --- the tests -----------------------------------------------------------------------------------
def test_the_walker_sees_imports_at_every_level():
    """A walker that saw nothing would pass every rule: check it on imports known to exist."""
    seen = {(i.importer, i.target, i.in_function) for found in ALL.values() for i in found}
    assert ("engine_bridge.runtime.engine", "engine_bridge.runtime.generation", False) in seen
    assert ("engine_bridge.models.compat", "engine_bridge.runtime.llama_ffi", True) in seen
    assert ("engine_bridge.models.pair_preflight", "engine_bridge.models.compat", False) in seen
    assert ("app.shell.main_window", "app.chat.chat_view", False) in seen
    assert any(i.dynamic and i.target == LAUNCHER[1] for i in ALL[LAUNCHER[0]])


def test_engine_bridge_never_imports_qt_or_app():
    bad = qt_or_app_violations(ALL)
    assert not bad, "\n".join(bad)


def test_engine_bridge_sub_packages_import_only_what_they_may():
    bad = engine_bridge_violations(ALL)
    assert not bad, "\n".join(bad)


def runtime_imports_of_models(imports: dict[str, list[Import]]) -> list[str]:
    return [
        f"{imp.where()}: runtime imports only common; the caller hands the engine its pairing checks "
        "(preflight=engine_bridge.models.pair_preflight.PAIR_PREFLIGHT)"
        for name, found in imports.items()
        if is_under(name, "engine_bridge.runtime")
        for imp in found
        if is_under(imp.target, "engine_bridge.models")
    ]


def test_no_runtime_module_imports_models():
    """runtime sits below models (issue 30): no module under engine_bridge/runtime imports
    engine_bridge.models, at any level, by statement or by importlib; the check fails on a planted one."""
    assert any(is_under(n, "engine_bridge.runtime") for n in ALL) and ALL["engine_bridge.runtime.engine"]
    bad = runtime_imports_of_models(ALL)
    assert not bad, "\n".join(bad)
    planted = dict(ALL)
    planted["engine_bridge.runtime.engine"] = ALL["engine_bridge.runtime.engine"] + [
        Import("engine_bridge.runtime.engine", "engine_bridge.models.compat", 1, True, False)
    ]
    planted["engine_bridge.runtime.rpc"] = ALL["engine_bridge.runtime.rpc"] + [
        Import("engine_bridge.runtime.rpc", "engine_bridge.models", 1, False, True)
    ]
    assert len(runtime_imports_of_models(planted)) == 2


def test_the_pre_flight_seam_is_exactly_what_is_listed():
    """Every PREFLIGHT entry still exists (a stale exception would quietly widen the rule)."""
    seen = {(i.importer, i.target, i.in_function) for found in ALL.values() for i in found}
    for importer, target, fn_only in PREFLIGHT:
        assert (importer, target, True) in seen or (importer, target, False) in seen, (importer, target)
        if fn_only:
            assert (importer, target, False) not in seen, f"{importer} -> {target} must stay inside a function"


def test_app_sub_packages_import_only_what_they_may():
    bad = app_violations(ALL)
    assert not bad, "\n".join(bad)


def test_no_module_imports_in_a_circle():
    bad = [describe_cycle(c, ALL, True) for c in cycles(ALL, module_level_only=True)]
    bad += [describe_cycle(c, ALL, False) for c in cycles(ALL, module_level_only=False)]
    assert not bad, "\n".join(bad)


def test_every_package_has_an_init_with_its_rules():
    """Every folder of Python modules is a regular package whose docstring says what lives there."""
    for top in TOPS:
        for folder in [ROOT / top, *sorted(p for p in (ROOT / top).rglob("*") if p.is_dir())]:
            if folder.name == "__pycache__" or not any(folder.glob("*.py")):
                continue
            init = folder / "__init__.py"
            assert init.exists(), f"{folder.relative_to(ROOT)} has no __init__.py"
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
            assert doc and "may import" in doc.lower(), (
                f"{init.relative_to(ROOT)}: its docstring must say what it may import"
            )


def test_the_rules_catch_a_violation():
    """The checks above fail on a planted violation of each kind (so a passing run means something)."""
    planted = {name: list(found) for name, found in ALL.items()}

    def plant(importer, target, in_function=False, dynamic=False):
        planted[importer] = planted[importer] + [Import(importer, target, 1, in_function, dynamic)]

    plant("engine_bridge.runtime.tree", "PySide6.QtCore", in_function=True)
    plant("engine_bridge.models.synth", "app.shell.workers")
    plant("engine_bridge.runtime.generation", "engine_bridge.bench.runner", in_function=True)
    plant("engine_bridge.runtime.records", "engine_bridge.cli.dispatch")
    plant("engine_bridge.models.library", "engine_bridge.runtime.engine", in_function=True)
    plant("engine_bridge.models.compat", "engine_bridge.runtime.llama_ffi")  # the seam, but at module level
    plant("app.common.throttle", "app.shell.main_window", in_function=True)
    plant("engine_bridge.bench.report", "engine_bridge.bench.report_html", in_function=True)
    assert len(qt_or_app_violations(planted)) == len(qt_or_app_violations(ALL)) + 2
    assert len(engine_bridge_violations(planted)) == len(engine_bridge_violations(ALL)) + 4
    assert len(app_violations(planted)) == len(app_violations(ALL)) + 1
    assert cycles(planted, module_level_only=True) == cycles(ALL, module_level_only=True)
    assert ["engine_bridge.bench.report", "engine_bridge.bench.report_html"] in cycles(planted, module_level_only=False)


# --- README's layout table -----------------------------------------------------------------------
#: rows whose every module must be named (the roots describe their sub-packages; training has its README)
SUMMARY_ROWS = {"engine_bridge/", "app/", "engine_bridge/training/"}


def readme_layout() -> dict[str, str]:
    """README.md's "## Layout" table: folder -> its description."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`") and cells[0].endswith("/`"):
            rows[cells[0].strip("`")] = cells[1]
    return rows


def _ignored(name: str) -> bool:
    patterns = [
        p.strip().strip("/")
        for p in (ROOT / ".gitignore").read_text().splitlines()
        if p.strip() and not p.startswith("#")
    ]
    return name.startswith(".") or any(fnmatch.fnmatch(name, p) for p in patterns)


def test_readme_layout_table_matches_the_tree():
    rows = readme_layout()
    packages = {f"{p.parent.relative_to(ROOT)}/" for top in TOPS for p in (ROOT / top).rglob("__init__.py")}
    top_folders = {f"{p.name}/" for p in ROOT.iterdir() if p.is_dir() and not _ignored(p.name)}
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode == 0 and tracked.stdout:  # a checkout: folders git does not know are not ours
        top_folders &= {line.split("/", 1)[0] + "/" for line in tracked.stdout.splitlines() if "/" in line}
    missing = sorted((packages | top_folders) - set(rows))
    assert not missing, f"README's layout table has no row for {missing}"
    for folder, text in rows.items():
        assert (ROOT / folder).is_dir(), f"README's layout table names {folder}, which does not exist"
        named = set()
        for name in (n for n in re.findall(r"`([^`\s]+)`", text) if "." in n or n.endswith("/")):
            if not name.endswith((".py", ".sh", ".md", "/")):
                continue
            assert (ROOT / folder / name).exists() or (ROOT / name).exists(), (
                f"README's layout row {folder} names {name}, which is neither in {folder} nor at the root"
            )
            named.add(name)
        if folder in SUMMARY_ROWS or not ((ROOT / folder / "__init__.py").exists() or folder == "gpu/"):
            continue
        files = {
            p.name
            for p in (ROOT / folder).iterdir()
            if p.suffix in (".py", ".sh") and p.name not in ("__init__.py", "__main__.py")
        }
        assert files <= named, f"README's layout row {folder} does not name {sorted(files - named)}"
