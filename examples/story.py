#!/usr/bin/env python3
"""The user story from Python: a tiny language model trained on a token file
that stays in host RAM (a zero-copy memory map) while every batch lands on
the default device, in PyTorch or in JAX.

    python3 examples/story.py [--framework torch|jax] [--tokens FILE.safetensors]
                              [--steps N] [--batch B] [--context T]

Without --tokens it writes a small file (1,000,000 U16 tokens from a
repetitive pattern a bigram model can learn, tensor `tokens`). The model is
a bigram table (an embedding of vocabulary x vocabulary logits): small enough
for a CPU-only machine, real enough that the loss falls. Install the package
first (`pip install .`), or run from a build tree with BACKPLANE_LIBRARY and
PYTHONPATH=python set.
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time
from typing import Any, Callable, Iterator, List, Tuple

import numpy as np

import backplane

VOCABULARY = 256


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
    args = parser.parse_args()

    print("backends:")
    for backend in backplane.backends():  # a plain call: unavailable ones are listed with their reason
        print(f"  {backend.name:<12} {backend.status:<12} {backend.reason}")
    chosen = backplane.default_device()
    print(f"default device: {chosen.device} (decided by: {chosen.source})")

    with tempfile.TemporaryDirectory() as scratch:
        path = pathlib.Path(args.tokens) if args.tokens else pathlib.Path(scratch) / "tokens.safetensors"
        if not args.tokens:
            write_tokens(path, 1_000_000)
            print(f"wrote {path} (1,000,000 U16 tokens)")
        # The token file stays in host RAM as a zero-copy memory map on cpu,
        # whatever the default device is.
        with backplane.default_device_scope("cpu"):
            tokens = backplane.safetensors.load(path, names="tokens")["tokens"]
        print(f"tokens: {tokens.shape[0]:,} on {tokens.device}")

        # A batch stream onto the default device: its threads gather and move
        # the next steps while this one trains.
        batches = backplane.batches(tokens, args.batch, args.context, dtype="int64", seed=0, steps=args.steps,
                                    to=args.framework)
        start = time.perf_counter()
        first: List[float] = []

        def report(step: int, loss: float) -> None:
            if not first:
                first.append(loss)
            if step % 20 == 0 or step == args.steps - 1:
                print(f"step {step:4d}  loss {loss:.3f}")

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
