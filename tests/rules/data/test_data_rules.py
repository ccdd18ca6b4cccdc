"""Data-loading rules (TL101-TL106): name resolution, loader tracing, decision edges and fix output."""

from __future__ import annotations

import textwrap

import libcst as cst

from torchlint.lint.api import lint_source


def findings(code: str, select: list[str], path: str = "train.py") -> list[tuple[int, str]]:
    result = lint_source(textwrap.dedent(code), path, select=select)
    assert result.error is None and not result.notes, (result.error, result.notes)
    return [(f.line, f.code) for f in result.findings]


def fixed(code: str, select: list[str], *, unsafe: bool = True) -> str:
    result = lint_source(textwrap.dedent(code), "train.py", select=select, fix=True, unsafe_fixes=unsafe)
    assert not result.notes, result.notes
    text = result.fixed_text if result.fixed_text is not None else textwrap.dedent(code)
    cst.parse_module(text)
    return text


# -- TL101 ---------------------------------------------------------------------------------------


def test_tl101_resolves_every_import_spelling() -> None:
    code = """
    import torch
    from torch.utils import data
    import torch.utils.data.dataloader as dl_mod
    from torch.utils.data import DataLoader as Loader

    a = data.DataLoader(ds)
    b = dl_mod.DataLoader(ds)
    c = Loader(ds)
    d = torch.utils.data.DataLoader(ds)

    if __name__ == "__main__":
        pass
    """
    assert findings(code, ["TL101"]) == [(7, "TL101"), (8, "TL101"), (9, "TL101"), (10, "TL101")]


def test_tl101_ignores_other_dataloaders() -> None:
    code = """
    from torch_geometric.loader import DataLoader
    from fastai.data.load import DataLoader as FastLoader

    class DataLoader2:
        pass

    a = DataLoader(graphs, batch_size=32)
    b = FastLoader(items)
    """
    assert findings(code, ["TL101"]) == []


def test_tl101_silent_in_tests() -> None:
    code = "from torch.utils.data import DataLoader\nloader = DataLoader(ds)\n"
    assert findings(code, ["TL101"], path="tests/data/check_loader.py") == []
    test_code = "import pytest\n" + code
    assert findings(test_code, ["TL101"], path="pkg/test_loader.py") == []
    assert findings(test_code, ["TL101"], path="pkg/loader_test.py") == []
    assert findings(code, ["TL101"], path="pkg/loader_test.py") == [(2, "TL101")]  # a script named *_test.py
    assert findings(code, ["TL101"], path="pkg/latest.py") == [(2, "TL101")]


def test_tl101_in_memory_datasets_are_silent_unless_collated() -> None:
    code = """
    import torch
    from torch.utils.data import DataLoader, Subset, TensorDataset

    def build(x, y, files, collate):
        ds = TensorDataset(x, y)
        a = DataLoader(Subset(ds, range(10)))
        b = DataLoader([(torch.zeros(3), 0)] * 10)
        c = DataLoader(ds, collate_fn=collate)
        d = DataLoader(files)
        return a, b, c, d
    """
    assert findings(code, ["TL101"]) == [(9, "TL101"), (10, "TL101")]


def test_tl101_explained_zero_is_silent_but_unrelated_comment_is_not() -> None:
    code = """
    from torch.utils.data import DataLoader

    def build(ds):
        a = DataLoader(ds, num_workers=0)  # the LMDB handle cannot be forked
        b = DataLoader(ds, num_workers=0)  # noqa: E501
        # Build the loaders.
        c = DataLoader(ds, num_workers=0)
        # Set to 0 for macOS compatibility
        d = DataLoader(ds, num_workers=0)
        return a, b, c, d
    """
    assert findings(code, ["TL101"]) == [(6, "TL101"), (8, "TL101")]


def test_tl101_fix_adds_os_import_and_keeps_layout() -> None:
    code = """
    from torch.utils.data import DataLoader

    def build(ds):
        return DataLoader(
            ds,
            batch_size=8,
        )
    """
    assert fixed(code, ["TL101"]) == textwrap.dedent(
        """
        import os

        from torch.utils.data import DataLoader

        def build(ds):
            return DataLoader(
                ds,
                batch_size=8,
                num_workers=min(8, os.cpu_count() or 1),
            )
        """
    )
    assert fixed(code, ["TL101"], unsafe=False) == textwrap.dedent(code)


def test_tl101_unguarded_script_gets_advice() -> None:
    code = """
    from torch.utils.data import DataLoader
    loader = DataLoader(ds, batch_size=8)
    for x in loader:
        x = x.cuda()
    """
    result = lint_source(textwrap.dedent(code), "train.py", select=["TL101"])
    [finding] = result.findings
    assert finding.fix is not None and not finding.fix.safe
    assert "__main__" in finding.message
    guarded = textwrap.dedent(code) + 'if __name__ == "__main__":\n    pass\n'
    [finding] = lint_source(guarded, "train.py", select=["TL101"]).findings
    assert "__main__" not in finding.message


def test_tl101_cpu_only_program_is_silent() -> None:
    # An MNIST tutorial that never leaves the CPU: workers would compete with the training threads.
    code = """
    import torch
    from torch.autograd import Variable

    train_loader = torch.utils.data.DataLoader(dataset=train_dataset, batch_size=64, shuffle=True)
    model = Net()

    def train(epoch):
        for batch_idx, (data, target) in enumerate(train_loader):
            data, target = Variable(data), Variable(target)
            loss = model(data).sum()
            loss.backward()
    """
    assert findings(code, ["TL101"]) == []
    # The same program on a GPU is reported, and so is a data module whose loaders are used elsewhere.
    on_gpu = code.replace("model(data)", "model(data.cuda())")
    assert findings(on_gpu, ["TL101"]) == [(5, "TL101")]
    data_module = """
    from torch.utils.data import DataLoader

    def make_loader(dataset):
        return DataLoader(dataset, batch_size=64, shuffle=True)
    """
    assert findings(data_module, ["TL101"]) == [(5, "TL101")]
    # A sign of the GPU only in a comment does not count.
    commented = code.replace("model = Net()", "model = Net()  # .to(device)")
    assert findings(commented, ["TL101"]) == []


def test_tl101_message_is_one_short_line() -> None:
    code = """
    from torch.utils.data import DataLoader
    loader = DataLoader(ds, batch_size=8)
    for x in loader:
        x = x.cuda()
    """
    [finding] = lint_source(textwrap.dedent(code), "train.py", select=["TL101"]).findings
    assert "accelerator waits" not in finding.message and len(finding.message) < 260


# -- TL102 ---------------------------------------------------------------------------------------

TRAIN = """
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
"""


def test_tl102_follows_loader_through_helpers_parameters_and_attributes() -> None:
    code = TRAIN + textwrap.dedent(
        """
        def loaders(a, b):
            train = DataLoader(a, num_workers=4)
            val = DataLoader(b, num_workers=4)
            return train, val

        def run_epoch(model, loader):
            for i, (x, y) in tqdm(enumerate(loader)):
                model(x.to(device))

        class Fit:
            def __init__(self, loader):
                self.loader = loader

            def go(self, model):
                for batch in self.loader:
                    model(batch["x"].cuda())

        def main(model, a, b):
            train, val = loaders(a, b)
            for epoch in range(3):
                run_epoch(model, train)
            Fit(val).go(model)
        """
    )
    assert findings(code, ["TL102"]) == [(9, "TL102"), (10, "TL102")]


def test_tl102_needs_an_accelerator_transfer_of_the_batch() -> None:
    code = TRAIN + textwrap.dedent(
        """
        def run(model, ds, other):
            loader = DataLoader(ds, num_workers=4)
            weights = torch.ones(3)
            for x, y in loader:
                model(x.to(torch.float16), y.to("cpu"), weights.to(device), x.to(dtype=torch.float32))
            for x, y in other:
                model(x.to(device))
        """
    )
    assert findings(code, ["TL102"]) == []


def test_tl102_zip_and_helper_transfers() -> None:
    code = TRAIN + textwrap.dedent(
        """
        def run(model, a, b, utils):
            left = DataLoader(a, num_workers=4)
            right = DataLoader(b, num_workers=4)
            for (xa, ya), (xb, yb) in zip(left, right):
                batch = utils.batch_to_device(xb, device)
                model(xa, batch)
        """
    )
    assert findings(code, ["TL102"]) == [(10, "TL102")]


def test_tl102_in_memory_tensors_without_workers_reported_where_they_feed_a_training_step() -> None:
    code = TRAIN + textwrap.dedent(
        """
        from torch.utils.data import TensorDataset

        def run(model, x, y):
            small = DataLoader(TensorDataset(x, y), batch_size=64)
            on_gpu = DataLoader(TensorDataset(x.cuda(), y.cuda()), batch_size=64, num_workers=2)
            for xb, yb in small:
                model(xb.to(device)).sum().backward()
            for xb, yb in on_gpu:
                model(xb.to(device)).sum().backward()

        def predict(model, x):
            results = []
            for xb in DataLoader(TensorDataset(x), batch_size=1024):
                results.append(model(xb[0].to(device)).cpu().numpy())
            return results
        """
    )
    # pinning pays without workers when the copy can overlap a training step; GPU tensors cannot be
    # pinned; a predict loop reads each result back, so a main-thread pin has nothing to overlap
    assert findings(code, ["TL102"]) == [(len(TRAIN.splitlines()) + 5, "TL102")]


def test_tl102_fix_keeps_indentation_of_multiline_call() -> None:
    code = TRAIN + textwrap.dedent(
        """
        class Trainer:
            def fit(self, ds, model):
                loader = DataLoader(
                    ds,
                    num_workers=4,
                )
                for x, y in loader:
                    model(x.to(device))
        """
    )
    assert "            num_workers=4,\n            pin_memory=True,\n        )\n" in fixed(code, ["TL102"], unsafe=False)


# -- TL103 ---------------------------------------------------------------------------------------


def test_tl103_reports_each_synchronous_copy_and_fixes_it() -> None:
    code = TRAIN + textwrap.dedent(
        """
        def run(model, ds):
            loader = DataLoader(ds, num_workers=4, pin_memory=True)
            for x, y in loader:
                x, y = x.to(device), y.cuda()
                z = x.cuda(0, True)
                model(x, y, z)
        """
    )
    assert findings(code, ["TL103"]) == [(11, "TL103"), (11, "TL103")]
    assert "x, y = x.to(device, non_blocking=True), y.cuda(non_blocking=True)" in fixed(code, ["TL103"], unsafe=False)


# -- TL104 ---------------------------------------------------------------------------------------


def test_tl104_argparse_default_gets_a_guarded_fix() -> None:
    code = """
    import argparse
    from torch.utils.data import DataLoader

    parser = argparse.ArgumentParser()
    parser.add_argument("-j", "--workers", default=4, type=int)

    def train(loader):
        for x in loader:
            pass

    def main(ds):
        args = parser.parse_args()
        loader = DataLoader(ds, num_workers=args.workers)
        for epoch in range(10):
            train(loader)
    """
    assert findings(code, ["TL104"]) == [(14, "TL104")]
    # split, as ruff's formatter would, since the line no longer fits in 88 columns
    assert "DataLoader(\n        ds, num_workers=args.workers, persistent_workers=args.workers > 0\n    )" in fixed(
        code, ["TL104"], unsafe=False
    )


def test_tl104_needs_workers_and_a_repeated_pass() -> None:
    code = """
    import os
    from torch.utils.data import DataLoader

    def main(ds, epochs, args):
        once = DataLoader(ds, num_workers=4)
        for x in once:
            pass
        unknown = DataLoader(ds, num_workers=args.workers)
        cpu = DataLoader(ds, num_workers=min(8, os.cpu_count() or 1))
        for epoch in range(epochs):
            for x in unknown:
                pass
            for x in cpu:
                pass
    """
    assert findings(code, ["TL104"]) == [(10, "TL104")]


def test_tl104_silent_where_a_restart_is_noise() -> None:
    code = """
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    def validate(model, valset):
        val_loader = DataLoader(valset, num_workers=2)  # a new loader on every call
        for x, y in val_loader:
            model(x)

    def main(model, optimizer, trainset, valset, epochs):
        toy = DataLoader(TensorDataset(torch.randn(10, 3)), batch_size=5, num_workers=2)
        train_loader = DataLoader(trainset, batch_size=64, num_workers=4)
        eval_loader = DataLoader(valset, batch_size=64, num_workers=4)
        for epoch in range(epochs):
            for (x,) in toy:
                pass
            validate(model, valset)
            for step, (x, y) in enumerate(train_loader):
                model(x).sum().backward()
                optimizer.step()
                if step % 1000 == 0:
                    for vx, vy in eval_loader:  # an evaluation every thousand steps
                        model(vx)
    """
    assert findings(code, ["TL104"]) == [(12, "TL104")]


# -- TL105 ---------------------------------------------------------------------------------------


def test_tl105_shadowed_builtins_and_non_loaders_are_silent() -> None:
    code = """
    def run(model, train_loader, rows, steps):
        for step in range(steps):
            a = next(iter(train_loader))
            b = next(iter(rows))
            model(a, b).backward()

    def shadowed(model, train_loader, steps):
        def next(x):
            return x
        for step in range(steps):
            model(next(iter(train_loader))).backward()
    """
    assert findings(code, ["TL105"]) == [(4, "TL105")]


def test_tl105_silent_when_next_iter_is_the_loops_iterable() -> None:
    code = """
    def show(model, train_loader, epochs):
        for sample in next(iter(train_loader)):  # evaluated once, before the first trip
            print(sample.shape)
        for epoch in range(epochs):
            for step in range(100):
                model(next(iter(train_loader))).backward()
    """
    assert findings(code, ["TL105"]) == [(7, "TL105")]


def test_tl105_resolved_dataloader_with_any_name() -> None:
    code = """
    from torch.utils.data import DataLoader

    def run(model, ds):
        source = DataLoader(ds, batch_size=4, shuffle=True, num_workers=2)
        while True:
            x = next(iter(source))
            model(x).backward()
    """
    assert findings(code, ["TL105"]) == [(7, "TL105")]


# -- TL106 ---------------------------------------------------------------------------------------


def test_tl106_fix_safety_depends_on_what_is_known() -> None:
    code = """
    from torch.utils.data import DataLoader, TensorDataset

    def count(x, y, stream, val_loader):
        known = DataLoader(TensorDataset(x, y))
        unknown = DataLoader(stream)
        return len(list(known)), len(list(unknown)), len(list(val_loader))
    """
    result = lint_source(textwrap.dedent(code), "train.py", select=["TL106"])
    fixes = [(f.fix.safe if f.fix else None) for f in result.findings]
    assert fixes == [True, False, None]
    assert "return len(known), len(unknown), len(list(val_loader))" in fixed(code, ["TL106"])
    assert "return len(known), len(list(unknown)), len(list(val_loader))" in fixed(code, ["TL106"], unsafe=False)


def test_tl101_loader_read_once_for_a_look_is_silent() -> None:
    code = """
    from torch.utils.data import DataLoader

    def f(ds, model, show):
        sample = DataLoader(ds, batch_size=16, shuffle=True)
        show(next(iter(sample)))
        loader = DataLoader(ds, batch_size=16, shuffle=True)
        show(next(iter(loader)))
        for x, y in loader:
            model(x.cuda())
    """
    assert findings(code, ["TL101"]) == [(7, "TL101")]


def test_tl101_pretokenized_hf_dataset_needs_an_eager_map_or_torch_format() -> None:
    code = """
    from torch.utils.data import DataLoader

    def loaders(raw, tok, model, collate):
        eager = raw.map(tok, batched=True)
        lazy = raw.map(tok)
        a = DataLoader(eager["train"], batch_size=8)
        b = DataLoader(lazy, batch_size=8)
        c = DataLoader(raw.with_format("torch"), batch_size=8)
        d = DataLoader(raw.with_format("arrow"), batch_size=8)
        e = DataLoader(eager, batch_size=8, collate_fn=collate)
        for loader in (a, b, c, d, e):
            for batch in loader:
                model(batch["input_ids"].cuda()).backward()
    """
    assert findings(code, ["TL101"]) == [(8, "TL101"), (10, "TL101"), (11, "TL101")]


def test_tl101_hf_dataset_decoded_on_read_is_reported() -> None:
    template = """
    from torch.utils.data import DataLoader

    def loaders(raw, tok, model):
        ds = raw.map(tok, batched=True)
        {line}
        for batch in DataLoader(ds, batch_size=8):
            model(batch["input_ids"].cuda()).backward()
    """
    assert findings(template.format(line="ds.set_format('torch')"), ["TL101"]) == []
    for line in (
        "ds.set_transform(augment)",
        "raw = load_dataset('text', streaming=True)",
        "ds = ds.cast_column('audio', Audio(sampling_rate=16000))",
        "ds.set_format('torch', columns=['image', 'label'])",
    ):
        assert findings(template.format(line=line), ["TL101"]) == [(7, "TL101")], line


def test_tl101_hf_set_format_in_place_on_a_parameter_is_not_followed() -> None:
    code = """
    from torch.utils.data import DataLoader

    def loader(ds, model):
        ds.set_format("torch")
        for batch in DataLoader(ds, batch_size=8):
            model(batch["input_ids"].cuda()).backward()
    """
    assert findings(code, ["TL101"]) == [(6, "TL101")]


def test_tl101_loader_never_read_is_silent_only_when_surely_unread() -> None:
    program = """
    from torch.utils.data import DataLoader

    train_loader = DataLoader(train_ds, batch_size=8)
    test_loader = DataLoader(test_ds, batch_size=8)
    for x, y in train_loader:
        model(x.cuda()).backward()
    """
    assert findings(program, ["TL101"]) == [(4, "TL101")]
    # A module that only builds loaders: others may import them.
    library = """
    from torch.utils.data import DataLoader

    test_loader = DataLoader(test_ds, batch_size=8)
    """
    assert findings(library, ["TL101"]) == [(4, "TL101")]
    # Named in a string (`__all__`), read through locals(), returned, passed on: used.
    for code, line in (
        ("__all__ = ['test_loader']\ntest_loader = DataLoader(ds)\nfor b in loader: b.cuda()\n", 3),
        ("def f(ds, run):\n    loader = DataLoader(ds)\n    return locals()\n", 3),
        ("def f(ds, run):\n    loader = DataLoader(ds)\n    run(loader, 'cuda')\n", 3),
    ):
        text = "from torch.utils.data import DataLoader\n" + code
        assert findings(text, ["TL101"]) == [(line, "TL101")], code


def test_tl101_dataset_given_a_device_is_silent() -> None:
    template = """
    import torch
    from torch.utils.data import DataLoader
    from mydata import SpectrogramDataset

    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")

    def main(args, model):
        dataset = SpectrogramDataset(args.data, args.labels, {arg})
        train_ds, val_ds = torch.utils.data.random_split(dataset, [0.8, 0.2])
        for x, y in DataLoader(train_ds, batch_size=8):
            model(x.to(device)).backward()
    """
    for arg in ("device", "device=device", "args.device", "device='cuda'", "torch.device('cuda')"):
        assert findings(template.format(arg=arg), ["TL101"]) == [], arg
    for arg in ("args.rank", "device='cpu'", "device=None", "torch.device('cpu')", "transform"):
        assert findings(template.format(arg=arg), ["TL101"]) == [(11, "TL101")], arg


def test_tl102_older_and_wrapped_spellings() -> None:
    code = TRAIN + textwrap.dedent(
        """
        from torch.autograd import Variable

        def run(ds, model):
            loader = DataLoader(ds, num_workers=2)
            with tqdm(loader) as bar:
                for x, y in bar:
                    model(Variable(x).cuda())
        """
    )
    assert findings(code, ["TL102"]) == [(11, "TL102")]


def test_tl105_new_loader_each_trip_is_silent() -> None:
    code = """
    def probe(make_loader, configs, model):
        for config in configs:
            loader = make_loader(config)
            model(next(iter(loader))).backward()
    """
    assert findings(code, ["TL105"]) == []


def test_positional_settings_are_fixed_in_place() -> None:
    code = """
    import os
    from torch.utils.data import DataLoader

    def main(ds, model, device):
        loader = DataLoader(ds, 32, True, None, None, 4, None, False)
        for x, y in loader:
            model(x.to(device))
        single = DataLoader(ds, 32, True, None, None, 0)
        return single
    """
    text = fixed(code, ["TL101", "TL102"])
    assert "DataLoader(ds, 32, True, None, None, 4, None, True)" in text
    assert "DataLoader(ds, 32, True, None, None, min(8, os.cpu_count() or 1))" in text


# -- DataLoader settings through **kwargs, loaders in dicts, casts and copies (TL102/TL103) ---------


def _lines(code: str, select: list[str]) -> list[int]:
    return [line for line, _ in findings(TRAIN + textwrap.dedent(code), select)]


def test_kwargs_dict_literal_and_updates_decide_pin_memory() -> None:
    pinned_later = """
    def main(ds, args):
        train_kwargs = {"batch_size": args.batch_size}
        if args.cuda:
            cuda_kwargs = {"num_workers": 1, "pin_memory": True}
            train_kwargs.update(cuda_kwargs)
        loader = DataLoader(ds, **train_kwargs)
        for x, y in loader:
            x = x.to(device)
    """
    assert _lines(pinned_later, ["TL103"]) == [15]
    assert _lines(pinned_later, ["TL102"]) == []
    by_keyword = pinned_later.replace("train_kwargs.update(cuda_kwargs)", "train_kwargs.update(pin_memory=True)")
    assert _lines(by_keyword, ["TL103"]) == [15]
    by_item = pinned_later.replace("train_kwargs.update(cuda_kwargs)", 'train_kwargs["pin_memory"] = True')
    assert _lines(by_item, ["TL103"]) == [15]
    conditional = """
    def main(ds, args):
        kwargs = {"num_workers": 1, "pin_memory": True} if args.cuda else {}
        for x, y in DataLoader(ds, batch_size=8, **kwargs):
            x = x.cuda()
    """
    assert _lines(conditional, ["TL103"]) == [11]


def test_kwargs_undecidable_stay_silent() -> None:
    escapes = """
    def main(ds, tune):
        kwargs = {"num_workers": 4}
        tune(kwargs)
        for x, y in DataLoader(ds, **kwargs):
            x = x.to(device)
    """
    assert _lines(escapes, ["TL102", "TL103"]) == []
    popped = escapes.replace("tune(kwargs)", 'kwargs.pop("pin_memory", None)')
    assert _lines(popped, ["TL102", "TL103"]) == []
    parameter = """
    def main(ds, **kwargs):
        for x, y in DataLoader(ds, num_workers=4, **kwargs):
            x = x.to(device)
    """
    assert _lines(parameter, ["TL102", "TL103"]) == []
    computed_key = escapes.replace("tune(kwargs)", "kwargs[name] = True")
    assert _lines(computed_key, ["TL102", "TL103"]) == []
    rebound = escapes.replace("tune(kwargs)", "kwargs = load_config()")
    assert _lines(rebound, ["TL102", "TL103"]) == []


def test_kwargs_without_pin_memory_reported_by_tl102_with_a_fix_only_when_absent() -> None:
    code = """
    def main(ds):
        kwargs = dict(num_workers=4, shuffle=True)
        for x, y in DataLoader(ds, **kwargs):
            x = x.to(device)
    """
    assert _lines(code, ["TL102"]) == [10]
    assert "DataLoader(ds, **kwargs, pin_memory=True)" in fixed(TRAIN + textwrap.dedent(code), ["TL102"])
    explicit_false = code.replace("shuffle=True", "pin_memory=False")
    result = lint_source(TRAIN + textwrap.dedent(explicit_false), "train.py", select=["TL102"])
    [finding] = result.findings
    assert finding.fix is None  # a second pin_memory would be a TypeError
    workers_may_be_zero = code.replace("num_workers=4", "num_workers=0 if debug else 4")
    assert _lines(workers_may_be_zero, ["TL102"]) == [10]  # not a literal: decided like num_workers=args.workers
    no_workers = code.replace("num_workers=4, ", "")
    assert _lines(no_workers, ["TL102"]) == [10]  # pinning pays without workers too when batches go to the GPU


def test_loaders_in_a_dict_iterated_by_key() -> None:
    code = """
    dataloaders = {x: DataLoader(image_datasets[x], batch_size=4, num_workers=4) for x in ["train", "val"]}

    def train_model(model):
        for phase in ["train", "val"]:
            for inputs, labels in dataloaders[phase]:
                inputs = inputs.to(device)
    """
    assert _lines(code, ["TL102"]) == [8]
    literal = """
    def main(train_set, val_set):
        loaders = {"train": DataLoader(train_set, num_workers=4), "val": DataLoader(val_set, num_workers=4)}
        loaders["test"] = DataLoader(val_set, num_workers=2)
        for x, y in loaders["val"]:
            x = x.cuda()
    """
    assert _lines(literal, ["TL102"]) == [9]  # `loaders["val"]` reads the "val" entry only
    any_entry = literal.replace('loaders["val"]', "loaders[split]")
    assert _lines(any_entry, ["TL102"]) == [9, 9, 10]
    filled_elsewhere = literal.replace('loaders["test"] = DataLoader(val_set, num_workers=2)', "loaders.update(extra)")
    assert _lines(filled_elsewhere, ["TL102"]) == []
    other_object = """
    def main(train_set, registry):
        loader = DataLoader(train_set, num_workers=4)
        for x, y in registry["train"]:
            x = x.cuda()
    """
    assert _lines(other_object, ["TL102"]) == []


def test_cast_to_a_cuda_tensor_type_and_copy_into_a_cuda_buffer_are_transfers() -> None:
    cast = """
    Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor

    def main(ds):
        for batch in DataLoader(ds, num_workers=4):
            real = batch["A"].type(Tensor)
            label = batch["B"].type("torch.cuda.LongTensor")
    """
    assert _lines(cast, ["TL102"]) == [11]
    assert _lines(cast, ["TL103"]) == []  # TL103 rewrites only .to() / .cuda()
    on_host = cast.replace("torch.cuda.FloatTensor if torch.cuda.is_available() else ", "").replace("torch.cuda.LongTensor", "torch.LongTensor")
    assert _lines(on_host, ["TL102"]) == []
    copy = """
    def main(ds, opt):
        buffer = torch.FloatTensor(64, 3, 64, 64)
        label = torch.zeros(64, device="cuda")
        if opt.cuda:
            buffer = buffer.cuda()
        for images, labels in DataLoader(ds, num_workers=2):
            buffer.data.resize_(images.size()).copy_(images)
            label.copy_(labels)
    """
    assert _lines(copy, ["TL102"]) == [13]
    host_buffer = copy.replace("            buffer = buffer.cuda()\n", "            buffer = buffer.pin_memory()\n").replace(
        'device="cuda"', 'device="cpu"'
    )
    assert _lines(host_buffer, ["TL102"]) == []


def test_tl101_iterable_dataset_is_reported_without_a_fix() -> None:
    source = textwrap.dedent(
        """
        import torch
        from torch.utils.data import DataLoader, IterableDataset

        class Stream(IterableDataset):
            def __iter__(self):
                yield from open("data.txt")

        def train(model, device):
            for x in DataLoader(Stream(), batch_size=8):
                model(x.to(device)).backward()
        """
    )
    result = lint_source(source, select=["TL101"], unsafe_fixes=True)
    assert [(f.line, f.code) for f in result.findings] == [(10, "TL101")]
    assert "IterableDataset" in result.findings[0].message and "get_worker_info" in result.findings[0].message
    assert result.findings[0].fix is None and result.fixed_text is None


def test_tl103_explicit_non_blocking_false_is_reported_not_changed() -> None:
    source = textwrap.dedent(
        """
        import torch
        from torch.utils.data import DataLoader

        def train(model, ds, device):
            for x, y in DataLoader(ds, num_workers=4, pin_memory=True):
                x = x.to(device, non_blocking=False)
                y = y.to(device)
                model(x).backward()
        """
    )
    found = lint_source(source, select=["TL103"]).findings
    assert [(f.line, f.fix is None) for f in found] == [(7, True), (8, False)]
    assert "blocking on purpose" in found[0].message
    fixed = lint_source(source, select=["TL103"], unsafe_fixes=True).fixed_text
    assert "x.to(device, non_blocking=False)" in fixed and "y.to(device, non_blocking=True)" in fixed


def test_tl101_reads_settings_given_as_a_dict_of_the_file() -> None:
    code = """
    def main(ds, model):
        params = {"batch_size": 16, "shuffle": True, "drop_last": True}
        loader = DataLoader(ds, **params)
        for x, y in loader:
            model(x.to(device)).sum().backward()
    """
    assert _lines(code, ["TL101"]) == [10]
    both = fixed(TRAIN + textwrap.dedent(code), ["TL101", "TL102"])
    compact = "".join(both.split()).replace(",)", ")")
    assert "DataLoader(ds,**params,num_workers=min(8,os.cpu_count()or1),pin_memory=True)" in compact
    assert findings(both, ["TL101", "TL102"]) == []
    zero = code.replace('"drop_last": True', '"num_workers": 0')
    [finding] = lint_source(TRAIN + textwrap.dedent(zero), "train.py", select=["TL101"]).findings
    assert finding.fix is None  # a second num_workers would be a TypeError
    explained = code.replace("DataLoader(ds, **params)", "DataLoader(ds, num_workers=0, **params)  # h5py handle")
    assert _lines(explained, ["TL101"]) == []
    assert _lines(explained.replace("  # h5py handle", ""), ["TL101"]) == [10]
    # workers set in the dict, in an update, or a dict the file cannot see: silent
    assert _lines(code.replace('"drop_last": True', '"num_workers": 4'), ["TL101"]) == []
    updated = code.replace("        loader =", '        params.update(num_workers=4)\n        loader =')
    assert _lines(updated, ["TL101"]) == []
    assert _lines(code.replace("params = {", "params = load_config() or {"), ["TL101"]) == []
    handed_in = """
    def main(ds, model, **params):
        for x, y in DataLoader(ds, **params):
            model(x.to(device)).sum().backward()
    """
    assert _lines(handed_in, ["TL101"]) == []


def test_tl101_and_tl102_fixes_compose_in_one_run() -> None:
    code = """
    import torch
    from torch.utils.data import DataLoader

    def main(dataset, model, device):
        loader = DataLoader(dataset, batch_size=32, shuffle=True)
        for x, y in loader:
            model(x.to(device)).sum().backward()

    if __name__ == "__main__":
        main(None, None, torch.device("cuda"))
    """
    assert findings(code, ["TL101", "TL102"]) == [(6, "TL101"), (6, "TL102")]
    both = fixed(code, ["TL101", "TL102"])
    flat = " ".join(both.split()).replace("( ", "(").replace(", )", ")")
    assert "DataLoader(dataset, batch_size=32, shuffle=True, num_workers=min(8, os.cpu_count() or 1), pin_memory=True)" in flat
    assert "import os" in both
    assert findings(both, ["TL101", "TL102"]) == []
    # without --unsafe-fixes only the safe one applies
    safe_only = fixed(code, ["TL101", "TL102"], unsafe=False)
    assert "DataLoader(dataset, batch_size=32, shuffle=True, pin_memory=True)" in safe_only
    assert [code for _, code in findings(safe_only, ["TL101", "TL102"])] == ["TL101"]


def test_tl102_follows_batches_through_next_generators_and_helpers() -> None:
    code = """
    def loop_forever(loader):
        while True:
            for batch in loader:
                yield batch

    def train(dataset, model, steps):
        loader = DataLoader(dataset, batch_size=32, num_workers=4)
        stream = loop_forever(loader)
        for step in range(steps):
            model(next(stream)[0].float().cuda()).backward()
    """
    assert _lines(code, ["TL102"]) == [14]
    outside_a_loop = code.replace("for step in range(steps):\n        ", "if steps:\n        ")
    assert _lines(outside_a_loop, ["TL102"]) == []  # one batch, read once
    other_generator = code.replace("for batch in loader:", "for batch in range(3):")
    assert _lines(other_generator, ["TL102"]) == []
    helper = """
    def to_gpu(images, labels):
        return images.cuda(), labels

    def train(dataset, model):
        loader = DataLoader(dataset, batch_size=32, num_workers=4)
        for x, y in loader:
            x, y = to_gpu(x, y)
    """
    assert _lines(helper, ["TL102"]) == [12]
    labels_only = helper.replace("images.cuda(), labels", "images, labels.cpu()")
    assert _lines(labels_only, ["TL102"]) == []


def test_batches_followed_through_tqdm_of_enumerate_and_loops_over_their_items() -> None:
    code = """
    import torch
    from torch.utils.data import DataLoader
    from tqdm import tqdm

    class Trainer:
        def __init__(self, dataset, device):
            self.device = device
            self.loader = DataLoader(dataset, batch_size=8, num_workers=4, pin_memory=True)

        def fit(self, model, dataset):
            for inputs in self.loader:
                self.process_batch(model, inputs)
            plain = DataLoader(dataset, batch_size=8, num_workers=4)
            with tqdm(enumerate(plain)) as bar:
                for _, (x, y) in bar:
                    model(x.to(self.device)).sum().backward()

        def process_batch(self, model, inputs):
            for key, value in inputs.items():
                inputs[key] = value.to(self.device)
            for key in ("a", "b"):
                print(key.to(self.device))
            return model(inputs)
    """
    # a dict batch moved item by item in a method it is handed to; a loop over other names: silent
    assert findings(code, ["TL102", "TL103"]) == [(14, "TL102"), (21, "TL103")]


def test_tl101_hf_dataset_numericalised_ahead_through_a_helper_with_a_padding_collate_factory() -> None:
    template = """
    import torch
    import datasets
    from torch.utils.data import DataLoader

    def get_collate_fn(pad_index):
        def collate_fn(batch):
            ids = torch.nn.utils.rnn.pad_sequence([i["ids"] for i in batch], padding_value=pad_index)
            return {{"ids": ids, "label": torch.stack([i["label"] for i in batch])}}
        return collate_fn

    def get_data_loader(dataset, batch_size, pad_index):
        return DataLoader(dataset, batch_size=batch_size, collate_fn=get_collate_fn(pad_index))

    train_data = datasets.load_dataset("imdb", split="train")
    train_data = train_data.map(numericalize, {keywords})
    train_data = train_data.with_format(type="torch", columns=["ids", "label"])
    loader = get_data_loader(train_data, 32, 0)
    for batch in loader:
        model(batch["ids"].cuda()).backward()
    """
    # `fn_kwargs` says Hugging Face's eager map: a lookup per item, a collate that pads: silent
    assert findings(template.format(keywords='fn_kwargs={"vocab": vocab}'), ["TL101"]) == []
    # a `.map(fn)` that may be lazy, and a collate factory whose function decodes: reported
    unformatted = template.replace('train_data.with_format(type="torch", columns=["ids", "label"])', "train_data")
    assert findings(unformatted.format(keywords=""), ["TL101"]) == [(13, "TL101")]
    assert findings(unformatted.format(keywords="num_proc=4"), ["TL101"]) == []
    decoding = template.replace("ids = torch.nn", "raw = [decode(i) for i in batch]\n            ids = torch.nn")
    assert findings(decoding.format(keywords='fn_kwargs={"vocab": vocab}'), ["TL101"]) == [(14, "TL101")]


def test_tl102_batches_read_every_so_many_steps_or_one_per_key_press_are_not_per_step() -> None:
    code = """
    import cv2
    import torch
    from torch.utils.data import DataLoader

    def train(model, train_set, test_set, device):
        loader = DataLoader(train_set, batch_size=64, num_workers=4)
        test_loader = DataLoader(test_set, batch_size=64, num_workers=4)
        every_step = DataLoader(test_set, batch_size=64, num_workers=4)
        test_iter, step_iter = iter(test_loader), iter(every_step)
        for step, (x, y) in enumerate(loader):
            model(x.to(device)).sum().backward()
            if step % 100 == 0:
                test_x, _ = next(test_iter)
                model(test_x.to(device))
            extra, _ = next(step_iter)
            model(extra.to(device))

    def show(model, dataset):
        viewer = DataLoader(dataset, batch_size=1, num_workers=1)
        for data in viewer:
            cv2.imshow("img", model(data.cuda()))
            cv2.waitKey(0)
        video = DataLoader(dataset, batch_size=1, num_workers=1)
        for data in video:
            cv2.imshow("img", model(data.cuda()))
            cv2.waitKey(1)
    """
    # a read under a logging interval, a viewer that waits for a key: silent; a read every step, a
    # video shown as fast as it comes: reported
    assert findings(code, ["TL102"]) == [(7, "TL102"), (9, "TL102"), (24, "TL102")]


def test_tl101_silent_for_a_loader_only_shown_one_batch_per_key_press() -> None:
    code = """
    import matplotlib.pyplot as plt
    import torch
    from torch.utils.data import DataLoader

    if __name__ == "__main__":
        shown = DataLoader(dataset, batch_size=4)
        for images, labels in shown:
            plt.imshow(images[0].cuda().cpu().numpy())
            plt.show()
        timed = DataLoader(dataset, batch_size=4)
        for images, labels in timed:
            plt.imshow(images[0].cuda().cpu().numpy())
            plt.show(block=False)
    """
    assert findings(code, ["TL101"]) == [(11, "TL101")]


def test_tl103_a_name_already_moved_in_the_same_block_copies_nothing() -> None:
    code = """
    from torch.utils.data import DataLoader

    def validate(model, dataset):
        loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
        for input, target in loader:
            target = target.cuda()
            target_var = target.cuda()
            if model.training:
                input = input.cuda(non_blocking=True)
            input_var = input.cuda()
            model(input_var, target_var)
    """
    # a second `.cuda()` of a name moved two lines above: silent; one moved only on some path: reported
    assert findings(code, ["TL103"]) == [(7, "TL103"), (11, "TL103")]


def test_tl101_dataset_held_in_a_self_attribute() -> None:
    code = """
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    from torchvision import datasets

    class Experiment:
        def __init__(self, x, y, root):
            self.train_set = TensorDataset(x, y)
            self.image_set = datasets.ImageFolder(root)

        def run(self, model):
            in_memory = DataLoader(self.train_set, batch_size=64)
            decoded = DataLoader(self.image_set, batch_size=64)
            for loader in (in_memory, decoded):
                for images, labels in loader:
                    model(images.cuda()).sum().backward()
    """
    assert findings(code, ["TL101"]) == [(13, "TL101")]
