"""No code in ``espnet_ext`` changes ESPnet (or typeguard, whose decorator ESPnet uses) at run time, except the
one registration function, ``espnet_ext.registry.install`` (issue 36 §1).

An AST scan flags, per function:
- assignments / ``del`` / augmented assignments to attributes or items of anything reached from an ESPnet or
  typeguard import, from ``sys.modules`` or ``importlib.import_module`` (directly or through local names and
  ``getattr``), and mutating calls on such tables (``.setdefault``, ``.update``, ...);
- ``setattr`` / ``delattr`` on such objects or on a class passed in (a parameter named ``*cls``/``*_class``);
- replacing a dunder method (``X.__init__ = ...``) of anything but ``self`` (``obj.__class__ = ...``, which
  switches one built object as ESPnet's inference does for its beam search, is not a patch of a class);
- writing into a ``ClassChoices`` table (``x.classes[key] = ...``) and touching ``sys.meta_path`` (import hooks).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "espnet_ext"
FOREIGN = ("espnet", "espnet2", "typeguard")
MUTATORS = {"setdefault", "update", "append", "insert", "extend", "pop", "clear", "__setitem__"}
# The one function allowed to change ESPnet: it registers our classes and switches typeguard off.
REGISTRATION = ("espnet_ext/registry.py", "install")


def _root(node: ast.AST) -> ast.AST:
    """The innermost object of ``a.b[c].d`` / ``getattr(a, ...)`` (here: ``a``)."""
    while True:
        if isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and node.args
        ):
            node = node.args[0]
        else:
            return node


def _is_sys_modules(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "modules" and _name(node.value) == "sys"


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


class _Scanner(ast.NodeVisitor):
    """Collects (function, line, what) for one module; ``function`` is the outermost enclosing def."""

    def __init__(self):
        self.findings: list[tuple[str, int, str]] = []
        self.tainted: list[set[str]] = [set()]  # names bound to foreign objects, per scope
        self.params: list[set[str]] = [set()]
        self.function: str | None = None

    # scopes -----------------------------------------------------------------------------------------
    def visit_FunctionDef(self, node):
        outer = self.function
        self.function = outer or node.name
        self.tainted.append(set(self.tainted[-1]))
        args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        self.params.append({a.arg for a in args})
        self.generic_visit(node)
        self.tainted.pop()
        self.params.pop()
        self.function = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    # what is foreign ----------------------------------------------------------------------------------
    def visit_Import(self, node):
        for alias in node.names:
            if alias.name.split(".")[0] in FOREIGN:
                self.tainted[-1].add((alias.asname or alias.name).split(".")[0])

    def visit_ImportFrom(self, node):
        if node.level == 0 and node.module and node.module.split(".")[0] in FOREIGN:
            for alias in node.names:
                self.tainted[-1].add(alias.asname or alias.name)

    def _foreign(self, node: ast.AST) -> bool:
        root = _root(node)
        if _is_sys_modules(root):
            return True
        if (
            isinstance(root, ast.Call)
            and isinstance(root.func, ast.Attribute)
            and root.func.attr == "import_module"
        ):
            return True
        return _name(root) in self.tainted[-1]

    def _report(self, node: ast.AST, what: str) -> None:
        self.findings.append((self.function or "<module>", node.lineno, what))

    # writes -------------------------------------------------------------------------------------------
    def _check_target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._check_target(element, node)
            return
        if not isinstance(target, ast.Attribute | ast.Subscript):
            return
        text = ast.unparse(target)
        if self._foreign(target.value):
            self._report(node, f"assigns {text}")
        elif (
            isinstance(target, ast.Attribute)
            and target.attr.startswith("__")
            and target.attr.endswith("__")
            and target.attr
            != "__class__"  # one built object switched, ESPnet's own idiom for beam search
            and _name(target.value) != "self"
        ):
            self._report(node, f"replaces {text}")
        elif (
            isinstance(target, ast.Subscript)
            and isinstance(target.value, ast.Attribute)
            and target.value.attr == "classes"
        ):
            self._report(node, f"writes a ClassChoices table: {text}")
        elif "sys.meta_path" in text:
            self._report(node, f"assigns {text}")

    def visit_Assign(self, node):
        for target in node.targets:
            self._check_target(target, node)
            if isinstance(target, ast.Name) and self._foreign(node.value):
                self.tainted[-1].add(target.id)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node):
        for target in node.targets:
            self._check_target(target, node)
        self.generic_visit(node)

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and node.args:
            obj = node.args[0]
            name = _name(obj) or ""
            passed_class = name in self.params[-1] and (
                name.endswith("cls") or name.endswith("_class")
            )
            if self._foreign(obj) or passed_class:
                self._report(node, f"{func.id}({ast.unparse(obj)}, ...)")
        elif isinstance(func, ast.Attribute) and func.attr in MUTATORS:
            receiver = ast.unparse(func.value)
            if (
                isinstance(func.value, ast.Attribute | ast.Subscript) and self._foreign(func.value)
            ) or receiver == "sys.meta_path":
                self._report(node, f"mutates {receiver}")
        self.generic_visit(node)


def scan_source(source: str) -> list[tuple[str, int, str]]:
    scanner = _Scanner()
    scanner.visit(ast.parse(source))
    return scanner.findings


def scan_package() -> dict[tuple[str, str], list[str]]:
    """{(path relative to the repo, function): [line: what, ...]} for the whole package."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for function, line, what in scan_source(path.read_text(encoding="utf-8")):
            found.setdefault((relative, function), []).append(f"{line}: {what}")
    return found


def test_nothing_but_the_registration_function_changes_espnet():
    found = scan_package()
    unexpected = {where: lines for where, lines in found.items() if where != REGISTRATION}
    assert not unexpected, (
        "runtime patches of ESPnet outside espnet_ext.registry.install:\n"
        + "\n".join(
            f"{path} {function}: {'; '.join(lines)}"
            for (path, function), lines in unexpected.items()
        )
    )


def test_the_scan_sees_the_registration_writes():
    found = scan_package()
    assert any("choices.classes[key]" in line for line in found[REGISTRATION])
    assert any("typeguard.typechecked" in line for line in found[REGISTRATION])


@pytest.mark.parametrize(
    "source",
    [
        "import typeguard\ntypeguard.typechecked = None\n",
        "from espnet2.train import dataset\ndef f():\n    dataset.DATA_TYPES.setdefault('x', 1)\n",
        "from espnet2.tasks import st\ndef f():\n    task = st.STTask\n    task.build_model = classmethod(g)\n",
        "from espnet2.tasks import st\ndef f(g):\n    old, st.ESPnetSTModel = st.ESPnetSTModel, g\n",
        "import sys\ndef f(name):\n    p = getattr(sys.modules[name], 'Speech2Text')\n    p.__call__ = g\n",
        "def f(inference_cls):\n    inference_cls.__init__ = g\n",
        "def f(task_cls):\n    setattr(task_cls, 'build_model_from_file', g)\n",
        "import importlib\ndef f():\n    m = importlib.import_module('espnet2.tasks.asr')\n    m.x = 1\n",
        "def f(choices, cls):\n    choices.classes['k'] = cls\n",
        "import sys\nsys.meta_path.insert(0, Finder())\n",
    ],
)
def test_the_scan_finds_each_kind_of_patch(source):
    assert scan_source(source)


@pytest.mark.parametrize(
    "source",
    [
        "def f(args):\n    args.model = 'x'\n    setattr(args, 'y', 1)\n",
        "class A:\n    def __init__(self):\n        self.__dict__ = {}\n",
        "from espnet2.tasks.asr import ASRTask\nclass T(ASRTask):\n    num_optimizers = 1\n",
        "def f(model, matched):\n    for m in model.modules():\n        m.matched_inference = matched\n",
        "from espnet2.tasks.asr import ASRTask\ndef f(a):\n    model, args = ASRTask.build_model_from_file(a)\n"
        "    model.x = 1\n",
    ],
)
def test_the_scan_leaves_ordinary_code_alone(source):
    assert not scan_source(source)
