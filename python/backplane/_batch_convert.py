"""How a step's Arrays become what next() hands out: the framework's tensor
(to=) and x and y of it (xy=, and head_tail pieces whose rows are two
chunks). conversion() makes the one choice of the three functions a step
applies, at the call, so that a step costs no decision."""
from __future__ import annotations

from typing import Any, Callable, Literal, Optional, Tuple, Union

import numpy

from ._array import Array
from ._batch_arguments import _invalid

Converter = Callable[[Array], Any]
# The frameworks to= names; what a caller passes is one of them or a
# Converter (a misspelt name is then a type error, and InvalidArgumentError
# at the call).
Target = Literal["numpy", "torch", "jax"]
Split = Callable[[Any], Tuple[Any, Any]]

XY_MODES = ("copies", "views")


def _head_tail_pair(tensor: Any) -> Tuple[Any, Any]:
    """x and y of a head_tail piece [rows, 2, L + 1]: each row's two chunks
    one after the other, as copies (a reshape of a strided view)."""
    rows = tensor.shape[0]
    if isinstance(tensor, numpy.ndarray):
        return (numpy.ascontiguousarray(tensor[:, :, :-1]).reshape(rows, -1),
                numpy.ascontiguousarray(tensor[:, :, 1:]).reshape(rows, -1))
    return tensor[:, :, :-1].reshape(rows, -1), tensor[:, :, 1:].reshape(rows, -1)


def _copied_pair(tensor: Any) -> Tuple[Any, Any]:
    """x and y as contiguous copies that share no memory with each other or
    with the batch buffer, made by the framework the tensor belongs to."""
    if isinstance(tensor, numpy.ndarray):
        return numpy.array(tensor[:, :-1], order="C"), numpy.array(tensor[:, 1:], order="C")
    module = type(tensor).__module__
    if module.startswith("torch"):
        import torch
        return (tensor[:, :-1].clone(memory_format=torch.contiguous_format),
                tensor[:, 1:].clone(memory_format=torch.contiguous_format))
    if module.startswith(("jax", "jaxlib")):
        return tensor[:, :-1], tensor[:, 1:]  # a JAX slice is a new, immutable array already
    if callable(getattr(tensor, "copy", None)):  # CuPy and other NumPy-like arrays
        return tensor[:, :-1].copy(), tensor[:, 1:].copy()
    raise _invalid(f"xy='copies' cannot copy the {type(tensor).__name__} that to= returned: return a NumPy "
                   "array, a torch tensor, a JAX array or an array with copy(), or pass xy='views'")


def _view_pair(tensor: Any) -> Tuple[Any, Any]:
    return tensor[:, :-1], tensor[:, 1:]


def _host_view(array: Array) -> Any:
    return numpy.from_dlpack(array)


_jax_split: Optional[Split] = None


def _jax_pair_from_host(batch: Any) -> Tuple[Any, Any]:
    """x and y of a host batch (a NumPy view) as JAX arrays: one compiled
    call (per shape) that takes the batch in and slices it. Two
    jnp.asarray() of NumPy slices cost about twice as much: JAX's fixed cost
    is per call, not per byte."""
    global _jax_split
    if _jax_split is None:
        import jax
        _jax_split = jax.jit(lambda windows: (windows[:, :-1], windows[:, 1:]))
    return _jax_split(batch)


_jax_head_tail_split: Optional[Split] = None


def _jax_head_tail_pair_from_host(batch: Any) -> Tuple[Any, Any]:
    """_jax_pair_from_host for a head_tail piece [rows, 2, L + 1]."""
    global _jax_head_tail_split
    if _jax_head_tail_split is None:
        import jax
        _jax_head_tail_split = jax.jit(_head_tail_pair)
    return _jax_head_tail_split(batch)


def _converter(to: Union[None, str, Converter]) -> Converter:
    if callable(to):
        return to
    if to is None or to == "numpy":
        return _host_view
    if to == "torch":
        import torch
        return lambda array: torch.from_dlpack(array)
    if to == "jax":
        import jax.numpy as jnp
        return lambda array: jnp.from_dlpack(array)
    raise _invalid(f"to={to!r}: expected 'numpy', 'torch', 'jax' or a callable taking an Array")


def _jax_from_host(array: Array) -> Any:
    import jax.numpy as jnp
    return jnp.asarray(_host_view(array))


def conversion(to: Union[None, str, Converter], xy: str, host: bool,
               head_tail: bool) -> Tuple[Converter, Split, Converter]:
    """(convert, split, convert_pieces): a step's Array becomes
    split(convert(array)), x and y; its document pieces (cu_seqlens,
    position_ids) become convert_pieces(array), what x is, the same way.
    `host`: every target is host memory; `head_tail`: the pieces are
    [rows, 2, L + 1], and x and y are each row's two chunks (copies, in
    either xy mode)."""
    if xy not in XY_MODES:
        raise _invalid(f"xy={xy!r}: expected 'copies' (x and y independent and contiguous) or 'views' "
                       "(two overlapping views of one buffer, no copy)")
    convert = _converter(to)
    if to == "jax" and host:
        # JAX's own slicing dispatches an operation per slice (about 100
        # µs each on a CPU); one compiled call takes the NumPy view of
        # the host batch and makes x and y, in either xy mode (JAX arrays
        # are immutable: nothing can alias by surprise).
        return _host_view, _jax_head_tail_pair_from_host if head_tail else _jax_pair_from_host, _jax_from_host
    split = _head_tail_pair if head_tail else _view_pair if xy == "views" else _copied_pair
    return convert, split, convert
