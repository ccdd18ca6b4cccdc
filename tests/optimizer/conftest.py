"""Optimizer tests run single-threaded: small inputs gain nothing from threads, and the suite shares the machine.
They run without timing (TORCHLINT_MEASURE=0), so what optimize() keeps does not depend on machine load; the
timing logic is tested with a fake clock and a deliberately slow pass, with measure=True."""

import os

os.environ["TORCHLINT_MEASURE"] = "0"

try:
    import torch
except ImportError:  # the optimizer tests skip themselves without torch
    torch = None

if torch is not None:
    torch.set_num_threads(1)
