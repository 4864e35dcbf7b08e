"""batches()' rank and world_size when the caller leaves them out: from the
engine that runs the job, when one is initialised, else from the launcher's
variables. Two processes of one job that each took the defaults 0 and 1
would draw the same windows and train on duplicates without a word, so the
engines are asked first, and a variable that contradicts an initialised
engine is an error rather than a silent pick of one of them.

Neither torch nor JAX is imported here: a process that has not imported one
has not initialised it either (sys.modules says which are loaded)."""
from __future__ import annotations

import os
import sys
from typing import Any, Literal, NamedTuple, Optional, Tuple, get_args

from ._errors import Error, InvalidArgumentError

# What BatchStream.rank_source reads, one for each place a rank comes from:
# the arguments, an engine, the launcher's variables, none of them (0 and 1),
# or a jax.sharding.NamedSharding, which says the devices and so the rank.
RankSource = Literal["argument", "torch.distributed", "jax.distributed", "environment", "default", "jax sharding"]
RANK_SOURCES: Tuple[RankSource, ...] = get_args(RankSource)
EngineName = Literal["torch.distributed", "jax.distributed"]


class Defaults(NamedTuple):
    rank: Optional[int]
    world_size: Optional[int]
    source: RankSource  # where the values not passed as arguments come from


def _invalid(message: str) -> Error:
    return InvalidArgumentError(f"batches(): {message}")  # as _batch_arguments says it


def _torch_ranks() -> Optional[Tuple[int, int]]:
    """torch.distributed's (rank, world size) when its default process group
    is initialised."""
    torch: Any = sys.modules.get("torch")
    distributed = getattr(torch, "distributed", None)
    if distributed is None or not distributed.is_available() or not distributed.is_initialized():
        return None
    return int(distributed.get_rank()), int(distributed.get_world_size())


def _jax_ranks() -> Optional[Tuple[int, int]]:
    """JAX's (process index, process count) when jax.distributed.initialize()
    has run: jax.distributed.is_initialized() where JAX has it (it says
    whether the coordination client exists), else that client itself, and
    the process id and count initialize() was given, from the state it keeps
    (jax._src.distributed.global_state). They are what jax.process_index()
    and jax.process_count() then report, but reading them starts no backend,
    where those two would start one."""
    jax: Any = sys.modules.get("jax")
    state = getattr(sys.modules.get("jax._src.distributed"), "global_state", None)
    if jax is None or state is None:
        return None
    is_initialized = getattr(getattr(jax, "distributed", None), "is_initialized", None)
    initialized = is_initialized() if callable(is_initialized) else getattr(state, "client", None) is not None
    if not initialized:
        return None
    process_id, process_count = getattr(state, "process_id", None), getattr(state, "num_processes", None)
    if not isinstance(process_id, int) or not isinstance(process_count, int):
        # A JAX that keeps them elsewhere: its public answer, at the cost of a backend.
        return int(jax.process_index()), int(jax.process_count())
    return process_id, process_count


def _from_environment(name: str) -> Optional[int]:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise _invalid(f"{name}={value!r} is not an integer") from None


def _engine_ranks() -> Tuple[Optional[Tuple[int, int]], Optional[EngineName]]:
    """The initialised engine's (rank, world size) and its name; torch
    first (a process that initialised both runs its data parallelism in
    torch's process group more likely than not, and torch's group is the
    one its collectives use)."""
    torch_ranks = _torch_ranks()
    if torch_ranks is not None:
        return torch_ranks, "torch.distributed"
    jax_ranks = _jax_ranks()
    if jax_ranks is not None:
        return jax_ranks, "jax.distributed"
    return None, None


def default_ranks(rank: Optional[int], world_size: Optional[int]) -> Defaults:
    """What stands in for rank and world_size where they are None: an
    initialised torch.distributed, else jax.distributed, else $RANK and
    $WORLD_SIZE (None where unset: 0 and 1). $RANK or $WORLD_SIZE set to
    another value than the initialised engine's is an error naming both, for
    a value left out only: an argument given is a choice, and its variable
    is not read."""
    if rank is not None and world_size is not None:
        return Defaults(None, None, "argument")
    engine, engine_name = _engine_ranks()
    if engine is None or engine_name is None:
        found = (_from_environment("RANK"), _from_environment("WORLD_SIZE"))
        return Defaults(found[0], found[1], "environment" if found != (None, None) else "default")
    for variable, value, passed in (("RANK", engine[0], rank), ("WORLD_SIZE", engine[1], world_size)):
        found_value = None if passed is not None else _from_environment(variable)
        if found_value is not None and found_value != value:
            raise _invalid(f"${variable}={found_value} but {engine_name} says {variable.lower()} {value} (rank "
                           f"{engine[0]} of world size {engine[1]}): the launch is misconfigured; unset {variable} "
                           "or make it agree, or pass rank= and world_size= to choose explicitly")
    return Defaults(engine[0], engine[1], engine_name)
