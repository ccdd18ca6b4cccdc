"""Does a value read to the host go where only the host can use it?

Some per-step reads are the algorithm's, not waste: a reinforcement-learning loop must hand its actions to
an environment that steps on the host (`envs.step(actions.cpu().numpy())`), and prioritised replay keeps
its sum tree on the host (`memory.update_priorities(idxs, loss.detach().cpu().numpy())`). Nothing can keep
such a value on the device, so a rule that asks for it to stay there is wrong. So do images and masks
written to files for each batch (`Image.fromarray(img).save(path)`, `cv2.imwrite(path, mask)`, `np.save`):
a file is written from the host.

So is a value that sets a size on the host: the bound of a Python loop (`for i in keep` after
`keep = torch.topk(scores, k)[1].tolist()`, `range(n)`) or a length handed to `view`/`reshape`
(`sets_host_size`). Python needs the number itself; only a read per element of a device tensor, which one
copy before the loop would replace, stays worth reporting.

So is the predicate of `torch.cond(pred.item(), true_fn, false_fn, args)`: code written for `torch.export`,
which traces the read as a symbolic value instead of copying it.

A NaN guard is one too: `loss_value = loss.item()` then `if not math.isfinite(loss_value): sys.exit(1)` needs
the value on every step by design (`guards_non_finite`), unless the value is also logged or accumulated.

`needed_on_host(context, read)` gathers these judgements, for a read in a loop and for one a helper returns to
such a use (`select_action` returning `q.argmax().item()` to `env.step`); the in-loop rules and the summaries of
helpers (TL207) both ask it. A read right after a needed one, with no device work queued between, finds the
GPU idle (`drained_by_needed_read`).

`feeds_host_consumer(context, read)` is true when the value of `read` (a `.cpu()`, `.item()`, `.numpy()`
call, through the methods chained on it) is an argument of such a call, directly or through the one name it
is assigned to in the same function.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.lint.names import last_name
from torchlint.lint.walk import descendants, scope_nodes
from torchlint.semantic import host_sinks, loops

if TYPE_CHECKING:
    from torchlint.lint.context import Context

# Python-number checks a NaN guard uses.
_FINITE_CHECKS = frozenset(
    {"math.isfinite", "math.isnan", "math.isinf", "numpy.isfinite", "numpy.isnan", "numpy.isinf"}
)

# Methods of host-side structures fed per step: a replay buffer's priorities (`update_priorities`).
_HOST_STRUCTURE = re.compile(r"^update_priorit(?:y|ies)$")


def needed_on_host(context: "Context", read: cst.Call, *, sizes: bool = True, _depth: int = 0) -> bool:
    """The program needs the value of `read` on the host by design (`feeds_host_consumer`, and with `sizes`
    `sets_host_size`), here or, when its function returns it, at every call of that function in this file
    (`action = agent.select_action(state)` then `env.step(action)`): the read is the step's, not a waste.
    A helper's summary asks without `sizes`: a post-processing helper that loops on the host over the classes
    it reads (`for c in dets[:, -1].cpu().unique():`) could keep that work on the device."""
    from torchlint.semantic import hot_paths

    if feeds_host_consumer(context, read) or (sizes and sets_host_size(context, read)):
        return True
    function = context.enclosing_function(read)
    if _depth >= _RETURN_HOPS or function is None or not _returned(context, read, function):
        return False
    callers = hot_paths.callers_of(context, function)
    return bool(callers) and all(needed_on_host(context, c, sizes=sizes, _depth=_depth + 1) for c in callers)


# Functions a needed value is followed out of (`select_action` returns it to `run_episode`, which returns it).
_RETURN_HOPS = 2


def _returned(context: "Context", read: cst.Call, function: cst.FunctionDef) -> bool:
    """`function` returns the value of `read` itself (`return a.cpu().numpy()`), or the one name it is
    assigned to (`action = a.item()` ... `return action`)."""
    value = _through_arithmetic(context, whole_value(context, read))
    if isinstance(context.parent(value), cst.Return):
        return True
    name = _assigned_name(context, value)
    return name is not None and any(
        isinstance(node, cst.Return) and isinstance(node.value, cst.Name) and node.value.value == name
        for node in scope_nodes(function.body)
    )


# Calls that queue no device work: host reads and the host's own bookkeeping.
_HOST_CALLS = frozenset(
    {"item", "tolist", "cpu", "numpy", "detach", "append", "extend", "print", "len", "float", "int", "bool",
     "isinstance", "format", "str", "round"}
)


def drained_by_needed_read(context: "Context", read: cst.Call) -> bool:
    """An earlier statement of the same block reads a value the program needs on the host (`needed_on_host`),
    and the statements between queue no device work: that read already waited for the GPU, so this one (`return
    loss.item()` after `memory.update_priorities(idx, td.cpu().numpy())`) finds it idle and costs a copy only."""
    statement = _block_statement(context, read)
    block = context.parent(statement) if statement is not None else None
    if not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return False
    siblings = list(block.body)
    for earlier in reversed(siblings[: siblings.index(statement)]):  # type: ignore[arg-type]
        if not isinstance(earlier, cst.SimpleStatementLine):
            return False  # a branch or a loop may queue work on some path
        calls = [n for n in scope_nodes(earlier) if isinstance(n, cst.Call)]
        if any(last_name(c.func) in READS and needed_on_host(context, c, sizes=False) for c in calls):
            return True
        if any(last_name(c.func) not in _HOST_CALLS and not _consumes_on_host(context, c) for c in calls):
            return False
    return False


# Calls that read a device value on the host.
READS = frozenset({"item", "tolist", "cpu", "to", "float", "int", "bool"})


def _block_statement(context: "Context", node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The statement of a block (`IndentedBlock`, module) that holds `node`."""
    for ancestor in context.ancestors(node):
        if isinstance(context.parent(ancestor), (cst.IndentedBlock, cst.Module)):
            return ancestor
    return None


def feeds_host_consumer(context: "Context", read: cst.Call) -> bool:
    """The value of `read` is an argument of an environment's step or a host structure's update, directly or
    through the one name it is assigned to in the same function, or a value derived from it in a few
    assignments is written to a file on the same trip of the loop (`mask = colorize(pred); mask.save(path)`)."""
    value = _through_arithmetic(context, whole_value(context, read))
    parent = context.parent(value)
    if isinstance(parent, cst.Arg):
        call = context.parent(parent)
        return isinstance(call, cst.Call) and _consumes_on_host(context, call)
    name = _assigned_name(context, value)
    if name is None:
        return False
    function = context.enclosing_function(read)
    scope = function.body if function is not None else context.module
    # a loop's trip, else one call of the function: where values derived from the read count
    loop = next((a for a in context.ancestors(read) if isinstance(a, (cst.For, cst.While))), function)
    derived = _derived_names(scope, name) - {name} if loop is not None else set()
    for node in scope_nodes(scope):
        if isinstance(node, cst.Call) and _consumes_on_host(context, node):
            if any(_names(arg.value, name) for arg in node.args):
                writes = last_name(node.func) in host_sinks.FILE_WRITERS
                if writes and loop is not None and loops.gated(context, node, loop):
                    continue  # `torch.save({"p": p}, path)` at a checkpoint interval: not what the read is for
                return True
            if not derived or not _same_trip(context, node, read, loop):
                continue  # values derived from the read count only when written on the same trip, always
            if any(_names(arg.value, n) for arg in node.args for n in derived):
                return True
            func = node.func  # `mask.save(path)` where `mask = colorize(pred)`: the image written is the receiver
            if last_name(func) in host_sinks.FILE_WRITERS and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
                if func.value.value in derived:
                    return True
    return False


def _same_trip(context: "Context", node: cst.CSTNode, read: cst.Call, loop: cst.CSTNode) -> bool:
    """`node` runs inside `loop` (a loop, or the function) whenever `read` does: no branch of its own (a file
    written only `if opts.save_val_results:` leaves the read that feeds the metrics a waste). An inner `for`
    over the batch's images (`for i in range(preds.shape[0]): cv2.imwrite(...)`) runs on every trip, and so
    does a branch in it on the position alone (`if i == 0:`, the first image of each batch)."""
    around_read = {id(a) for a in context.ancestors(read)}
    ancestors = [a for a in context.ancestors(node) if id(a) not in around_read]
    positions = {
        n.value
        for a in ancestors
        if isinstance(a, cst.For)
        for n in (a.target, *scope_nodes(a.target))
        if isinstance(n, cst.Name)
    }
    for ancestor in context.ancestors(node):
        if ancestor is loop:
            return True
        if isinstance(ancestor, cst.If) and id(ancestor) not in around_read and _on_position(ancestor.test, positions):
            continue
        if isinstance(ancestor, (cst.If, cst.While, cst.Try)) and id(ancestor) not in around_read:
            return False
    return False


def _on_position(test: cst.BaseExpression, positions: set[str]) -> bool:
    """`i == 0`: a test that reads only the targets of the inner loops (and constants)."""
    names = [n for n in (test, *scope_nodes(test)) if isinstance(n, cst.Name)]
    return bool(names) and all(n.value in positions for n in names)


def _derived_names(scope: cst.CSTNode, name: str, hops: int = 3) -> set[str]:
    """`name` and the names assigned from it in `scope`, a few assignments deep (`predict = pred.squeeze(0)`,
    `mask = get_color_pallete(predict)`)."""
    names = {name}
    assigns = [n for n in scope_nodes(scope) if isinstance(n, cst.Assign) and len(n.targets) == 1]
    walks = [n for n in scope_nodes(scope) if isinstance(n, cst.For)]  # `for pred, path in zip(preds, paths)`
    for _ in range(hops):
        grown = {
            a.targets[0].target.value  # type: ignore[attr-defined]
            for a in assigns
            if isinstance(a.targets[0].target, cst.Name) and any(_names(a.value, n) for n in names)
        } | {
            target.value
            for w in walks
            if any(_names(w.iter, n) for n in names)
            for target in (w.target, *scope_nodes(w.target))
            if isinstance(target, cst.Name)
        }
        if grown <= names:
            break
        names |= grown
    return names


# Tensor methods whose arguments are sizes the host must know.
_SHAPE_METHODS = frozenset({"view", "reshape", "split", "narrow", "expand", "repeat", "unflatten"})


def sets_host_size(context: "Context", read: cst.Call) -> bool:
    """The value of `read` bounds a Python loop or is a length handed to `view`/`reshape`, directly or through
    the one name it is assigned to in the same function."""
    value = whole_value(context, read)
    parent = context.parent(value)
    if isinstance(parent, cst.Arg) and _sizes(context.parent(parent)):
        return True
    if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is value:
        return True
    name = _assigned_name(context, value)
    if name is None:
        return False
    function = context.enclosing_function(read)
    for node in scope_nodes(function.body if function is not None else context.module):
        if isinstance(node, (cst.For, cst.CompFor)) and isinstance(node.iter, cst.Name) and node.iter.value == name:
            return True
        if _sizes(node) and any(isinstance(a.value, cst.Name) and a.value.value == name for a in node.args):  # type: ignore[attr-defined]
            return True
    return False


def _sizes(node: Optional[cst.CSTNode]) -> bool:
    """`node` is a call of `range()` or of a shape method: its arguments are sizes."""
    if not isinstance(node, cst.Call):
        return False
    name = last_name(node.func)
    return (isinstance(node.func, cst.Name) and name == "range") or (
        isinstance(node.func, cst.Attribute) and name in _SHAPE_METHODS
    )


def _consumes_on_host(context: "Context", call: cst.Call) -> bool:
    """`envs.step(actions)` (any `.step()` that is not an optimizer's or a scheduler's),
    `memory.update_priorities(idxs, priorities)`, a file writer (`cv2.imwrite(path, img)`) or `torch.cond`."""
    name = last_name(call.func)
    if name in host_sinks.FILE_WRITERS and call.args:
        return True
    if context.qualname(call) == "torch.cond":
        return True  # the predicate of export control flow: traced symbolically by torch.export
    if not isinstance(call.func, cst.Attribute) or name is None:
        return False
    if name == "step":
        return loops.step_kind(context, call) is None and bool(call.args)
    return bool(_HOST_STRUCTURE.match(name))


def whole_value(context: "Context", read: cst.Call) -> cst.BaseExpression:
    """`actions.cpu().numpy()[0]` for the `.cpu()` call in it: the read and the methods and indexes chained on it."""
    current: cst.BaseExpression = read
    while True:
        parent = context.parent(current)
        if isinstance(parent, cst.Subscript) and parent.value is current:
            current = parent
            continue
        if isinstance(parent, cst.Attribute) and parent.value is current:
            call = context.parent(parent)
            if isinstance(call, cst.Call) and call.func is parent:
                current = call
                continue
            current = parent  # `.data`
            continue
        return current


def _through_arithmetic(context: "Context", value: cst.BaseExpression) -> cst.BaseExpression:
    """`td.cpu().numpy() + eps` for `td.cpu().numpy()`: arithmetic on the host value carries it on."""
    parent = context.parent(value)
    while isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)):
        value, parent = parent, context.parent(parent)
    return value


def _assigned_name(context: "Context", value: cst.BaseExpression) -> Optional[str]:
    parent = context.parent(value)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        return parent.targets[0].target.value
    return None


def _names(expr: cst.BaseExpression, name: str) -> bool:
    """`expr` reads the name (`actions`, `actions[0]`, `np.clip(actions, -1, 1)`)."""
    return any(isinstance(n, cst.Name) and n.value == name for n in (expr, *scope_nodes(expr)))


def _in_test(context: "Context", node: cst.CSTNode, test: cst.BaseExpression) -> bool:
    return node is test or any(ancestor is test for ancestor in context.ancestors(node))


def _exits(context: "Context", block: cst.CSTNode) -> bool:
    """The block stops the run or skips the step: `raise`, `sys.exit(...)`, `return`, `break`, `continue`."""
    for node in scope_nodes(block):
        if isinstance(node, (cst.Raise, cst.Return, cst.Break, cst.Continue)):
            return True
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Name) and node.func.value in ("exit", "quit"):
                return True
            if context.qualname(node) in ("sys.exit", "os._exit", "os.abort"):
                return True
    return False


def guards_non_finite(context: "Context", node: cst.Call) -> bool:
    """`loss_value = loss.item()` followed by `if not math.isfinite(loss_value): sys.exit(1)`, or
    `assert math.isfinite(loss.item())`: a deliberate guard that stops training on a NaN/inf loss."""
    parent = context.parent(node)
    if isinstance(parent, cst.Arg):
        check = context.parent(parent)
        if not isinstance(check, cst.Call) or not _is_finite_check(context, check):
            return False
        statement = context.enclosing_statement(node)
        if isinstance(statement, cst.If):
            return _in_test(context, check, statement.test) and _exits(context, statement.body)
        assertion = context.enclosing(node, cst.Assert)
        return assertion is not None and _in_test(context, check, assertion.test)
    if not (
        isinstance(parent, cst.Assign)
        and len(parent.targets) == 1
        and isinstance(parent.targets[0].target, cst.Name)
    ):
        return False
    name = parent.targets[0].target.value
    line = context.parent(parent)
    block = context.parent(line) if line is not None else None
    if not isinstance(line, cst.SimpleStatementLine) or not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return False
    siblings = list(block.body)
    following = siblings[siblings.index(line) + 1 :]
    guard = _guard_of(context, name, following)
    if guard is None:
        return False
    # a value also logged or accumulated (`metric_logger.update(loss=loss_value)`) is read for that too
    return not any(
        isinstance(n, cst.Name) and n.value == name
        for statement in following
        if statement is not guard
        for n in descendants(statement)
    )

def _guard_of(context: "Context", name: str, following: list[cst.BaseStatement]) -> Optional[cst.BaseStatement]:
    """The statement among `following` that stops the run when `name` is not finite."""
    for statement in following:
        tests: list[tuple[cst.BaseExpression, Optional[cst.CSTNode]]] = []
        if isinstance(statement, cst.If):
            tests.append((statement.test, statement.body))
        elif isinstance(statement, cst.SimpleStatementLine):
            tests.extend((small.test, None) for small in statement.body if isinstance(small, cst.Assert))
        for test, body in tests:
            for check in [test, *descendants(test)]:
                if (
                    isinstance(check, cst.Call)
                    and _is_finite_check(context, check)
                    and any(isinstance(a.value, cst.Name) and a.value.value == name for a in check.args)
                    and (body is None or _exits(context, body))
                ):
                    return statement
    return None

def _is_finite_check(context: "Context", call: cst.Call) -> bool:
    if last_name(call.func) not in ("isfinite", "isnan", "isinf"):
        return False
    return context.qualname(call) in _FINITE_CHECKS
