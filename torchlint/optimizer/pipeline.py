"""optimize() in four steps: capture (copy, reference run, trace), passes (in groups, each verified, a pass that
breaks equality rolled back), measure (a group is kept only if it makes the model faster), report."""

from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass, field

import torch
from torch import fx, nn

from . import measure, verify
from . import origins
from .inference import compact, make_inference_model
from .modules import AutocastForward
from .passes import DEFAULT, MIXED_PRECISION, PASSES, Pass, PassContext, PassResult
from .report import MEASURED, NOT_TRACED, NOTE, REFUSED, REWROTE, ROLLED_BACK, TRACED, VERIFIED, Report
from .shapes import ShapeRecorder
from .trace import Traced, copy_graph_module, trace_largest

REPORT_ATTRIBUTE = "torchlint_report"
MEASURE_ENV = "TORCHLINT_MEASURE"  # "0" turns timing off where optimize() is called with measure=None


@dataclass
class Options:
    inplace: bool = False
    dtype: object = None
    passes: object = None
    verify: bool = True
    rtol: float | None = None
    atol: float | None = None
    measure: bool | None = None
    time_limit: float = 10.0
    time_budget: float | None = 60.0


@dataclass
class _Job:
    """Everything the steps share for one optimize() call."""

    report: Report
    training: bool
    device_type: str
    dtype: torch.dtype | None
    fp32_passes: list[Pass]
    mixed_passes: list[Pass]
    fp32: verify.Tolerance
    low: verify.Tolerance
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    reference: verify.Run | None = None  # None: nothing to verify against
    measure: bool = False
    baseline: nn.Module | None = None  # what the first group is timed against: the model as given
    time_left: float = 0.0
    recorder: ShapeRecorder | None = None  # tensor shapes seen on the example inputs
    source: nn.Module | None = None  # the model before any pass, sharing its tensors (eval mode)
    started: float = 0.0  # time.perf_counter() when optimize() began
    budget: float | None = None  # seconds optimize() may take before it stops trying further passes
    call_seconds: float = 0.0  # how long the original model took on the example inputs

    def budget_spent(self) -> bool:
        return self.budget is not None and time.perf_counter() - self.started > self.budget

    def out_of_time(self, what: str) -> bool:
        """Whether the time budget is spent; if so, the report says that `what` was not tried."""
        spent = time.perf_counter() - self.started
        if self.budget is None or spent <= self.budget:
            return False
        self.report.add("budget", NOTE, "", f"time budget of {self.budget:g} s spent ({spent:.1f} s): {what} not tried "
                                            "(optimize(time_budget=...) gives more)")
        return True

    @property
    def inputs(self):
        return self.args, self.kwargs


def optimize(model, example_inputs=None, options: Options | None = None) -> nn.Module:
    options = options or Options()
    if not isinstance(model, nn.Module):
        raise TypeError(f"optimize() takes an nn.Module, not {type(model).__name__}")
    started = time.perf_counter()
    work = model if options.inplace else copy.deepcopy(model)
    job = _prepare(work, example_inputs, options)
    job.started, job.budget = started, options.time_budget
    source = None if job.training else _snapshot(work)
    job.source = source
    if example_inputs is not None:
        problem = _capture_reference(work, example_inputs, job, options)
        if problem:
            job.report.add("verify", NOTE, "", f"model returned unchanged: {problem}")
            return _finish(work, job, None, started)
    if job.measure:
        job.baseline = source if options.inplace else model
    traced = trace_largest(work, follow_mode=job.training,
                           export_inputs=job.inputs if example_inputs is not None else None)
    _report_trace(traced, job)
    job.report.spend("capture", time.perf_counter() - started)
    root = _run_groups(traced, job)
    return _finish(root, job, source, started)


# Step 1: capture


def _prepare(work: nn.Module, example_inputs, options: Options) -> _Job:
    training = work.training
    device_type = _device_type(work, example_inputs)
    report = Report(mode="train" if training else "eval", device=device_type)
    dtype = _autocast_dtype(options.dtype, device_type, report)
    selected = _select(options.passes, dtype is not None)
    fp32 = _tolerance(verify.FP32, options.rtol, options.atol)
    low = _tolerance(verify.LOW_PRECISION.get(dtype, verify.FP32), options.rtol, options.atol)
    report.rtol, report.atol = (low.rtol, low.atol) if dtype is not None else (fp32.rtol, fp32.atol)
    wanted = options.measure if options.measure is not None else os.environ.get(MEASURE_ENV, "1") != "0"
    job = _Job(report, training, device_type, dtype,
               fp32_passes=[p for p in selected if p.name not in MIXED_PRECISION],
               mixed_passes=[p for p in selected if p.name in MIXED_PRECISION], fp32=fp32, low=low,
               time_left=options.time_limit)
    if wanted and example_inputs is None:
        report.add("measure", NOTE, "", "speed not measured: pass example_inputs to time the rewrites")
    elif wanted and training:
        report.add("measure", NOTE, "", "speed not measured in training mode (only inference is timed)")
    job.measure = bool(wanted and example_inputs is not None and not training)
    return job


def _capture_reference(work: nn.Module, example_inputs, job: _Job, options: Options) -> str | None:
    """Run the original model once: its outputs are the reference, and hooks record the shapes passes need.
    Returns why the model cannot be verified, when its outputs cannot be compared even with themselves."""
    job.args, job.kwargs = verify.as_call_arguments(example_inputs)
    recorder = ShapeRecorder(work)
    began = time.perf_counter()
    try:
        reference = verify.run(work, job.args, job.kwargs, job.training)
    except Exception as error:  # noqa: BLE001 - the caller's inputs are wrong, not the optimizer
        hint = ("; a list is passed as ONE argument: pass a tuple for several positional arguments"
                if isinstance(example_inputs, list) else "")
        raise ValueError(f"the model fails on example_inputs: {type(error).__name__}: {error}{hint}") from error
    finally:
        recorder.close()
    job.call_seconds = time.perf_counter() - began
    job.recorder = recorder
    if not options.verify:
        return None
    comparable = verify.compare(reference.output, reference.output, job.fp32)
    if not comparable.ok:
        return comparable.detail
    job.reference = reference
    return None


def _report_trace(traced: Traced, job: _Job) -> None:
    for item in traced.untraced:
        job.report.add("trace", NOT_TRACED, item.path, item.reason)
    recorder = job.recorder
    for piece in traced.pieces:
        how = ("captured with torch.export (non-strict; torch.fx could not trace it), dynamic sizes where the code "
               "allows (a call with sizes outside them runs the original model's code)" if traced.exported
               else "traced with torch.fx")
        job.report.add("trace", TRACED, piece, f"{how}; graph passes run on it")
        if recorder is not None:
            recorder.annotate(_piece(traced.root, piece))
    if not traced.pieces:
        job.report.add("trace", NOTE, "", "nothing traced: only whole-model passes can run; graph passes skipped")


# Step 2: the passes, in two groups (float32, then mixed precision), each timed


def _run_groups(traced: Traced, job: _Job) -> nn.Module:
    report = job.report
    root, pieces = traced.root, traced.pieces
    if job.fp32_passes and not job.out_of_time("the float32 passes"):
        first_entry = len(report.entries)
        try:
            root = _timed_stage(root, job.fp32_passes, pieces, job, job.fp32, "float32 passes", check_start=True)
        except _TraceMismatch as mismatch:
            del report.entries[first_entry:]
            report.add("trace", NOTE, "", f"the traced graphs do not reproduce the model ({mismatch}); kept as is")
            root, pieces = traced.undo(), []
        kept = _kept_passes(report, first_entry)
        if pieces and not kept:
            # Nothing to gain from the traced graphs: give back the original modules.
            root, pieces = traced.undo(), []
            report.add("trace", NOTE, "", "no graph rewrite kept: the original modules are returned")
        # With mixed precision asked for, only the final result is timed, against the model under autocast: what
        # the float32 group gains over float32 eager does not matter then (the fallback is eager autocast).
        elif pieces and job.measure and not job.mixed_passes and not _pays(job.baseline, root, kept, job, first_entry):
            root, pieces = traced.undo(), []
        elif pieces and "" not in pieces and job.reference is None:
            report.add("trace", NOTE, "", "traced submodules replace the originals unchecked (no example_inputs): "
                                          "code that reaches into them, like self.block[0], or that views their "
                                          "channels_last outputs with .view(), would fail")
    if job.mixed_passes and job.out_of_time("the mixed-precision passes"):
        # Mixed precision was asked for: what the user would otherwise run is the model under torch.autocast, which
        # the float32 rewrites were not timed against.
        return _eager_autocast(job, "the time budget ended before the mixed-precision passes") or root
    if job.mixed_passes:
        before = _snapshot(root) if job.measure else None
        first_entry = len(report.entries)
        root = _timed_stage(root, job.mixed_passes, pieces, job, job.low, "mixed-precision passes")
        kept = _kept_passes(report, first_entry)
        # Timed against what the user would otherwise run: the model as given, under torch.autocast.
        eager_autocast = AutocastForward(job.baseline, job.device_type, job.dtype) if job.measure else None
        unfit = _timing_unfit(job) if kept and job.measure else None
        if kept and job.measure and not _pays(eager_autocast, root, kept, job, first_entry,
                                              against="the model as given under torch.autocast"):
            why = "the rewrites could not be timed in the time budget left" if unfit else "the rewrites did not beat it"
            root = _eager_autocast(job, why) or before
    return root


def _eager_autocast(job: _Job, why: str) -> nn.Module | None:
    """The model as given, run under torch.autocast: what a user asking for mixed precision gets when no rewrite
    beats it, or none was timed against it. None when there is no untouched copy or it fails verification."""
    if job.source is None:
        return None
    wrapped = AutocastForward(job.source, job.device_type, job.dtype)
    outcome = _check(wrapped, job.reference, job.inputs, False, job.low, job.report) if job.reference else None
    if isinstance(outcome, str):
        return None
    report = job.report
    _undo_in_report(report, 0, report.passes_applied, "the model as given under torch.autocast is returned instead")
    report.speedup, report.speedup_over = None, "the model as given"
    report.add("autocast", NOTE, "", f"returned: the model as given under torch.autocast ({why})")
    return wrapped


def _timed_stage(root, stage, pieces, job: _Job, tolerance, phase: str, check_start: bool = False):
    """_run_stage, its time reported as the group's (verification inside it is reported on its own)."""
    began, verifying = time.perf_counter(), job.report.seconds.get("verification", 0.0)
    try:
        return _run_stage(root, stage, pieces, job, tolerance, check_start)
    finally:
        verified = job.report.seconds.get("verification", 0.0) - verifying
        job.report.spend(phase, time.perf_counter() - began - verified)


def _kept_passes(report: Report, first_entry: int) -> list[str]:
    entries = report.entries[first_entry:]
    undone = {e.pass_name for e in entries if e.action == ROLLED_BACK}
    return list(dict.fromkeys(e.pass_name for e in entries if e.action == REWROTE and e.pass_name not in undone))


def _pays(baseline: nn.Module, candidate: nn.Module, kept: list[str], job: _Job, first_entry: int,
          against: str = "") -> bool:
    """Time `candidate` against `baseline` within the time left; report the result either way. With `against`
    (what the baseline is), the measured speed-up is over that, not over the model as given in float32."""
    groups_left = 2 if job.mixed_passes and kept[0] not in MIXED_PRECISION else 1
    began = time.perf_counter()
    allowed = job.time_left / groups_left
    unfit = _timing_unfit(job)
    if unfit:
        _undo_in_report(job.report, first_entry, kept, unfit)
        return False
    if job.budget is not None:
        allowed = min(allowed, job.budget - (began - job.started))
    try:
        timing = measure.compare_speed(baseline, candidate, job.args, job.kwargs, allowed)
    except Exception as error:  # noqa: BLE001 - verified models should run; if not, keep the safe side
        timing, why = None, f"timing failed: {type(error).__name__}: {_first_line(error)}"
    job.time_left = max(0.0, job.time_left - (time.perf_counter() - began))
    job.report.spend("timing", time.perf_counter() - began)
    versus = f" against {against}" if against else ""
    if timing is not None and timing.pays:
        job.report.speedup = timing.speedup if against else (job.report.speedup or 1.0) * timing.speedup
        job.report.speedup_over = against or "the model as given"
        job.report.add("measure", MEASURED, "", f"kept {', '.join(kept)}: {timing.describe()}{versus}")
        return True
    if timing is not None:
        why = f"not faster: {timing.describe()}{versus}"
    _undo_in_report(job.report, first_entry, kept, why)
    return False


def _timing_unfit(job: _Job) -> str | None:
    """Why timing cannot start: it cannot stop before its minimum rounds, and on a model whose call takes seconds
    they alone would overrun the time budget left. None when they fit (timing then stops at the budget)."""
    if job.budget is None:
        return None
    left = job.budget - (time.perf_counter() - job.started)
    needed = 2 * (measure.WARMUP + measure.MIN_ROUNDS) * job.call_seconds
    if needed <= left:
        return None
    return (f"not timed: timing needs about {needed:.1f} s and {max(left, 0.0):.1f} s of the time budget is left "
            "(optimize(time_budget=...) gives more)")


def _undo_in_report(report: Report, first_entry: int, kept: list[str], why: str) -> None:
    """A group that is undone leaves the report (its rewrites and its verification); each of its passes gets one
    line saying why."""
    report.entries[first_entry:] = [
        e for e in report.entries[first_entry:]
        if not (e.action in (REWROTE, VERIFIED) and (e.pass_name in kept or e.pass_name == "verify"))
    ]
    for key in [k for k in report.max_error if set(k.split(", ")) & set(kept)]:
        del report.max_error[key]
    for name in kept:
        report.add(name, ROLLED_BACK, "", why)


class _TraceMismatch(Exception):
    """The traced graphs, before any pass, already compute something else than the model."""


def _run_stage(root, stage: list[Pass], pieces, job: _Job, tolerance, check_start: bool = False) -> nn.Module:
    """Apply a group of passes sharing a tolerance, then verify once. If the result differs, start the group again
    one pass at a time, verifying after each and rolling back the passes that break equality.

    With check_start, a failed verification first checks the starting point (the freshly traced model) and raises
    _TraceMismatch when it is the trace itself that differs from the original model."""
    report = job.report
    start = _Checkpoint(root, pieces, deep=any(p.whole_model and p.edits_modules for p in stage))
    first_entry = len(report.entries)
    root, changed = _apply_all(root, stage, pieces, job, tolerance, verify_each=False)
    if job.reference is None or not changed:
        return root
    outcome = _check(root, job.reference, job.inputs, job.training, tolerance, job.report)
    if not isinstance(outcome, str):
        names = ", ".join(changed)
        report.max_error[names] = outcome.error
        report.add("verify", VERIFIED, "", f"after {names}: {outcome.detail} "
                                           f"(rtol {tolerance.rtol:.0e}, atol {tolerance.atol:.0e})")
        return root
    del report.entries[first_entry:]
    if check_start and pieces:
        start_outcome = _check(start.restore(), job.reference, job.inputs, job.training, tolerance, job.report)
        if isinstance(start_outcome, str):
            raise _TraceMismatch(start_outcome)
    root, _ = _apply_all(start.restore(), stage, pieces, job, tolerance, verify_each=True)
    return root


def _apply_all(root, stage, pieces, job: _Job, tolerance, verify_each: bool):
    changed = []
    report = job.report
    for i, p in enumerate(stage):
        if job.out_of_time(", ".join(q.name for q in stage[i:])):
            break
        refusal = _refusal(p, job.training, job.device_type, pieces)
        if refusal:
            if pieces or p.whole_model:
                report.add(p.name, REFUSED, "", refusal)
            continue
        checkpoint, first_entry = _Checkpoint(root, pieces, deep=p.whole_model and p.edits_modules), len(report.entries)
        try:
            root, modified = _apply(p, root, pieces, job)
        except Exception as error:  # noqa: BLE001 - a failing pass is undone, never fatal
            root = checkpoint.restore()
            _roll_back(report, p.name, first_entry, f"the pass failed: {type(error).__name__}: {_first_line(error)}")
            continue
        if not modified:
            continue
        if verify_each and job.reference is not None:
            outcome = _check(root, job.reference, job.inputs, job.training, tolerance, job.report)
            if isinstance(outcome, str):
                root = checkpoint.restore()
                _roll_back(report, p.name, first_entry, outcome)
                continue
            report.max_error[p.name] = outcome.error
            report.add(p.name, VERIFIED, "", f"{outcome.detail} (rtol {tolerance.rtol:.0e}, atol {tolerance.atol:.0e})")
        changed.append(p.name)
    return root, changed


def _apply(p: Pass, root: nn.Module, pieces: list[str], job: _Job) -> tuple[nn.Module, bool]:
    """Run `p` on the whole model or on each traced piece, each run with its own context."""
    if p.whole_model:
        return _result(p.run(root, _context(p, job, "")), job.report, p.name)
    modified = False
    for path in pieces:
        # Passes edit graphs in place: give them a copy, so the graph installed now stays intact for a rollback.
        new, changed = _result(p.run(copy_graph_module(_piece(root, path)), _context(p, job, path)), job.report, p.name)
        root = _replace(root, path, new)
        modified = modified or changed
    return root, modified


def _context(p: Pass, job: _Job, piece: str) -> PassContext:
    return PassContext(job.report, p.name, job.training, job.device_type, piece=piece, autocast_dtype=job.dtype,
                       out_of_time=job.budget_spent)


def _result(result, report: Report, name: str) -> tuple[nn.Module, bool]:
    if isinstance(result, PassResult):
        return result.graph_module, bool(result.modified)
    # A user pass returning a plain module: it changed something if it reported a rewrite.
    return result, any(e.pass_name == name and e.action == REWROTE for e in report.entries)


# Step 3: the result


def _finish(root: nn.Module, job: _Job, source: nn.Module | None, started: float) -> nn.Module:
    report = job.report
    if job.reference is None and not any(e.pass_name == "verify" and e.action == NOTE for e in report.entries):
        report.add("verify", NOTE, "", "not verified: pass example_inputs to compare against the original model"
                   if not job.args and not job.kwargs else "not verified: verify=False")
    if not job.training and report.passes_applied and source is not None:
        root = make_inference_model(root, source)
        # A user's pass may compute tensors from the original's without saying how: then nothing can be reloaded.
        own_passes_only = all(name in PASSES for name in report.passes_applied)
        root.__dict__[origins.LINKS] = origins.link(root, source) if own_passes_only else None
        compact(root)
    report.transform_seconds = time.perf_counter() - started
    setattr(root, REPORT_ATTRIBUTE, report)
    return root


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else ""


def _check(root, reference, inputs, training, tolerance, report: Report):
    """The comparison with the original model, or a string saying why the optimized model does not match."""
    began = time.perf_counter()
    candidate = _safe_run(root, *inputs, training)
    report.spend("verification", time.perf_counter() - began)
    if isinstance(candidate, str):
        return f"the optimized model fails: {candidate}"
    if candidate.backward_error and not reference.backward_error:
        return f"backward fails: {candidate.backward_error}"
    result = verify.compare(reference.output, candidate.output, tolerance)
    if not result.ok:
        return f"output differs from the original: {result.detail}"
    return result


def _tolerance(default: verify.Tolerance, rtol, atol) -> verify.Tolerance:
    return verify.Tolerance(default.rtol if rtol is None else rtol, default.atol if atol is None else atol,
                            default.low_dtype)


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
    if autocast is None or autocast is False or autocast in (torch.float32, "fp32", "float32"):
        return None
    if autocast is True or autocast == "auto":
        if device_type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        if device_type == "cpu" and torch.ops.mkldnn._is_mkldnn_bf16_supported():
            return torch.bfloat16
        report.add("autocast", REFUSED, "", f"no fast low-precision type on {device_type}: staying in float32")
        return None
    if autocast not in _DTYPE_NAMES:
        raise ValueError(f"dtype must be None, True, 'bf16' or 'fp16' (or the torch dtypes), not {autocast!r}")
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


def _piece(root: nn.Module, path: str) -> fx.GraphModule:
    return _inner(root).get_submodule(path) if path else _inner(root)


class _Checkpoint:
    """What it takes to undo passes. Graph passes work on copies of the graphs, so the root object and the graphs
    installed in it are enough; a whole-model pass that edits modules in place needs a structural copy."""

    def __init__(self, root: nn.Module, pieces: list[str], deep: bool) -> None:
        self.root = _snapshot(root) if deep else root
        self.graphs = {} if deep else {path: _piece(root, path) for path in pieces}
        # channels_last re-lays out weights in place (param.data = ...) to keep Parameter identity for training,
        # and gives the layers new weights in eval mode (the layers are shared with the graphs' copies).
        self.data = [(p, p.data) for p in root.parameters()]
        self.parameters = [(m, dict(m._parameters)) for m in root.modules()]

    def restore(self) -> nn.Module:
        for param, data in self.data:
            param.data = data
        for module, parameters in self.parameters:
            module._parameters.update(parameters)
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
