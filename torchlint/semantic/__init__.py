"""What the code means, in one place: the semantic model every rule asks.

`SemanticModel` (reached as `rule.semantic`) is built lazily, once per file, and answers the questions
rules share: values (`values.py`), modules (`modules.py`), where tensors live (`placement.py`), which loops
run once per step (`loops.py`), DataLoaders and datasets (`loaders.py` and its `loader_*.py` parts,
`datasets.py`), what functions do for their callers (`calls.py`), whether autograd is on (`grad_mode.py`) and what kind of file it is
(`file_kind.py`).
"""
