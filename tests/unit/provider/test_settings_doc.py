"""docs/deployment.md's settings table lists every setting the provider reads, and nothing else.

The names come from the provider's source: every string literal that is a whole ``KAI_SCALE_*`` name,
less the renamed settings that ``kai_scale.settings`` refuses. A default is checked where the code
gives it as a string (a literal, or a module constant, followed into the model it imports from,
kai_scale_model): as ``os.environ.get(name, default)``, as
``<read of name> or default``, directly, through a variable, or through a helper that takes the name
as its first parameter. The table writes such a default as the value alone in backticks; other
defaults (unset, or computed) are written in words.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import REPO

SOURCE = REPO / "packages/provider/src"
MODEL_SOURCE = REPO / "packages/model/src"
DOC = REPO / "docs/deployment.md"
SETTING = re.compile(r"KAI_SCALE_[A-Z_]+")
ROW = re.compile(r"^\|\s*`(KAI_SCALE_[A-Z_]+)`\s*\|\s*([^|]*?)\s*\|")
LITERAL_CELL = re.compile(r"`([^`]*)`")


def _modules(source: Path = SOURCE) -> dict[str, ast.Module]:
    """Every module under ``source`` (the provider's, by default), by its dotted name."""
    modules = {}
    for path in sorted(source.rglob("*.py")):
        name = ".".join(path.relative_to(source).with_suffix("").parts).removesuffix(".__init__")
        modules[name] = ast.parse(path.read_text(), filename=str(path))
    return modules


class _Constants:
    """Module-level string constants, followed through ``from kai_scale... import`` lines.

    Over the provider's modules and the model's, whose constants the provider imports.
    """

    def __init__(self, modules: dict[str, ast.Module]) -> None:
        modules = {**_modules(MODEL_SOURCE), **modules}
        self._own = {name: self._assigned(tree) for name, tree in modules.items()}
        self._aliases = {name: self._aliased(tree) for name, tree in modules.items()}
        self._imports = {name: self._imported(tree) for name, tree in modules.items()}

    @staticmethod
    def _assigned(tree: ast.Module) -> dict[str, str]:
        values = {}
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        values[target.id] = node.value.value
        return values

    @staticmethod
    def _aliased(tree: ast.Module) -> dict[str, ast.expr]:
        """Module-level names given another name's value, e.g. ``DEFAULT = other_module.CONSTANT``."""
        return {
            target.id: node.value
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name | ast.Attribute)
            for target in node.targets
            if isinstance(target, ast.Name)
        }

    def _constant(self, module: str, name: str) -> str | None:
        if name in self._own.get(module, {}):
            return self._own[module][name]
        alias = self._aliases.get(module, {}).get(name)
        return self.resolve(module, alias) if alias is not None else None

    @staticmethod
    def _imported(tree: ast.Module) -> dict[str, str]:
        """Local name -> dotted name of the module, or of the module's constant, it stands for."""
        names = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kai_scale"):
                for alias in node.names:
                    dotted = f"{node.module}.{alias.name}"
                    names[alias.asname or alias.name] = dotted
        return names

    def resolve(self, module: str, node: ast.expr) -> str | None:
        """The string an expression of ``module`` stands for, when it is a literal or a constant."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            own = self._constant(module, node.id)
            if own is not None:
                return own
            dotted = self._imports[module].get(node.id)
            if dotted is not None:
                source, _, constant = dotted.rpartition(".")
                return self._constant(source, constant)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            imported = self._imports[module].get(node.value.id)
            if imported is not None:
                return self._constant(imported, node.attr)
        return None


def _setting(constants: _Constants, module: str, node: ast.expr) -> str | None:
    value = constants.resolve(module, node)
    return value if value is not None and SETTING.fullmatch(value) else None


def _read_name(constants: _Constants, module: str, node: ast.expr) -> str | None:
    """The setting a call such as ``os.environ.get(NAME)`` or ``_optional(NAME)`` reads, if any."""
    if isinstance(node, ast.Call) and node.args:
        return _setting(constants, module, node.args[0])
    return None


def _functions(tree: ast.Module) -> Iterator[ast.FunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            yield node


def _is_or(node: ast.AST) -> bool:
    return isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or)


def _helpers(modules: dict[str, ast.Module]) -> dict[tuple[str, str], ast.expr]:
    """Functions that read the setting their first parameter names, ``read(name) or default``."""
    helpers: dict[tuple[str, str], ast.expr] = {}
    for module, tree in modules.items():
        for function in _functions(tree):
            parameters = [argument.arg for argument in function.args.args]
            for node in ast.walk(function):
                if not (_is_or(node) and isinstance(node, ast.BoolOp)):
                    continue
                first = node.values[0]
                if (
                    isinstance(first, ast.Call)
                    and first.args
                    and isinstance(first.args[0], ast.Name)
                    and parameters[:1] == [first.args[0].id]
                ):
                    helpers[module, function.name] = node.values[-1]
    return helpers


def _defaults_given(modules: dict[str, ast.Module], constants: _Constants) -> Iterator[tuple[str, str]]:
    """(setting, default) for each way the code gives a setting a string default."""
    helpers = _helpers(modules)
    for module, tree in modules.items():
        for node in ast.walk(tree):
            name: str | None = None
            default: ast.expr | None = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and len(node.args) == 2:
                # os.environ.get(NAME, default)
                if node.func.attr in ("get", "getenv"):
                    name, default = _read_name(constants, module, node), node.args[1]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
                # helper(NAME, ...)
                default = helpers.get((module, node.func.id))
                name = _setting(constants, module, node.args[0]) if default is not None else None
            elif _is_or(node) and isinstance(node, ast.BoolOp):
                # read(NAME) or default
                name, default = _read_name(constants, module, node.values[0]), node.values[-1]
            yield from _resolved(constants, module, name, default)
        for function in _functions(tree):
            # value = read(NAME) ... value or default, in one function
            variables = {
                target.id: _read_name(constants, module, node.value)
                for node in ast.walk(function)
                if isinstance(node, ast.Assign)
                for target in node.targets
                if isinstance(target, ast.Name)
            }
            for node in ast.walk(function):
                if _is_or(node) and isinstance(node, ast.BoolOp) and isinstance(node.values[0], ast.Name):
                    yield from _resolved(constants, module, variables.get(node.values[0].id), node.values[-1])


def _resolved(
    constants: _Constants, module: str, name: str | None, default: ast.expr | None
) -> Iterator[tuple[str, str]]:
    value = constants.resolve(module, default) if name is not None and default is not None else None
    # An empty default reads as unset; a computed one is not a literal to compare.
    if name is not None and value:
        yield name, value


def _string_defaults(modules: dict[str, ast.Module]) -> dict[str, str]:
    """Each setting whose default the code gives as a string, with that default."""
    return dict(_defaults_given(modules, _Constants(modules)))


def _renamed(modules: dict[str, ast.Module]) -> set[str]:
    """The old names ``kai_scale.settings`` refuses (its ``_RENAMED`` mapping's keys)."""
    for node in modules["kai_scale.settings"].body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(target, ast.Name) and target.id == "_RENAMED" for target in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            return {
                key.value
                for key in node.value.keys
                if isinstance(key, ast.Constant) and isinstance(key.value, str)
            }
    raise AssertionError("kai_scale.settings no longer has _RENAMED: update this test's reading of it")


def _settings_read(modules: dict[str, ast.Module]) -> set[str]:
    names = {
        node.value
        for tree in modules.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SETTING.fullmatch(node.value)
    }
    return names - _renamed(modules)


def _table(doc: Path) -> dict[str, str]:
    """The settings table of the doc's "Settings" section: name -> its default cell."""
    section = doc.read_text().split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        match = ROW.match(line)
        if match:
            name, default = match.groups()
            assert name not in rows, f"{doc.name}: {name} has two rows"
            rows[name] = default
    return rows


def test_the_table_lists_every_setting_the_provider_reads_and_nothing_else() -> None:
    read = _settings_read(_modules())
    listed = set(_table(DOC))
    assert read, "found no KAI_SCALE_* names in the provider: has the source moved?"
    assert not read - listed, f"settings the code reads but {DOC.name} does not list: {sorted(read - listed)}"
    assert not listed - read, f"settings {DOC.name} lists but the code does not read: {sorted(listed - read)}"


def test_the_defaults_in_the_table_are_the_code_s() -> None:
    defaults = _string_defaults(_modules())
    table = _table(DOC)
    # The scan must still see how settings.py reads its variables, or this test checks nothing.
    assert {"KAI_SCALE_RESULTS_BUCKET", "KAI_SCALE_SCHEDULE", "KAI_SCALE_KAI_TUNING_PROFILE"} <= set(defaults)
    for name, cell in table.items():
        literal = LITERAL_CELL.fullmatch(cell)
        if name in defaults:
            expected = f"`{defaults[name]}`"
            assert cell == expected, f"{name}: the code's default is {expected}, the table says {cell!r}"
        else:
            assert literal is None, (
                f"{name}: the table gives the default {cell}; the code has no such literal"
            )


def test_the_renamed_settings_are_named_as_refused() -> None:
    text = DOC.read_text()
    for old in sorted(_renamed(_modules())):
        assert f"`{old}`" in text, f"{DOC.name} should say that {old} is refused, naming the new setting"
