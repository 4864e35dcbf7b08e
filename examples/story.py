#!/usr/bin/env python3
"""The user story from Python: a tiny language model trained on a token file
that stays in host RAM (a zero-copy memory map) while every batch lands on
the default device, in PyTorch or in JAX.

    python3 examples/story.py [--framework torch|jax] [--tokens FILE.safetensors]
                              [--steps N] [--batch B] [--context T] [--documents]

Without --tokens it writes a small file (1,000,000 U16 tokens from a
repetitive pattern a bigram model can learn, tensor `tokens`). The model is
a bigram table (an embedding of vocabulary x vocabulary logits): small enough
for a CPU-only machine, real enough that the loss falls. Install the package
first (`pip install .`), or run from a build tree with BACKPLANE_LIBRARY and
PYTHONPATH=python set.

--documents (torch) trains on documents instead: each begins with the token
BOS, every window starts at one (batches(documents={"bos": BOS})), and a
tiny causal self-attention model attends only within a document, through a
block mask built from the batch's cu_seqlens (or flash-attn's varlen kernel
on CUDA where it is installed).
"""
from __future__ import annotations

import argparse
import math
import pathlib
import sys
import tempfile
import time
from typing import Any, Callable, Iterator, List, Tuple

import numpy as np

import backplane

VOCABULARY = 256
BOS = VOCABULARY - 1  # --documents: the token each document begins with, and no other
WIDTH = 32  # --documents: the attention model's width


def write_tokens(path: pathlib.Path, count: int) -> None:
    """A stream where each token mostly predicts the next one."""
    rng = np.random.default_rng(1234)
    successor = rng.permutation(VOCABULARY).astype(np.uint16)
    tokens = np.empty(count, dtype=np.uint16)
    tokens[0] = 0
    noise = rng.random(count) < 0.1
    random_tokens = rng.integers(0, VOCABULARY, size=count, dtype=np.uint16)
    for index in range(1, count):
        tokens[index] = random_tokens[index] if noise[index] else successor[tokens[index - 1]]
    backplane.safetensors.save(path, {"tokens": tokens}, metadata={"vocabulary": str(VOCABULARY)})


def document_tokens(count: int) -> "np.ndarray[Any, np.dtype[np.uint16]]":
    """`count` U16 tokens in documents of 2 to 119 tokens, each BOS and then
    a walk of a bigram table from a random first token, with some noise."""
    rng = np.random.default_rng(4321)
    successor = rng.permutation(BOS).astype(np.uint16)  # over the tokens below BOS
    tokens = np.empty(count, dtype=np.uint16)
    position = 0
    while position < count:
        end = min(position + int(rng.integers(2, 120)), count)
        tokens[position] = BOS
        current = int(rng.integers(0, BOS))
        for index in range(position + 1, end):
            tokens[index] = current
            current = int(rng.integers(0, BOS)) if rng.random() < 0.1 else int(successor[current])
        position = end
    return tokens


def write_document_tokens(path: pathlib.Path, count: int) -> None:
    """document_tokens(count) as a safetensors file."""
    backplane.safetensors.save(path, {"tokens": document_tokens(count)},
                               metadata={"vocabulary": str(VOCABULARY), "bos": str(BOS)})


def document_mask(cu_seqlens: Any, rows: int, context: int) -> Any:
    """[rows, T, T] booleans: query i of a row may attend key j when j <= i
    and both lie in one piece of cu_seqlens (every row start begins a piece,
    so the pieces of the flattened batch never cross a row)."""
    import torch
    flat = torch.arange(rows * context, device=cu_seqlens.device)
    # The piece of each token: how many piece ends lie at or before it.
    piece = (torch.searchsorted(cu_seqlens.long(), flat, right=True) - 1).reshape(rows, context)
    causal = torch.ones(context, context, dtype=torch.bool, device=cu_seqlens.device).tril()
    return (piece[:, :, None] == piece[:, None, :]) & causal


def attention_weights(q: Any, k: Any, mask: Any) -> Any:
    """softmax(q k^T / sqrt(d)) over the keys `mask` allows; 0 elsewhere."""
    import torch
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


def attend(q: Any, k: Any, v: Any, mask: Any, documents: Any) -> Any:
    """One head of attention inside documents: flash-attn's varlen kernel on
    CUDA where it is installed (it reads cu_seqlens itself), else
    scaled_dot_product_attention with the block mask (torch >= 2.0), else
    the softmax written out."""
    import torch
    if q.is_cuda:
        try:
            from flash_attn import flash_attn_varlen_func  # type: ignore[import-not-found]
        except ImportError:
            pass
        else:
            rows, context, width = q.shape
            packed = [tensor.reshape(rows * context, 1, width).to(torch.bfloat16) for tensor in (q, k, v)]
            out = flash_attn_varlen_func(*packed, documents.cu_seqlens, documents.cu_seqlens, documents.max_seqlen,
                                         documents.max_seqlen, causal=True)
            return out.reshape(rows, context, width).to(q.dtype)
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if sdpa is not None:
        return sdpa(q, k, v, attn_mask=mask)
    return attention_weights(q, k, mask) @ v


def attention_model(context: int) -> Any:
    """A one-layer, one-head causal self-attention language model that
    attends within documents: token and position embeddings (the positions
    are the batch's position_ids, 0 at each document's start), attention
    with a residual, and a linear head."""
    import torch

    class TinyAttention(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.tokens = torch.nn.Embedding(VOCABULARY, WIDTH)
            self.positions = torch.nn.Embedding(context, WIDTH)
            self.qkv = torch.nn.Linear(WIDTH, 3 * WIDTH, bias=False)
            self.head = torch.nn.Linear(WIDTH, VOCABULARY)

        def forward(self, x: Any, documents: Any) -> Any:
            hidden = self.tokens(x) + self.positions(documents.position_ids.long())
            q, k, v = self.qkv(hidden).chunk(3, dim=-1)
            mask = document_mask(documents.cu_seqlens, x.shape[0], x.shape[1])
            return self.head(hidden + attend(q, k, v, mask, documents))

    return TinyAttention()


def train_torch_documents(batches: Iterator[Tuple[Any, Any, Any]], device: backplane.Device, steps: int,
                          context: int, report: Callable[[int, float], None]) -> float:
    import torch
    torch.manual_seed(0)
    model = attention_model(context).to(device.torch())
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.02)
    loss = torch.tensor(0.0)
    for step, (x, y, documents) in zip(range(steps), batches):
        logits = model(x, documents)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCABULARY), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        report(step, float(loss))
    return float(loss)


def train_torch(batches: Iterator[Tuple[Any, Any]], device: backplane.Device, steps: int,
                report: Callable[[int, float], None]) -> float:
    import torch
    # The model where the batches land: device.torch() is cuda:N for cuda:N, cpu for cpu.
    model = torch.nn.Embedding(VOCABULARY, VOCABULARY).to(device.torch())
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    loss = torch.tensor(0.0)
    for step, (x, y) in zip(range(steps), batches):
        logits = model(x)  # x, y: int64 [B, T] tensors of their own (batches(xy="copies"))
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCABULARY), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        report(step, float(loss))
    return float(loss)


def train_jax(batches: Iterator[Tuple[Any, Any]], device: backplane.Device, steps: int,
              report: Callable[[int, float], None]) -> float:
    import jax
    import jax.numpy as jnp

    def loss_of(table: Any, x: Any, y: Any) -> Any:
        logits = table[x]
        picked = jnp.take_along_axis(jax.nn.log_softmax(logits), y[..., None], axis=-1)
        return -picked.mean()

    @jax.jit
    def step_of(table: Any, x: Any, y: Any) -> Tuple[Any, Any]:
        loss, gradient = jax.value_and_grad(loss_of)(table, x, y)
        return table - 1.0 * gradient * VOCABULARY, loss

    table = jax.device_put(jnp.zeros((VOCABULARY, VOCABULARY)), device.jax())  # where the batches land
    loss = jnp.array(0.0)
    for step, (x, y) in zip(range(steps), batches):
        table, loss = step_of(table, x, y)
        report(step, float(loss))
    return float(loss)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=["torch", "jax"], default="torch")
    parser.add_argument("--tokens", help="a safetensors file with a 1-D U16 tensor 'tokens'")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--documents", action="store_true",
                        help="documents that begin with BOS, windows aligned to them, attention within them (torch)")
    args = parser.parse_args()
    if args.documents and args.framework != "torch":
        parser.error("--documents trains the attention model in torch: pass --framework torch")

    print("backends:")
    for backend in backplane.backends():  # a plain call: unavailable ones are listed with their reason
        print(f"  {backend.name:<12} {backend.status:<12} {backend.reason}")
    chosen = backplane.default_device()
    print(f"default device: {chosen.device} (decided by: {chosen.source})")

    with tempfile.TemporaryDirectory() as scratch:
        path = pathlib.Path(args.tokens) if args.tokens else pathlib.Path(scratch) / "tokens.safetensors"
        if not args.tokens:
            count = 200_000 if args.documents else 1_000_000
            (write_document_tokens if args.documents else write_tokens)(path, count)
            print(f"wrote {path} ({count:,} U16 tokens{' in documents' if args.documents else ''})")
        # The token file stays in host RAM as a zero-copy memory map on cpu,
        # whatever the default device is.
        with backplane.default_device_scope("cpu"):
            tokens = backplane.safetensors.load(path, names="tokens")["tokens"]
        print(f"tokens: {tokens.shape[0]:,} on {tokens.device}")

        # A batch stream onto the default device: its threads gather and move
        # the next steps while this one trains.
        # With documents every window starts at a BOS, and each step is
        # (x, y, Documents(cu_seqlens, max_seqlen, position_ids)).
        batches = backplane.batches(tokens, args.batch, args.context, dtype="int64", seed=0, steps=args.steps,
                                    to=args.framework, documents={"bos": BOS} if args.documents else None)
        start = time.perf_counter()
        first: List[float] = []

        def report(step: int, loss: float) -> None:
            if not first:
                first.append(loss)
            if step % 20 == 0 or step == args.steps - 1:
                print(f"step {step:4d}  loss {loss:.3f}")

        if args.documents:
            last = train_torch_documents(batches, chosen.device, args.steps, args.context, report)
        else:
            trainer = train_torch if args.framework == "torch" else train_jax
            last = trainer(batches, chosen.device, args.steps, report)
        elapsed = time.perf_counter() - start
        print(f"{args.framework}: {args.steps} steps of {args.batch} x {args.context} tokens in {elapsed:.2f} s; "
              f"loss {first[0]:.3f} -> {last:.3f}")
        stats = batches.stats()  # how long the trainer waited for data
        print(f"stream: {stats.steps} steps, {stats.windows_per_second:,.0f} windows/s, "
              f"data stall {100 * stats.data_stall_fraction:.1f}%")
        batches.close()
        del tokens, batches
        return 0 if last < first[0] else 1


if __name__ == "__main__":
    sys.exit(main())
