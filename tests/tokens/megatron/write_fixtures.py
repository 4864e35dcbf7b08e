"""Writes the Megatron-Core fixtures of tests/tokens/megatron with
megatron-core's own IndexedDatasetBuilder, and what megatron-core's own
IndexedDataset reads back from them (expected.json), so that the loader is
tested against the real writer and reader without installing megatron-core
(and the newer torch it needs) in CI. Run once, in a scratch environment:

    python3 -m venv /tmp/megatron-venv
    /tmp/megatron-venv/bin/pip install torch==2.5.1 numpy packaging
    /tmp/megatron-venv/bin/pip install --no-deps megatron-core==0.16.1
    /tmp/megatron-venv/bin/python tests/tokens/megatron/write_fixtures.py

and commit the files it writes beside itself."""
import json
import os
import random

import numpy
import torch
from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder

HERE = os.path.dirname(os.path.abspath(__file__))


def documents(rng, count, vocabulary):
    """`count` documents, each of 1-3 sequences of 1-40 tokens (as
    preprocess_data.py --split-sentences writes a document's sentences)."""
    return [[[rng.randrange(vocabulary) for _ in range(rng.randint(1, 40))] for _ in range(rng.randint(1, 3))]
            for _ in range(count)]


def write(name, dtype, docs, multimodal=False):
    prefix = os.path.join(HERE, name)
    builder = IndexedDatasetBuilder(prefix + ".bin", dtype=dtype, multimodal=multimodal)
    for number, document in enumerate(docs):
        for sequence in document:
            tensor = torch.tensor(sequence, dtype=torch.int64)
            if multimodal:
                builder.add_item(tensor, mode=number % 2)
            else:
                builder.add_item(tensor)
        builder.end_document()
    builder.finalize(prefix + ".idx")
    dataset = IndexedDataset(prefix, multimodal=multimodal, mmap=True)
    sequences = [numpy.asarray(dataset[index][0] if multimodal else dataset[index]) for index in range(len(dataset))]
    return {
        "dtype": numpy.dtype(dtype).name,
        "tokens": [int(token) for sequence in sequences for token in sequence],
        "sequence_lengths": [int(length) for length in dataset.sequence_lengths],
        "document_indices": [int(index) for index in dataset.document_indices],
        "multimodal": multimodal,
    }


def main():
    rng = random.Random(20261202)
    expected = {
        "gpt2_uint16": write("gpt2_uint16", numpy.uint16, documents(rng, 12, 50257)),
        "llama_int32": write("llama_int32", numpy.int32, documents(rng, 9, 128256)),
        "multimodal_uint8": write("multimodal_uint8", numpy.uint8, documents(rng, 5, 256), multimodal=True),
    }
    with open(os.path.join(HERE, "expected.json"), "w", encoding="utf-8") as file:
        json.dump(expected, file, indent=1)
        file.write("\n")


if __name__ == "__main__":
    main()
