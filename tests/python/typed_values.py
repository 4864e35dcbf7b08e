"""Checked by mypy --strict (scripts/test-python-package), never run: what
load_tokens returns for each kind of path, the words a value can be where
the library has a fixed set of them, and to=. assert_type fails the check
for any other type; each `# type: ignore[code]` marks a call that must stay
an error (--strict reports an ignore that silences nothing)."""
import pathlib
from typing import List, Literal, Union

from typing_extensions import assert_type

import backplane

Statuses = Literal["available", "unavailable", "incompatible", "failed", "disabled", "shadowed"]
Levels = Literal["scoped override", "set in code", "BACKPLANE_DEFAULT_DEVICE", "config default_device",
                 "highest-priority available backend", "local rank"]
RankSources = Literal["argument", "torch.distributed", "jax.distributed", "environment", "default", "jax sharding"]


def one_file_is_an_array() -> None:
    assert_type(backplane.load_tokens(pathlib.Path("train.bin")), backplane.Array)
    assert_type(backplane.load_tokens(pathlib.Path("data/train_*.bin")), backplane.Array)  # a Path is never a pattern


def a_list_is_a_list() -> None:
    assert_type(backplane.load_tokens(["b.npy", pathlib.Path("a.npy")]), List[backplane.Array])
    assert_type(backplane.load_tokens(("b.npy", "a.npy"), dtype="uint16"), List[backplane.Array])


def a_str_is_either_until_checked() -> None:
    # A str holding *, ? or [ is a pattern: a list; any other str one Array.
    loaded = backplane.load_tokens("train.bin")
    assert_type(loaded, Union[backplane.Array, List[backplane.Array]])
    if isinstance(loaded, backplane.Array):
        assert_type(loaded, backplane.Array)
    loaded.document_starts  # type: ignore[union-attr]
    backplane.batches(backplane.load_tokens("data/train_*.bin"), 4, 8)  # batches takes either


def a_path_of_another_type_is_an_error() -> None:
    backplane.load_tokens(3)  # type: ignore[call-overload]
    backplane.load_tokens(b"train.bin")  # type: ignore[call-overload]


def fixed_words_are_literals(tokens: backplane.Array) -> None:
    backend = backplane.backends()[0]
    assert_type(backend.status, Statuses)
    backend.status == "avialable"  # type: ignore[comparison-overlap]
    chosen = backplane.default_device()
    assert_type(chosen.source, str)  # "LOCAL_RANK=1" for a local rank: words with a value
    assert_type(chosen.level, Levels)
    chosen.level == "LOCAL_RANK=1"  # type: ignore[comparison-overlap]
    stream = backplane.batches(tokens, 4, 8)
    assert_type(stream.rank_source, RankSources)
    stream.rank_source == "torch"  # type: ignore[comparison-overlap]


def to_is_a_framework_or_a_callable(tokens: backplane.Array) -> None:
    backplane.batches(tokens, 4, 8, to="jax")
    backplane.batches(tokens, 4, 8, to=backplane.Array.numpy)
    backplane.batches(tokens, 4, 8, to="tensorflow")  # type: ignore[call-overload]
    backplane.batches(tokens, 4, 8, device=["cpu:0"], to="Torch")  # type: ignore[call-overload]
