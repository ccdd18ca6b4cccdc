"""optimize(): copy, trace (whole or in parts), run the passes, verify, roll back the passes that break equality."""

from __future__ import annotations

import copy
import time

import torch
from torch import fx, nn

from . import verify
from .passes import DEFAULT, MIXED_PRECISION, PASSES, Pass, PassContext
from .inference import make_inference_model
from .report import NOT_TRACED, NOTE, REFUSED, REWROTE, ROLLED_BACK, TRACED, VERIFIED, Report
from .shapes import ShapeRecorder
from .trace import copy_graph_module, trace_largest

REPORT_ATTRIBUTE = "torchlint_report"


def optimize(model, example_inputs=None, *, inplace=False, autocast=None, passes=None, verify_=True, rtol=None,
             atol=None) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise TypeError(f"optimize() takes an nn.Module, not {type(model).__name__}")
    started = time.perf_counter()
    work = model if inplace else copy.deepcopy(model)
    training = work.training
    device_type = _device_type(work, example_inputs)
    report = Report(mode="train" if training else "eval", device=device_type)
    dtype = _autocast_dtype(autocast, device_type, report)
    selected = _select(passes, dtype is not None)
    fp32 = _tolerance(verify.FP32, rtol, atol)
    low = _tolerance(verify.LOW_PRECISION.get(dtype, verify.FP32), rtol, atol)
    report.rtol, report.atol = (low.rtol, low.atol) if dtype is not None else (fp32.rtol, fp32.atol)

    args, kwargs = verify.as_call_arguments(example_inputs) if example_inputs is not None else ((), {})
    reference = recorder = None
    if example_inputs is not None:
        # One run of the original model gives both the reference outputs and the tensor shapes passes need.
        recorder = ShapeRecorder(work)
        try:
            reference = verify.run(work, args, kwargs, training)
        except Exception as error:  # noqa: BLE001 - the caller's inputs are wrong, not the optimizer
            hint = ("; a list is passed as ONE argument: pass a tuple for several positional arguments"
                    if isinstance(example_inputs, list) else "")
            raise ValueError(f"the model fails on example_inputs: {type(error).__name__}: {error}{hint}") from error
        finally:
            recorder.close()
        if not verify_:
            reference = None
        elif not (comparable := verify.compare(reference.output, reference.output, fp32)).ok:
            report.add("verify", NOTE, "", f"model returned unchanged: {comparable.detail}")
            report.transform_seconds = time.perf_counter() - started
            setattr(work, REPORT_ATTRIBUTE, report)
            return work

    # An eval-mode result keeps the original's state_dict: a structural copy sharing every tensor keeps the
    # original tensors that passes replace by folded or packed ones.
    source = None if training else _snapshot(work)
    traced = trace_largest(work, follow_mode=training)
    root, pieces = traced.root, traced.pieces
    for item in traced.untraced:
        report.add("trace", NOT_TRACED, item.path, item.reason)
    for piece in pieces:
        report.add("trace", TRACED, piece, "traced with torch.fx; graph passes run on it")
        if recorder is not None:
            recorder.annotate(_piece(root, piece))
    if not pieces:
        report.add("trace", NOTE, "", "nothing traced: only whole-model passes can run; graph passes skipped")

    context = PassContext(report, "", training, device_type, autocast_dtype=dtype)
    fp32_stage = [p for p in selected if p.name not in MIXED_PRECISION]
    mixed_stage = [p for p in selected if p.name in MIXED_PRECISION]
    if fp32_stage:
        first_entry = len(report.entries)
        try:
            root = _run_stage(root, fp32_stage, pieces, reference, (args, kwargs), fp32, context, check_start=True)
        except _TraceMismatch as mismatch:
            del report.entries[first_entry:]
            report.add("trace", NOTE, "", f"the traced graphs do not reproduce the model ({mismatch}); kept as is")
            root, pieces = traced.undo(), []
        if pieces and not any(e.action == REWROTE for e in report.entries[first_entry:]):
            # Nothing to gain from the traced graphs: give back the original modules.
            root, pieces = traced.undo(), []
            report.add("trace", NOTE, "", "no graph rewrite kept: the original modules are returned")
        elif pieces and "" not in pieces and reference is None:
            report.add("trace", NOTE, "", "traced submodules replace the originals unchecked (no example_inputs): "
                                          "code that reaches into them, like self.block[0], or that views their "
                                          "channels_last outputs with .view(), would fail")
    if mixed_stage:
        root = _run_stage(root, mixed_stage, pieces, reference, (args, kwargs), low, context)

    if example_inputs is None:
        report.add("verify", NOTE, "", "not verified: pass example_inputs to compare against the original model")
    elif not verify_:
        report.add("verify", NOTE, "", "not verified: verify=False")
    if not training and report.passes_applied:
        root = make_inference_model(root, source)
    report.transform_seconds = time.perf_counter() - started
    setattr(root, REPORT_ATTRIBUTE, report)
    return root


class _TraceMismatch(Exception):
    """The traced graphs, before any pass, already compute something else than the model."""


def _run_stage(root, stage: list[Pass], pieces, reference, inputs, tolerance, ctx: PassContext,
               check_start: bool = False) -> nn.Module:
    """Apply a group of passes sharing a tolerance, then verify once. If the result differs, start the group again
    one pass at a time, verifying after each and rolling back the passes that break equality.

    With check_start, a failed verification first checks the starting point (the freshly traced model) and raises
    _TraceMismatch when it is the trace itself that differs from the original model."""
    start = _Checkpoint(root, pieces, deep=any(p.whole_model and p.edits_modules for p in stage))
    first_entry = len(ctx.report.entries)
    root, changed = _apply_all(root, stage, pieces, ctx, reference, inputs, tolerance, verify_each=False)
    if reference is None or not changed:
        return root
    outcome = _check(root, reference, inputs, ctx.training, tolerance)
    if not isinstance(outcome, str):
        names = ", ".join(changed)
        ctx.report.max_error[names] = outcome.error
        ctx.report.add("verify", VERIFIED, "", f"after {names}: {outcome.detail} "
                                              f"(rtol {tolerance.rtol:.0e}, atol {tolerance.atol:.0e})")
        return root
    del ctx.report.entries[first_entry:]
    if check_start and pieces:
        start_outcome = _check(start.restore(), reference, inputs, ctx.training, tolerance)
        if isinstance(start_outcome, str):
            raise _TraceMismatch(start_outcome)
    root, _ = _apply_all(start.restore(), stage, pieces, ctx, reference, inputs, tolerance, verify_each=True)
    return root


def _apply_all(root, stage, pieces, ctx, reference, inputs, tolerance, verify_each: bool):
    changed = []
    report = ctx.report
    for p in stage:
        refusal = _refusal(p, ctx.training, ctx.device_type, pieces)
        if refusal:
            if pieces or p.whole_model:
                report.add(p.name, REFUSED, "", refusal)
            continue
        ctx.pass_name, ctx.piece = p.name, ""
        checkpoint, first_entry = _Checkpoint(root, pieces, deep=p.whole_model and p.edits_modules), len(report.entries)
        try:
            root = _apply(p, root, pieces, ctx)
        except Exception as error:  # noqa: BLE001 - a failing pass is undone, never fatal
            root = checkpoint.restore()
            _roll_back(report, p.name, first_entry, f"the pass failed: {type(error).__name__}: {error}")
            continue
        if not any(e.action == REWROTE for e in report.entries[first_entry:]):
            continue
        if verify_each and reference is not None:
            outcome = _check(root, reference, inputs, ctx.training, tolerance)
            if isinstance(outcome, str):
                root = checkpoint.restore()
                _roll_back(report, p.name, first_entry, outcome)
                continue
            report.max_error[p.name] = outcome.error
            report.add(p.name, VERIFIED, "", f"{outcome.detail} (rtol {tolerance.rtol:.0e}, atol {tolerance.atol:.0e})")
        changed.append(p.name)
    return root, changed


def _check(root, reference, inputs, training, tolerance):
    """The comparison with the original model, or a string saying why the optimized model does not match."""
    candidate = _safe_run(root, *inputs, training)
    if isinstance(candidate, str):
        return f"the optimized model fails: {candidate}"
    if candidate.backward_error and not reference.backward_error:
        return f"backward fails: {candidate.backward_error}"
    result = verify.compare(reference.output, candidate.output, tolerance)
    if not result.ok:
        return f"output differs from the original: {result.detail}"
    return result


def _tolerance(default: verify.Tolerance, rtol, atol) -> verify.Tolerance:
    return verify.Tolerance(default.rtol if rtol is None else rtol, default.atol if atol is None else atol)


def explain(model: nn.Module) -> Report:
    report = getattr(model, REPORT_ATTRIBUTE, None)
    if report is None:
        raise ValueError("this module was not returned by torchlint.optimize(); there is nothing to explain")
    return report


def _device_type(model: nn.Module, example_inputs) -> str:
    for tensor in list(model.parameters()) + list(model.buffers()):
        return tensor.device.type
    if isinstance(example_inputs, torch.Tensor):
        return example_inputs.device.type
    return "cpu"


_DTYPE_NAMES = {
    "bf16": torch.bfloat16, "bfloat16": torch.bfloat16, torch.bfloat16: torch.bfloat16,
    "fp16": torch.float16, "float16": torch.float16, "half": torch.float16, torch.float16: torch.float16,
}


def _autocast_dtype(autocast, device_type: str, report: Report):
    """The dtype to autocast to, or None (off, or refused with a report line)."""
    if autocast is None or autocast is False:
        return None
    if autocast is True or autocast == "auto":
        if device_type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        if device_type == "cpu" and torch.ops.mkldnn._is_mkldnn_bf16_supported():
            return torch.bfloat16
        report.add("autocast", REFUSED, "", f"no fast low-precision type on {device_type}: staying in float32")
        return None
    if autocast not in _DTYPE_NAMES:
        raise ValueError(f"autocast must be True, 'bf16' or 'fp16', not {autocast!r}")
    dtype = _DTYPE_NAMES[autocast]
    if device_type == "cpu":
        fast = (torch.ops.mkldnn._is_mkldnn_bf16_supported() if dtype == torch.bfloat16
                else torch.ops.mkldnn._is_mkldnn_fp16_supported())
        if not fast:
            report.add("autocast", REFUSED, "", f"this CPU has no native {dtype} arithmetic (fp16 matmul measured 80x "
                                                "slower than fp32 on such a CPU): staying in float32; try bf16")
            return None
    return dtype


def _select(passes, mixed_precision: bool) -> list[Pass]:
    if passes is None:
        names = DEFAULT + (MIXED_PRECISION if mixed_precision else [])
        return [PASSES[n] for n in names]
    selected = []
    for item in passes:
        if isinstance(item, Pass):
            selected.append(item)
        elif isinstance(item, str):
            if item not in PASSES:
                raise ValueError(f"unknown pass {item!r}; known passes: {', '.join(PASSES)}")
            selected.append(PASSES[item])
        elif callable(item):  # a user's own graph pass: (GraphModule, PassContext) -> GraphModule
            selected.append(Pass(getattr(item, "__name__", "custom_pass"), item, "user pass"))
        else:
            raise TypeError(f"passes must hold pass names, Pass objects or callables, not {item!r}")
    if mixed_precision and not any(p.name == "autocast" for p in selected):
        selected += [PASSES[n] for n in MIXED_PRECISION]
    return selected


def _refusal(p: Pass, training: bool, device_type: str, pieces: list[str]) -> str | None:
    if p.eval_only and training:
        return "eval-only pass: the model is in training mode (call model.eval() for inference)"
    if p.cpu_only and device_type != "cpu":
        return f"CPU-only pass: the model is on {device_type}"
    if not p.whole_model and not pieces:
        return "no traced graph to rewrite"
    return None


def _apply(p: Pass, root: nn.Module, pieces: list[str], ctx: PassContext) -> nn.Module:
    if p.whole_model:
        return p.run(root, ctx)
    for path in pieces:
        ctx.piece = path
        # Passes edit graphs in place: give them a copy, so the graph installed now stays intact for a rollback.
        new = p.run(copy_graph_module(_piece(root, path)), ctx)
        root = _replace(root, path, new)
    return root


def _piece(root: nn.Module, path: str) -> fx.GraphModule:
    return _inner(root).get_submodule(path) if path else _inner(root)


class _Checkpoint:
    """What it takes to undo passes. Graph passes work on copies of the graphs, so the root object and the graphs
    installed in it are enough; a whole-model pass that edits modules in place needs a structural copy."""

    def __init__(self, root: nn.Module, pieces: list[str], deep: bool) -> None:
        self.root = _snapshot(root) if deep else root
        self.graphs = {} if deep else {path: _piece(root, path) for path in pieces}
        # channels_last re-lays out weights in place (param.data = ...) to keep Parameter identity for training.
        self.data = [(p, p.data) for p in root.parameters()]

    def restore(self) -> nn.Module:
        for param, data in self.data:
            param.data = data
        root = self.root
        for path, gm in self.graphs.items():
            root = _replace(root, path, gm)
        return root


def _inner(root: nn.Module) -> nn.Module:
    # Whole-model passes may wrap the root (autocast); the traced pieces live inside the wrapper.
    from .modules import AutocastForward

    return root.module if isinstance(root, AutocastForward) else root


def _replace(root: nn.Module, path: str, new: nn.Module) -> nn.Module:
    inner = _inner(root)
    if not path:
        if inner is root:
            return new
        root.module = new
        return root
    parent_path, _, name = path.rpartition(".")
    setattr(inner.get_submodule(parent_path) if parent_path else inner, name, new)
    return root


def _snapshot(root: nn.Module) -> nn.Module:
    # A structural copy sharing every parameter and buffer: passes build new tensors instead of editing them,
    # so restoring the snapshot restores the model without copying its weights.
    memo = {id(t): t for t in list(root.parameters()) + list(root.buffers())}
    return copy.deepcopy(root, memo)


def _roll_back(report: Report, pass_name: str, first_entry: int, why: str) -> None:
    undone = [e for e in report.entries[first_entry:] if e.action == REWROTE]
    del report.entries[first_entry:]
    report.add(pass_name, ROLLED_BACK, "", f"{len(undone)} rewrites undone: {why}")


def _safe_run(root, args, kwargs, training):
    try:
        return verify.run(root, args, kwargs, training)
    except Exception as error:  # noqa: BLE001
        return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
