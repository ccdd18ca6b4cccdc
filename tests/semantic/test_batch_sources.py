"""Where a batch comes from, whatever it is called: loaders handed over as parameters, dict batches and
helpers that unpack them, modules known by what is done to them, torch.nn layers that return one tensor."""

from __future__ import annotations

import textwrap

import libcst as cst

from tests.semantic.semantic_probe import ask
from torchlint.semantic.loader_arguments import passed_loader


def _batch(model, call: cst.Call, arg: cst.BaseExpression) -> bool:  # type: ignore[no-untyped-def]
    samples = model.per_sample_loops
    return samples.batches.is_batch(samples.scopes.of(call), arg, sequence=True)


def test_a_parameter_every_caller_passes_a_loader_is_a_loader() -> None:
    source = textwrap.dedent(
        """
        import torch
        from torch.utils.data import DataLoader

        def run(m, source):
            for a, b in source:
                probe(source)

        class Trainer:
            def __init__(self, source):
                self.source = source

            def epoch(self):
                probe(self.source)

        def other(source):
            probe(source)

        loader = DataLoader(dataset, batch_size=8)
        run(net, loader)
        Trainer(loader).epoch()
        other([1, 2, 3])
        """
    )
    answers = ask(source, lambda model, call, arg: passed_loader(model.context, arg))
    assert answers == ["True", "True", "False"]


def test_parts_of_a_dict_batch_or_of_a_helper_given_the_batch_are_batches() -> None:
    source = textwrap.dedent(
        """
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(dataset, batch_size=8)
        for batch in loader:
            y = batch["label"].to(device)
            probe(y)
            a, b = to_device(batch, device)
            probe(b)
            c = [batch["label"]]
            probe(c)
        """
    )
    def part(model, call, arg):  # type: ignore[no-untyped-def]
        samples = model.per_sample_loops
        scope = samples.scopes.of(call)
        return samples.batches.is_batch(scope, arg) and samples.batches.loader_component(scope, arg)

    assert ask(source, part) == ["True", "True", "False"]


def test_a_module_is_known_by_what_is_done_to_it_and_layers_return_one_tensor() -> None:
    source = textwrap.dedent(
        """
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.trunk = nn.Sequential(nn.Flatten(), nn.Linear(8, 4))
                self.rnn = nn.LSTM(4, 4)

            def forward(self, x, s):
                z = self.trunk(x)
                probe(z)
                probe(x)
                h = self.rnn(s)
                probe(h)

        def evaluate(clf, source):
            clf.eval()
            for a, b in source:
                out = clf(a)
                probe(out)

        evaluate(Head(), DataLoader(dataset, batch_size=8))
        """
    )
    assert ask(source, _batch) == ["True", "True", "False", "False"]
    outputs = ask(source, lambda model, call, arg: model.per_sample_loops.batches.model_output(
        model.per_sample_loops.scopes.of(call), arg))
    assert outputs[3] == "True"
