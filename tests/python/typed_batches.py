"""Checked by mypy --strict (scripts/test-python-package), never run: what an
editor shows for x and y of batches() is the type the call makes, not Any.
assert_type fails the check when a type is Any or another type."""
from typing import Any, List, Tuple

import numpy
import numpy.typing
from typing_extensions import assert_type

import backplane


def default_is_numpy(tokens: backplane.Array) -> None:
    for x, y in backplane.batches(tokens, 4, 8):
        assert_type(x, numpy.typing.NDArray[Any])
        assert_type(y, numpy.typing.NDArray[Any])
    with backplane.batches(tokens, 4, 8, to="numpy", seed=1, steps=10, xy="views") as stream:
        assert_type(next(stream), Tuple[numpy.typing.NDArray[Any], numpy.typing.NDArray[Any]])


def callable_gives_its_type(tokens: backplane.Array) -> None:
    def as_list(array: backplane.Array) -> List[int]:
        return []

    x, y = next(backplane.batches(tokens, 4, 8, to=as_list, device="cpu:0"))
    assert_type(x, List[int])
    assert_type(y, List[int])


def others_are_any(tokens: backplane.Array) -> None:
    # A list of devices yields a list of pairs; documents yield triples.
    assert_type(next(backplane.batches(tokens, 4, 8, device=["cpu:0", "cpu:1"])), Any)
    assert_type(next(backplane.batches(tokens, 4, 8, documents="index")), Any)
    assert_type(next(backplane.BatchStream(tokens, 4, 8, to="jax")), Any)


def torch_is_tensor(tokens: backplane.Array) -> None:
    import torch  # Any where torch is not installed for mypy's interpreter: then this checks only the overload

    x, y = next(backplane.batches(tokens, 4, 8, to="torch"))
    assert_type(x, torch.Tensor)
    assert_type(y, torch.Tensor)


def misspelled_options_are_errors(tokens: backplane.Array) -> None:
    backplane.batches(tokens, 4, 8, sed=1)  # type: ignore[call-overload]
    backplane.batches(tokens, 4, 8, prefetch="2")  # type: ignore[call-overload]
