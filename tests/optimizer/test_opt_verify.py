"""Comparing an optimized model's outputs with the original's: values within tolerance, NaNs and infinities in the
same places, and finite values whose difference overflows."""

import pytest

torch = pytest.importorskip("torch")

from torchlint.optimizer import verify  # noqa: E402

INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize("reference, candidate", [
    ([1.0, -2.0, 3.0], [1.0, -2.0, 3.0]),
    ([1.0, -2.0, 3.0], [1.0 + 1e-6, -2.0, 3.0]),  # rounding
    ([NAN, 1.0], [NAN, 1.0]),
    ([INF, -INF, 2.0], [INF, -INF, 2.0]),
    ([NAN, INF, 2.0], [NAN, INF, 2.0 + 1e-6]),
    ([], []),
])
def test_equal_outputs_pass(reference, candidate):
    result = verify.compare(torch.tensor(reference), torch.tensor(candidate), verify.FP32)
    assert result.ok, result.detail


@pytest.mark.parametrize("reference, candidate, problem", [
    ([1.0, -2.0, 3.0], [1.0, -2.1, 3.0], "max difference"),
    ([NAN, 1.0], [0.0, 1.0], "NaNs in different places"),
    ([1.0, 1.0], [NAN, 1.0], "NaNs in different places"),
    ([INF, 1.0], [-INF, 1.0], "infinities in different places"),
    ([2.0, 1.0], [INF, 1.0], "max difference"),  # an infinity only in the candidate
    ([NAN, INF, 2.0], [NAN, INF, 2.5], "max difference"),  # the finite part still counts
    ([3e38, 1.0], [-3e38, 1.0], "max difference"),  # finite values whose difference overflows to inf
])
def test_different_outputs_fail(reference, candidate, problem):
    result = verify.compare(torch.tensor(reference), torch.tensor(candidate), verify.FP32)
    assert not result.ok
    assert problem in result.detail


def test_the_largest_relative_error_is_reported():
    reference = torch.tensor([10.0, -20.0, 40.0])
    result = verify.compare(reference, reference + torch.tensor([0.0, 2e-3, 0.0]), verify.FP32)
    assert result.ok
    assert result.error == pytest.approx(2e-3 / 40.0, rel=1e-3)


def test_a_mixed_precision_output_is_compared_in_float32():
    reference = torch.linspace(-3, 3, 101)
    tolerance = verify.LOW_PRECISION[torch.bfloat16]
    assert verify.compare(reference, reference.bfloat16(), tolerance).ok
    assert not verify.compare(reference, reference.bfloat16(), verify.FP32).ok  # float32 wants float32 back
