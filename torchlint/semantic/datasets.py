"""Where a loader's samples come from: a dataset already in memory (tensors, lists of ready samples), a
Hugging Face dataset tokenized ahead of time, or one built on a device. Loading such data costs little, so
worker processes and pinning gain little.
"""

from __future__ import annotations

import re
from typing import Optional, TypeVar

import libcst as cst

from torchlint.lint.calls import argument, keyword
from torchlint.lint.context import Context
from torchlint.lint.names import last_name
from torchlint.lint.walk import descendants
from torchlint.semantic import project
from torchlint.semantic.call_arguments import passed_for
from torchlint.semantic.functions import method_named, returns_of
from torchlint.semantic.list_appends import appended
from torchlint.semantic.loader_calls import element_at, is_builtin, is_dataloader
from torchlint.semantic.loader_copies import SAME_TENSOR, is_transfer
from torchlint.semantic.loaders import flow

_COLLATE_AT = 6
_Definition = TypeVar("_Definition", cst.ClassDef, cst.FunctionDef)

TENSOR_FACTORIES = frozenset(
    {
        "tensor", "as_tensor", "from_numpy", "randn", "rand", "randint", "zeros", "ones", "arange", "stack", "cat",
        "linspace", "load", "array", "asarray", "concatenate",
    }
)


def in_memory_loader(context: Context, call: cst.Call) -> bool:
    """A DataLoader over data already in memory as tensors (or a list), batched by the default collate or
    one that only pads and stacks."""
    collate = argument(call, "collate_fn", position=_COLLATE_AT)
    if collate is not None and not (isinstance(collate.value, cst.Name) and collate.value.value == "None"):
        if not _light_collate(context, collate.value):
            return False
    dataset = argument(call, "dataset", position=0)
    return dataset is not None and _in_memory_dataset(context, dataset.value, 0)


def _in_memory_dataset(context: Context, expr: Optional[cst.BaseExpression], depth: int) -> bool:
    if expr is None or depth > 5:
        return False
    if isinstance(expr, (cst.List, cst.ListComp, cst.Tuple)):
        return True
    if isinstance(expr, cst.Subscript):
        items = _list_items(context, expr)
        if items is not None:  # `datasets[0]` of a list of datasets: that element
            return bool(items) and all(_in_memory_dataset(context, v, depth + 1) for v in items)
        return _in_memory_dataset(context, expr.value, depth + 1)  # `data[:n_train]` of a tensor or list
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Multiply)):
        # `[item] * 100`, `train_items + extra_items`
        return isinstance(expr.left, (cst.List, cst.ListComp)) or isinstance(expr.right, (cst.List, cst.ListComp))
    if isinstance(expr, cst.Call):
        name = context.qualname(expr) or ""
        if name == "torch.utils.data.TensorDataset":
            return True
        if name == "torch.utils.data.Subset" and expr.args:
            return _in_memory_dataset(context, expr.args[0].value, depth + 1)
        if name.startswith(("torch.", "numpy.")) and name.rsplit(".", 1)[-1] in TENSOR_FACTORIES:
            return True
        if is_builtin(context, expr.func, "list") or is_builtin(context, expr.func, "tuple"):
            return len(expr.args) == 1 and _in_memory_items(context, expr.args[0].value, depth)
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("clone", "float", "long", "to", "cuda"):
            return _in_memory_dataset(context, expr.func.value, depth + 1)  # a tensor, converted
        if isinstance(expr.func, cst.Name):
            bindings = context.lookup(expr.func)
            if bindings and len(bindings) == 1 and isinstance(bindings[0].node, cst.ClassDef):
                return indexes_memory(bindings[0].node)
        from_project = project.imported(context, expr.func)  # a Dataset class of another project file
        if from_project is not None and isinstance(from_project[0].definition(from_project[1]), cst.ClassDef):
            found_class = from_project[0].class_summary(from_project[1])
            return found_class is not None and found_class.in_memory_dataset
        # `train_data = get_data(root)` where get_data (of this file or another) builds and returns a list of
        # ready samples or a TensorDataset
        values = _returned(context, expr, None)
        return bool(values) and all(_in_memory_dataset(there, v, depth + 1) for there, v in values)
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        # `self.train_set = TensorDataset(x, y)` in a method of the class
        cls = context.enclosing(expr, cst.ClassDef)
        assigned = flow(context).self_assigns.get((id(cls), expr.attr.value), []) if cls is not None else []
        return bool(assigned) and all(_in_memory_dataset(context, v, depth + 1) for v in assigned)
    if isinstance(expr, cst.Attribute):
        found = project.imported(context, expr)  # `data.train_set` of `import data`
        values = _module_value(*found) if found is not None else []
        return bool(values) and all(_in_memory_dataset(there, v, depth + 1) for there, v in values)
    if isinstance(expr, cst.Name):
        bindings = context.lookup(expr)
        if not bindings or len(bindings) > 2:
            return False
        # `test_ds = None` on a path without a test set builds no loader from it; in `imgs = imgs[:n]` the `imgs`
        # read is the earlier binding, not this one
        within = set(map(id, context.ancestors(expr)))
        present = [b for b in bindings if not (b.kind == "assign" and _is_none(b.value)) and id(b.node) not in within]
        return bool(present) and all(_binding_in_memory(context, b, expr.value, depth) for b in present)
    return False


def _list_items(context: Context, expr: cst.Subscript) -> Optional[list[cst.BaseExpression]]:
    """`sets[0]` where `sets` is bound only to list displays: what any element may be (the displays' items and
    what `sets.append(...)` adds in its scope); None for a slice or another container."""
    index = expr.slice[0].slice if len(expr.slice) == 1 else None
    if not isinstance(index, cst.Index) or not isinstance(expr.value, cst.Name):
        return None
    bindings = context.lookup(expr.value)
    if not bindings or not all(b.kind == "assign" and isinstance(b.value, cst.List) for b in bindings):
        return None
    return [e.value for b in bindings for e in b.value.elements] + appended(context, expr.value)  # type: ignore[union-attr]


def _is_none(expr: Optional[cst.BaseExpression]) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _binding_in_memory(context: Context, binding, name: str, depth: int) -> bool:  # noqa: ANN001
    if binding.kind == "assign" and binding.value is not None:
        return _in_memory_dataset(context, binding.value, depth + 1)
    if binding.kind in ("param", "import"):
        # `def make_loader(dataset)` called with in-memory data; `from data import train_set` built in memory
        if binding.kind == "param":
            values = _passed_everywhere(context, binding.node, depth)
        else:
            values = _imported_value(context, name)
        return bool(values) and all(_in_memory_dataset(there, value, depth + 1) for there, value in values)
    node = binding.node
    if isinstance(node, cst.AugAssign):  # `imgs += [...]`: adds to what the name's other bindings hold
        return _in_memory_dataset(context, node.value, depth + 1)
    paired = _paired_value(node, name)
    if paired is not None:
        # `train_set, valid_set = LibriDataset(x_train, y_train), LibriDataset(x_valid, y_valid)`
        return _in_memory_dataset(context, paired, depth + 1)
    if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
        # `train_ds, val_ds = random_split(TensorDataset(x, y), [0.8, 0.2])`
        if context.qualname(node.value) == "torch.utils.data.random_split" and node.value.args:
            return _in_memory_dataset(context, node.value.args[0].value, depth + 1)
        # `train_ds, val_ds = make_datasets()`: element of what a function of this or another file returns
        values = _unpacked_returns(context, node, name)
        if values:
            return all(_in_memory_dataset(there, v, depth + 1) for there, v in values)
        # `train_ds, dev_ds, vocab = TextDataset.splits(root)`: a classmethod building instances of its class
        return _split_by_classmethod(context, node, name)
    return False


def _paired_value(node: cst.CSTNode, name: str) -> Optional[cst.BaseExpression]:
    """`a, b = x, y`: the value bound to `name` (None for any other statement)."""
    if not (isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.value, (cst.Tuple, cst.List))):
        return None
    target = node.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != len(node.value.elements):
        return None
    if any(isinstance(e, cst.StarredElement) for e in [*target.elements, *node.value.elements]):
        return None
    for element, value in zip(target.elements, node.value.elements):
        if isinstance(element.value, cst.Name) and element.value.value == name:
            return value.value
    return None


def _returned(
    context: Context, call: cst.Call, element: Optional[tuple[int, int]]
) -> list[tuple[Context, cst.BaseExpression]]:
    """What a call of a function of this file or of another project file returns (with `element`
    (index, size): that element of a returned tuple of that size), with the file each value is in; empty
    when any return is not understood."""
    function = flow(context).function_called(call)
    there = context
    if function is None:
        found = project.imported(context, call.func)
        node = found[0].definition(found[1]) if found is not None else None
        if not isinstance(node, cst.FunctionDef):
            return []
        function, there = node, found[0].context  # type: ignore[index]
    values: list[tuple[Context, cst.BaseExpression]] = []
    for ret in returns_of(function):
        value = ret.value
        if value is None:
            return []
        if element is not None:
            if isinstance(value, cst.Name):
                value = there.assigned_value(value) or value
            if not isinstance(value, (cst.Tuple, cst.List)):
                return []
            value = element_at(value, *element)
            if value is None:
                return []
        values.append((there, value))
    return values


def _unpacked_returns(context: Context, assign: cst.Assign, name: str) -> list[tuple[Context, cst.BaseExpression]]:
    target = assign.targets[0].target if len(assign.targets) == 1 else None
    if not isinstance(target, (cst.Tuple, cst.List)) or not isinstance(assign.value, cst.Call):
        return []
    if any(isinstance(e, cst.StarredElement) for e in target.elements):
        return []
    index = next((i for i, e in enumerate(target.elements) if isinstance(e.value, cst.Name) and e.value.value == name), None)
    if index is None:
        return []
    return _returned(context, assign.value, (index, len(target.elements)))


def _passed_everywhere(context: Context, param: cst.CSTNode, depth: int) -> list[tuple[Context, cst.BaseExpression]]:
    """What every call of the function passes for `param` (here and in the files importing it), with the file of
    each value; nothing past a few hops of parameters passed on."""
    return passed_for(context, param, every=True) if depth <= 3 else []  # type: ignore[arg-type]


def _imported_value(context: Context, name: str) -> list[tuple[Context, cst.BaseExpression]]:
    """`from data import train_set`: the value the project module binds `train_set` to, once, at top level."""
    found = project.imported(context, cst.Name(name))
    return _module_value(*found) if found is not None else []


def _module_value(module: project.ModuleSummary, there: str) -> list[tuple[Context, cst.BaseExpression]]:
    """The value a project module binds `there` to, once, at top level."""
    values = [
        statement.body[0].value
        for statement in module.context.module.body
        if isinstance(statement, cst.SimpleStatementLine)
        and isinstance(statement.body[0], cst.Assign)
        and any(isinstance(t.target, cst.Name) and t.target.value == there for t in statement.body[0].targets)
    ]
    return [(module.context, values[0])] if len(values) == 1 else []


def _split_by_classmethod(context: Context, assign: cst.Assign, name: str) -> bool:
    call = assign.value
    target = assign.targets[0].target if len(assign.targets) == 1 else None
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and isinstance(target, cst.Tuple)):
        return False
    index = next((i for i, e in enumerate(target.elements) if isinstance(e.value, cst.Name) and e.value.value == name), None)
    if index is None or any(isinstance(e, cst.StarredElement) for e in target.elements):
        return False
    cls = _definition_of(context, call.func.value, cst.ClassDef)
    method = method_named(cls, call.func.attr.value) if cls is not None else None
    if method is None or not indexes_memory(cls) or not any(last_name(d.decorator) == "classmethod" for d in method.decorators):
        return False
    returns = [r.value for r in returns_of(method)]
    if not returns or not all(isinstance(r, cst.Tuple) and len(r.elements) == len(target.elements) for r in returns):
        return False
    built = {
        t.target.value
        for n in descendants(method)
        if isinstance(n, cst.Assign) and isinstance(n.value, cst.Call) and _names_class(n.value.func, cls)
        for t in n.targets
        if isinstance(t.target, cst.Name)
    }
    for ret in returns:
        value = ret.elements[index].value  # type: ignore[union-attr]
        if not ((isinstance(value, cst.Name) and value.value in built) or (isinstance(value, cst.Call) and _names_class(value.func, cls))):
            return False
    return True


def _names_class(func: cst.BaseExpression, cls: cst.ClassDef) -> bool:
    return isinstance(func, cst.Name) and func.value in ("cls", cls.name.value)


def _definition_of(context: Context, expr: cst.BaseExpression, kind: type[_Definition]) -> Optional[_Definition]:
    """The class or function definition (`kind`) a name refers to: in this file, or in a project module it
    imports."""
    if isinstance(expr, cst.Name):
        bindings = context.lookup(expr)
        if bindings and len(bindings) == 1 and isinstance(bindings[0].node, kind):
            return bindings[0].node
    found = project.imported(context, expr)
    node = found[0].definition(found[1]) if found is not None else None
    return node if isinstance(node, kind) else None


def _light_collate(context: Context, expr: cst.BaseExpression) -> bool:
    """`collate_fn=pad_batch` where the function only pads and stacks the items (no decoding, no I/O); also
    `collate_fn = get_collate_fn(pad_index)` where that function of this file returns such a function."""
    function = _definition_of(context, expr, cst.FunctionDef) or _made_function(context, expr)
    if function is None:
        return False
    return all(
        not isinstance(node, (cst.Call, cst.Yield, cst.Raise)) or (isinstance(node, cst.Call) and last_name(node.func) in _COLLATE_CALLS)
        for node in descendants(function.body)
    )


def _made_function(context: Context, expr: cst.BaseExpression) -> Optional[cst.FunctionDef]:
    """The function a factory of this file returns: `collate_fn` of `collate_fn = get_collate_fn(pad)`,
    where `get_collate_fn` defines `collate_fn` and returns it."""
    if isinstance(expr, cst.Name):
        expr = context.assigned_value(expr) or expr
    factory = flow(context).function_called(expr) if isinstance(expr, cst.Call) else None
    returns = list(returns_of(factory)) if factory is not None else []
    if len(returns) != 1 or not isinstance(returns[0].value, cst.Name):
        return None
    name = returns[0].value.value
    inner = [s for s in factory.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name]  # type: ignore[union-attr]
    return inner[0] if len(inner) == 1 else None


# Calls an in-memory item may make: conversions of what it already holds, no I/O, no decoding.
_ITEM_CONVERSIONS = frozenset(
    "from_numpy tensor as_tensor array asarray toarray todense float long int double half bool astype squeeze "
    "unsqueeze view reshape flatten copy clone FloatTensor LongTensor get".split()
)


# Calls a collate function may make and still only pad and stack what the items hold.
_COLLATE_CALLS = _ITEM_CONVERSIONS | frozenset(
    "zip max min len enumerate range list tuple sorted zeros ones full zeros_like stack cat pad_sequence size "
    "append".split()
)


def indexes_memory(cls: cst.ClassDef) -> bool:
    """A Dataset class whose `__getitem__` only indexes data it already holds.

    `x, y = self.x[index], self.y[index]; return x, y` or `return torch.from_numpy(self.x[index].toarray())`:
    the data was loaded in `__init__`, and an item costs an index and a conversion, nothing a worker process
    could take over. Any other call (opening a file, decoding an image, augmenting) disqualifies it.
    """
    getitem = method_named(cls, "__getitem__")
    if getitem is None or not isinstance(getitem.body, cst.IndentedBlock):
        return False
    statements = list(getitem.body.body)
    if statements and _is_docstring(statements[0]):
        statements = statements[1:]
    if not statements or not all(_plain_branches(s) for s in statements):
        return False
    indexed = False
    held: set[str] = set()  # locals that name data the dataset holds: `features = self.a if train else self.b`
    for statement in statements:
        for node in [statement, *descendants(statement)]:
            if isinstance(node, cst.Call) and last_name(node.func) not in _ITEM_CONVERSIONS:
                return False
            if isinstance(node, cst.Subscript) and _indexes_self(node, held):
                indexed = True
            if isinstance(node, (cst.Raise, cst.Yield, cst.Global)):
                return False
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                if _self_data(node.value):
                    held.add(node.targets[0].target.value)
    return indexed


def _plain_branches(statement: cst.CSTNode) -> bool:
    """A simple statement, or an `if` (with `elif`/`else`) made of them: `if self.labels is not None: return
    self.x[i], self.labels[i]`. Loops and `with` blocks are not followed (they may read files)."""
    if isinstance(statement, cst.SimpleStatementLine):
        return True
    if isinstance(statement, cst.If):
        return _plain_suite(statement.body) and (statement.orelse is None or _plain_branches(statement.orelse))
    return isinstance(statement, cst.Else) and _plain_suite(statement.body)


def _plain_suite(suite: cst.BaseSuite) -> bool:
    if isinstance(suite, cst.SimpleStatementSuite):
        return True  # `if flag: return self.x[i]` on one line
    return all(_plain_branches(s) for s in suite.body)


def _self_data(expr: cst.BaseExpression) -> bool:
    """`self.features`, or a choice between two such attributes."""
    if isinstance(expr, cst.IfExp):
        return _self_data(expr.body) and _self_data(expr.orelse)
    return isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"


def _indexes_self(expr: cst.BaseExpression, held: frozenset[str] | set[str] = frozenset()) -> bool:
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in SAME_TENSOR:
        expr = expr.func.value
    if not isinstance(expr, cst.Subscript):
        return False
    base = expr.value
    while isinstance(base, cst.Subscript):  # `features[idx][0]`
        base = base.value
    if isinstance(base, cst.Name):
        return base.value in held
    return isinstance(base, cst.Attribute) and isinstance(base.value, cst.Name) and base.value.value == "self"


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _in_memory_items(context: Context, expr: cst.BaseExpression, depth: int) -> bool:
    """`list(zip(x, y))` over tensors or lists."""
    if isinstance(expr, cst.Call) and is_builtin(context, expr.func, "zip"):
        return bool(expr.args) and all(_in_memory_dataset(context, a.value, depth + 1) for a in expr.args)
    return _in_memory_dataset(context, expr, depth + 1)


# Dataset methods that keep what a (prepared) `datasets.Dataset` holds: their result is prepared too.
_HF_KEEPS = frozenset(
    {"select", "shuffle", "filter", "remove_columns", "rename_column", "rename_columns", "select_columns", "sort",
     "shard", "flatten", "train_test_split"}
)

_HF_FORMATS = frozenset({"torch", "pt", "numpy", "np"})

_HF_MAP_KEYWORDS = ("fn_kwargs", "num_proc", "remove_columns", "with_indices", "load_from_cache_file")

# Signs that items are still decoded or transformed when read: a lazy transform, a stream, image, audio or
# video features (decoded on every access), or columns named after them.
_HF_LAZY = re.compile(
    r"streaming\s*=\s*True|set_transform|with_transform|cast_column|\b(Image|Audio|Video)\s*\(|"
    r"(image|audio|video)folder|pixel_values|input_values|[\"'](image|img|audio|video|pixels?)s?[\"']",
    re.IGNORECASE,
)


def prepared_hf_loader(context: Context, call: cst.Call) -> bool:
    """A DataLoader over a Hugging Face dataset tokenized ahead of time, batched by the default collate.

    `ds = ds.map(tokenize, batched=True)` runs the tokenizer once, eagerly, and stores the result in Arrow
    tables; with `set_format("torch")` / `with_format("torch")` an item is a row lookup turned into tensors,
    nothing a worker process could take over. Not when the file shows items that are still decoded or
    transformed when read (images, audio, `set_transform`, a streamed dataset).
    """
    collate = argument(call, "collate_fn", position=_COLLATE_AT)
    if collate is not None and not (isinstance(collate.value, cst.Name) and collate.value.value == "None"):
        if not _light_collate(context, collate.value):
            return False
    dataset = argument(call, "dataset", position=0)
    if dataset is None or _HF_LAZY.search(context.source.text):
        return False
    return _hf_prepared(context, dataset.value, 0)


def _hf_format(context: Context, call: cst.Call) -> bool:
    """`with_format("torch")`, `set_format(type="torch", columns=[...])`."""
    arg = argument(call, "type", position=0)
    return arg is not None and context.literal(arg.value) in _HF_FORMATS


def _hf_prepared(context: Context, expr: Optional[cst.BaseExpression], depth: int) -> bool:
    if expr is None or depth > 6:
        return False
    if isinstance(expr, cst.Subscript):
        return _hf_prepared(context, expr.value, depth + 1)  # `tokenized["train"]`
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute):
            attr = func.attr.value
            if attr == "map":
                # Hugging Face's own keywords say it is `datasets.Dataset.map`, which runs eagerly (a
                # DataPipe's or a streamed dataset's `.map(fn)` is lazy)
                batched = keyword(expr, "batched")
                return (batched is not None and context.literal(batched.value) is True) or any(
                    keyword(expr, name) is not None for name in _HF_MAP_KEYWORDS
                )
            if attr == "with_format":
                return _hf_format(context, expr) or _hf_prepared(context, func.value, depth + 1)
            if attr in _HF_KEEPS:
                return _hf_prepared(context, func.value, depth + 1)
        function = flow(context).function_called(expr)
        if function is not None:
            values = [r.value for r in returns_of(function)]
            return bool(values) and all(_hf_prepared(context, v, depth + 1) for v in values)
        return False
    if isinstance(expr, cst.Name):
        bindings = context.lookup(expr)
        if not bindings:
            return False
        found = False
        for binding in bindings:
            node = binding.node
            if binding.kind == "assign" and binding.value is not None:
                found = found or _hf_prepared(context, binding.value, depth + 1)
            elif isinstance(node, cst.Assign) and binding.kind == "other":
                value = _unpacked_value(context, node, expr.value)
                found = found or (value is not None and _hf_prepared(context, value, depth + 1))
            elif binding.kind == "param":
                # `def make_loader(dataset)`: every call passes a prepared dataset from a file without lazy columns
                values = _passed_everywhere(context, node, depth)
                if not values or not all(
                    not _HF_LAZY.search(there.source.text) and _hf_prepared(there, value, depth + 1) for there, value in values
                ):
                    return False
                found = True
            else:
                return False  # a loop variable, an import: not followed
        return found or _set_format_on(context, expr)
    return False


def _unpacked_value(context: Context, assign: cst.Assign, name: str) -> Optional[cst.BaseExpression]:
    """`a, b, c = prepare(...)` where `prepare` returns `x, y, z`: the expression bound to `name`."""
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, (cst.Tuple, cst.List)):
        return None
    target = assign.targets[0].target
    if any(isinstance(e, cst.StarredElement) for e in target.elements):
        return None
    index = next(
        (i for i, e in enumerate(target.elements) if isinstance(e.value, cst.Name) and e.value.value == name), None
    )
    if index is None or not isinstance(assign.value, cst.Call):
        return None
    function = flow(context).function_called(assign.value)
    returns = list(returns_of(function)) if function is not None else []
    if len(returns) != 1 or not isinstance(returns[0].value, (cst.Tuple, cst.List)):
        return None
    return element_at(returns[0].value, index, len(target.elements))


def _set_format_on(context: Context, name: cst.Name) -> bool:
    """`name.set_format("torch")` in the scope that binds `name`."""
    scope = context.enclosing(name, cst.FunctionDef) or context.module
    for use in flow(context)._uses(name.value):
        attribute = context.parent(use)
        if not (isinstance(attribute, cst.Attribute) and attribute.value is use and attribute.attr.value == "set_format"):
            continue
        call = context.parent(attribute)
        if isinstance(call, cst.Call) and call.func is attribute and _hf_format(context, call):
            if (context.enclosing(call, cst.FunctionDef) or context.module) is scope:
                return True
    return False


def dataset_bound_to(context: Context, name: cst.Name) -> Optional[cst.BaseExpression]:
    """The dataset a name is bound to once: its value, or the dataset `random_split` cut it from
    (`train_ds, val_ds = random_split(dataset, [n_train, n_val])`); None when that cannot be told."""
    bindings = context.lookup(name)
    if not bindings or len(bindings) != 1:
        return None
    binding = bindings[0]
    if binding.kind == "assign":
        return binding.value
    node = binding.node
    if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and node.value.args:
        if context.qualname(node.value) == "torch.utils.data.random_split":
            return node.value.args[0].value
    return None


def dataset_given_device(context: Context, call: cst.Call) -> bool:
    """The loader's dataset was built by a call that receives a (CUDA) device: `MyDataset(x, y, device)`, or
    is a Dataset class of this file whose `__getitem__` moves each item to the GPU.

    Its items are, or may be, GPU tensors: worker processes cannot create them (CUDA does not start in a
    forked worker) and have no decoding to take over.
    """
    dataset = argument(call, "dataset", position=0)
    return dataset is not None and _built_with_device(context, dataset.value, 0)


def _built_with_device(context: Context, expr: Optional[cst.BaseExpression], depth: int) -> bool:
    if expr is None or depth > 5:
        return False
    if isinstance(expr, cst.Name):
        return _built_with_device(context, dataset_bound_to(context, expr), depth + 1)
    if not isinstance(expr, cst.Call):
        return False
    name = context.qualname(expr) or ""
    if name == "torch.utils.data.Subset" and expr.args:
        return _built_with_device(context, expr.args[0].value, depth + 1)
    if name.startswith("torch.") or is_dataloader(context, expr):
        return False  # TensorDataset and friends: TL102's business, and in memory anyway
    data = flow(context)
    if _getitem_moves(context, expr):
        return True
    for arg in expr.args:
        value = arg.value
        if arg.keyword is not None and arg.keyword.value == "device":
            if context.literal(value) is not None and data.may_be_cuda(value, 0):
                return True
            continue
        if isinstance(value, cst.Call):
            if context.qualname(value) == "torch.device" and data.may_be_cuda(value, 0):
                return True
            if is_transfer(value) and data.to_accelerator(value):
                return True  # tensors moved to the GPU before the Dataset wraps them
        elif isinstance(value, (cst.Name, cst.Attribute)):
            last = last_name(value) or ""
            # A dataset's `rank` is the shard it reads, not where its items go: only a `device` counts here.
            if "device" in last.lower() and data.may_be_cuda(value, 0):
                return True
    return False


def _getitem_moves(context: Context, call: cst.Call) -> bool:
    """`call` builds a Dataset class of this file whose `__getitem__` moves what it reads to an accelerator
    (`img = self.transform(img).to(device)`)."""
    bindings = context.lookup(call.func) if isinstance(call.func, cst.Name) else None
    if not bindings or len(bindings) != 1 or not isinstance(bindings[0].node, cst.ClassDef):
        return False
    getitem = method_named(bindings[0].node, "__getitem__")
    data = flow(context)
    return getitem is not None and any(
        isinstance(n, cst.Call) and is_transfer(n) and data.to_accelerator(n) for n in descendants(getitem)
    )
