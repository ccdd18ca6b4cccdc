"""Optimizer tests run single-threaded: small inputs gain nothing from threads, and the suite shares the machine."""

try:
    import torch
except ImportError:  # the optimizer tests skip themselves without torch
    torch = None

if torch is not None:
    torch.set_num_threads(1)
