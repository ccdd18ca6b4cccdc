"""Walking a model's inputs and outputs: tensors inside tuples, lists, dicts (OrderedDict too), named tuples and
dataclasses (Hugging Face ModelOutput-like objects). Containers keep their exact type when rebuilt."""

from __future__ import annotations

import copy
import dataclasses
from typing import Callable, Iterator

import torch


def is_namedtuple(value) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def is_dataclass_instance(value) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def map_tensors(fn: Callable[[torch.Tensor], torch.Tensor], value):
    """`value` with `fn` applied to every tensor it holds; containers are rebuilt with their own type, anything
    else is returned as is. A tensor held twice (a ModelOutput's field and its dict entry, a tied output) is
    mapped once, and both places get the one result."""
    done: dict[int, torch.Tensor] = {}

    def once(tensor):
        if id(tensor) not in done:
            done[id(tensor)] = fn(tensor)
        return done[id(tensor)]

    return _map(once, value)


def _map(fn, value):
    if isinstance(value, torch.Tensor):
        return fn(value)
    if is_namedtuple(value):
        return type(value)(*(_map(fn, v) for v in value))
    if type(value) in (tuple, list):
        return type(value)(_map(fn, v) for v in value)
    if is_dataclass_instance(value):
        # Field by field on a shallow copy: dataclasses with init=False fields or a custom __init__ cannot be
        # rebuilt through their constructor.
        new = copy.copy(value)
        for f in dataclasses.fields(value):
            object.__setattr__(new, f.name, _map(fn, getattr(value, f.name)))
        if isinstance(value, dict):  # ModelOutput is a dataclass and an OrderedDict at once
            for key in list(new.keys()):
                dict.__setitem__(new, key, _map(fn, value[key]))
        return new
    if isinstance(value, dict):
        try:
            return type(value)((k, _map(fn, v)) for k, v in value.items())
        except TypeError:  # a dict subclass whose constructor takes other arguments
            return value
    return value


def tensors(value) -> Iterator[torch.Tensor]:
    """Every tensor in `value`, in order."""
    found: list[torch.Tensor] = []

    def collect(t):
        found.append(t)
        return t

    map_tensors(collect, value)
    return iter(found)
