"""The house rules of docs/architecture.md, read off every import with ``ast``.

Layers import only downward, nothing imports a cycle, other stages are reached through their
package's face, each heavy third-party package has one owner, only three store modules choose a
backend, and a dataidx module is imported inside a function only by a CLI command.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from .helpers import REPO

PACKAGE = REPO / "src" / "dataidx"

#: Units (a stage package, or a group of root modules) and their layers, lowest first.
LAYERS = {
    "root": 0, "store": 1, "convert": 2, "sources": 2, "config": 3, "index": 4, "read": 4,
    "render": 5, "pack": 6, "dedup": 6, "cache": 7, "view": 7, "export": 7, "training": 8, "cli": 9, "face": 10,
}
ROOT_MODULES = {"errors", "_version", "_lazy", "paths", "plugins", "progress", "spec"}
#: Third-party packages and the units allowed to import them.
OWNERS = {
    "torch": {"training"},
    "click": {"cli"},
    "psycopg": {"store.postgres"},
    "transformers": {"render"},
    "tokenizers": {"render"},
    "jinja2": {"render"},
    "sqlalchemy": {"store", "index"},
    "alembic": {"store"},
    "matplotlib": {"view"},
    "datasette": {"view"},
    "uvicorn": {"view"},
}
#: The store modules that may pick a backend (import store.postgres); see rule 4.
BACKEND_CHOOSERS = {"dataidx.store.connect", "dataidx.store.write", "dataidx.store.query"}
MAX_LINES = 300
#: The most names the store's face may offer: its nouns and its engine, not a function per read.
#: 31 since the sixth noun, ``Media`` (issue 53: media files are stored things with their own tables);
#: 32 since the seventh, ``Evidence`` (issue 55: duplicates and leaks, stored as lists with their evidence).
STORE_FACE_NAMES = 32


@dataclass(frozen=True)
class Import:
    """One imported module, where it is imported, and whether inside a function."""

    source: str  # importing module, dotted
    target: str  # imported module, dotted (a package's face for `from package import name`)
    names: tuple[str, ...]
    line: int
    in_function: str | None
    aliased: bool
    commented: bool  # a comment on its line or the line above


def module_name(path: Path, top: Path = PACKAGE) -> str:
    parts = list(path.relative_to(top.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_package(module: str) -> bool:
    return (PACKAGE.parent / module.replace(".", "/") / "__init__.py").is_file()


def unit(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("__init__", "__main__"):
        return "face"
    if parts[1] in ROOT_MODULES:
        return "root"
    return parts[1]


def resolve(source: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = source.split(".") if is_package(source) else source.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def face_names(package: str) -> set[str]:
    """Names a package's ``__init__`` offers: what it imports, assigns, or maps lazily."""
    tree = ast.parse((PACKAGE.parent / package.replace(".", "/") / "__init__.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None:  # not `from . import module`
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy_face"
              and isinstance(node.args[1], ast.Dict)):
            names.update(key.value for key in node.args[1].keys)
    return names


def imports_of(path: Path, source: str) -> list[Import]:
    text = path.read_text()
    lines = text.splitlines()
    found: list[Import] = []

    def commented(line: int) -> bool:
        return "#" in lines[line - 1] or (line > 1 and lines[line - 2].strip().startswith("#"))

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.append(Import(source, alias.name, (), child.lineno, function,
                                        alias.asname is not None and "." not in alias.name, commented(child.lineno)))
            elif isinstance(child, ast.ImportFrom):
                target = resolve(source, child)
                for alias in child.names:
                    # A name the package's face offers, or else a submodule (`from . import index`).
                    submodule = f"{target}.{alias.name}"
                    offered = is_package(target) and target.startswith("dataidx") and alias.name in face_names(target)
                    module = submodule if not offered and submodule.replace(".", "/") in MODULE_PATHS else target
                    # `name as name` is the same name (a face's re-export for type checkers)
                    found.append(Import(source, module, (alias.name,), child.lineno, function,
                                        alias.asname not in (None, alias.name), commented(child.lineno)))
            visit(child, inner)

    visit(ast.parse(text), None)
    return found


def lazy_targets(path: Path, source: str) -> list[str]:
    """Modules a package face maps names to with ``lazy_face``: edges like imports."""
    targets = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy_face":
            mapping = node.args[1]
            if isinstance(mapping, ast.Name):  # the root face names its map
                mapping = next(n.value for n in ast.walk(ast.parse(path.read_text()))
                               if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == mapping.id)
            for value in mapping.values:
                targets.append(source + value.value if value.value.startswith(".") else value.value)
    return targets


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
MODULE_PATHS = {module.replace(".", "/") for module in MODULES}
IMPORTS = [found for module, path in MODULES.items() for found in imports_of(path, module)]
OURS = [found for found in IMPORTS if found.target == "dataidx" or found.target.startswith("dataidx.")]


def test_every_module_sits_in_a_known_unit() -> None:
    assert {unit(module) for module in MODULES} <= set(LAYERS)
    root = [path.name for path in PACKAGE.glob("*.py")]
    assert len(root) <= 10, f"the package root holds {len(root)} modules: {sorted(root)}"


def test_layers_import_only_downward() -> None:
    broken = [f"{i.source}:{i.line} imports {i.target} ({unit(i.source)} -> {unit(i.target)})"
              for i in OURS
              if unit(i.target) != unit(i.source) and LAYERS[unit(i.target)] >= LAYERS[unit(i.source)]]
    assert not broken, "\n".join(broken)


def test_other_stages_are_reached_through_their_package_face() -> None:
    def face(module: str) -> str:
        parts = module.split(".")
        return module if unit(module) in ("root", "face") else ".".join(parts[:2])

    broken = [f"{i.source}:{i.line} imports {i.target}; import from {face(i.target)}"
              for i in OURS if unit(i.target) != unit(i.source) and i.target != face(i.target)]
    # The migrations are the store's own (Alembic runs them from store/sqlite/migrations.py; they
    # ship as dataidx._migrations): they may import store's modules, and other stages' faces.
    # Tests and scripts import the module they test or time, so they are not held to the faces.
    for path in sorted((REPO / "migrations").rglob("*.py")):
        for i in imports_of(path, f"migrations.{path.stem}"):
            if i.target.startswith("dataidx.") and unit(i.target) != "store" and i.target != face(i.target):
                broken.append(f"{path.relative_to(REPO)}:{i.line} imports {i.target}; import from {face(i.target)}")
    assert not broken, "\n".join(broken)


def test_the_store_face_offers_only_what_other_stages_import() -> None:
    """The store's face is its API to the stages above it (users reach the store through
    ``dataidx``'s own face): a name no other stage imports stays with the module that defines it,
    where tests and scripts import it."""
    used = {name for i in OURS if i.target == "dataidx.store" and unit(i.source) != "store" for name in i.names}
    offered = set(lazy_map(ast.parse((PACKAGE / "store" / "__init__.py").read_text())))
    assert sorted(offered - used) == [], "names of dataidx.store that no other stage imports"
    assert len(offered) <= STORE_FACE_NAMES, f"the store's face offers {len(offered)} names: {sorted(offered)}"


def test_no_import_cycles() -> None:
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for i in OURS:
        if i.target in graph and i.target != i.source:
            graph[i.source].add(i.target)
    for module, path in MODULES.items():
        graph[module].update(target for target in lazy_targets(path, module) if target in graph)
    cycles = [sorted(component) for component in strongly_connected(graph) if len(component) > 1]
    assert not cycles, f"import cycles: {cycles}"


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's components of ``graph``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[set[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                connect(successor)
                low[node] = min(low[node], low[successor])
            elif successor in stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            components.append(component)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return components


#: The store's nouns: each a package of ``store/`` whose object reads and writes one stored thing.
NOUNS = ("base", "mixtures", "specs", "plans", "orders", "media")


def noun_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[1] == "store" and parts[2] in NOUNS else None


def test_dataidx_is_imported_inside_functions_only_by_cli_commands() -> None:
    """Also a noun's write method may import its own package's bulk writer, with a comment: the
    noun's object is on the read path, which loads neither SQLAlchemy nor NumPy."""
    broken = [f"{i.source}:{i.line} imports {i.target} inside {i.in_function}()"
              for i in OURS if i.in_function is not None and unit(i.source) != "cli"
              and not (noun_of(i.source) is not None and noun_of(i.source) == noun_of(i.target) and i.commented)]
    assert not broken, "\n".join(broken)


def test_third_party_imports_inside_functions_say_why() -> None:
    """Heavy or optional packages may load when first needed, with the reason next to them;
    the standard library always loads at the top."""
    by_function: dict[tuple[str, str], list[Import]] = {}
    for i in IMPORTS:
        if i.in_function is not None and not i.target.startswith("dataidx"):
            by_function.setdefault((i.source, i.in_function), []).append(i)
    broken = []
    for (source, function), found in by_function.items():
        standard = [i.target for i in found if i.target.split(".")[0] in sys.stdlib_module_names]
        if standard and unit(source) != "cli":
            broken.append(f"{source}.{function}() imports the standard library's {standard} inside a function")
        third_party = [i for i in found if i.target.split(".")[0] not in sys.stdlib_module_names]
        if third_party and not third_party[0].commented:
            broken.append(f"{source}:{third_party[0].line} imports {third_party[0].target} in {function}() "
                          "without a comment saying why not at the top")
    assert not broken, "\n".join(broken)


def test_heavy_packages_have_one_owner() -> None:
    def owned(source: str, owners: set[str]) -> bool:
        return any(source == f"dataidx.{owner}" or source.startswith(f"dataidx.{owner}.") for owner in owners)

    broken = [f"{i.source}:{i.line} imports {i.target}; only {sorted(OWNERS[top])} may"
              for i in IMPORTS if (top := i.target.split(".")[0]) in OWNERS and not owned(i.source, OWNERS[top])]
    assert not broken, "\n".join(broken)


def test_only_connect_write_and_query_choose_a_backend() -> None:
    broken = [f"{i.source}:{i.line} imports {i.target}"
              for i in OURS
              if i.target.startswith("dataidx.store.postgres") and not i.source.startswith("dataidx.store.postgres")
              and i.source not in BACKEND_CHOOSERS]
    broken += [f"{i.source}:{i.line} imports {i.target}: store.sqlite never imports store.postgres"
               for i in OURS
               if i.source.startswith("dataidx.store.sqlite") and i.target.startswith("dataidx.store.postgres")]
    assert not broken, "\n".join(broken)


def test_a_name_means_one_thing() -> None:
    """No dataidx name is imported under another (``publish as publish_postgres``)."""
    broken = [f"{i.source}:{i.line} imports {i.names} from {i.target} under another name" for i in OURS if i.aliased]
    assert not broken, "\n".join(broken)


def test_modules_stay_small() -> None:
    big = {module: n for module, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines: {big}"


def test_no_face_offers_a_name_that_is_also_one_of_its_modules() -> None:
    """Importing ``package.name`` as a module would otherwise replace the face's ``name``."""
    clashes = [f"{package}.{name}" for package in MODULES if is_package(package)
               for name in face_names(package) if f"{package}.{name}" in MODULES and name not in ROOT_MODULES]
    assert not clashes, clashes


@pytest.mark.parametrize("package", sorted(module for module in MODULES if is_package(module)))
def test_every_name_a_face_offers_resolves(package: str) -> None:
    face = importlib.import_module(package)
    missing = [name for name in getattr(face, "__all__", []) if not hasattr(face, name)]
    assert not missing, f"{package}.__all__ names what it does not have: {missing}"


def lazy_map(tree: ast.Module) -> dict[str, str]:
    """A face's ``lazy_face`` map: name -> the module, relative to the face, that defines it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy_face":
            mapping = node.args[1]
            if isinstance(mapping, ast.Name):  # the root face names its map
                mapping = next(n.value for n in ast.walk(tree)
                               if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == mapping.id)
            return dict(ast.literal_eval(mapping))
    return {}


def type_checking_imports(tree: ast.Module) -> dict[str, str]:
    """Names a face imports under ``if TYPE_CHECKING:``, each with the module it names."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for child in node.body:
                if isinstance(child, ast.ImportFrom):
                    found.update({alias.asname or alias.name: "." * child.level + (child.module or "")
                                  for alias in child.names})
    return found


@pytest.mark.parametrize("package", sorted(module for module in MODULES if is_package(module)))
def test_a_lazy_face_shows_type_checkers_and_dir_the_names_it_maps(package: str) -> None:
    """Type checkers and editors read the ``TYPE_CHECKING`` imports, the face serves the lazy map:
    the two name the same things in the same modules, and ``dir()`` lists them before any is used."""
    tree = ast.parse((PACKAGE.parent / package.replace(".", "/") / "__init__.py").read_text())
    mapped = lazy_map(tree)
    if not mapped:
        return
    assert type_checking_imports(tree) == mapped, f"{package}: its TYPE_CHECKING imports differ from its lazy map"
    assert set(mapped) <= set(dir(importlib.import_module(package)))


#: Where SQL (written in capitals, as every statement of the package is) names a table.
_NAMES_A_TABLE = r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+({})\b"


def base_tables() -> set[str]:
    """The store's tables (not its views): what only ``store/`` may name."""
    from dataidx.store.schema import Base

    return set(Base.metadata.tables)


def strings_of(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string constant of a module, and every f-string's literal text (``{}`` for its fields)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            found.append((node.lineno, "".join(part.value if isinstance(part, ast.Constant) else "{}"
                                               for part in node.values)))
    return found


def listed_tables(tree: ast.AST, tables: set[str]) -> list[tuple[int, str]]:
    """Table names listed as strings (a dict's keys, a tuple's items), two or more together: a
    list of the store's tables, such as descriptions keyed by table, not a JSON key that shares
    a table's name (``info --json``'s ``render_specs``)."""
    found = []
    for node in ast.walk(tree):
        items = (node.keys if isinstance(node, ast.Dict)
                 else node.elts if isinstance(node, (ast.List, ast.Tuple, ast.Set)) else [])
        named = [(item.lineno, item.value) for item in items
                 if isinstance(item, ast.Constant) and isinstance(item.value, str) and item.value in tables]
        if len(named) >= 2:
            found += named
    return found


def base_table_names(path: Path, tables: set[str]) -> list[str]:
    """``line: table`` for each string of ``path`` that names a base table: SQL that reads or
    writes it, or a list of table names."""
    tree = ast.parse(path.read_text())
    sql = re.compile(_NAMES_A_TABLE.format("|".join(sorted(tables))))
    found = [f"{line}: {table}" for line, text in strings_of(tree) for table in sorted(set(sql.findall(text)))]
    return found + [f"{line}: {table}" for line, table in listed_tables(tree, tables)]


def test_no_string_outside_the_store_names_a_base_table() -> None:
    """A stored thing is read and written by its noun in ``store/`` alone; the stages, the report
    and users read the documented views (``entries``, ``composition``, ``pack_members``, ...)."""
    tables = base_tables()
    found = [f"{module}:{name}" for module, path in MODULES.items() if unit(module) != "store"
             for name in base_table_names(path, tables)]
    assert not found, "base tables named outside dataidx.store (read them through its nouns):\n" + "\n".join(found)
