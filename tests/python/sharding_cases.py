"""The single-process cases of batches(sharding=...), run by
test_jax_sharding.py in a process of its own with 4 CPU devices (JAX reads
XLA_FLAGS once, when its backend starts). Each global x and y has the
requested sharding and every shard equals the slice of the batch that one
process with one device draws at that step.

    XLA_FLAGS=--xla_force_host_platform_device_count=4 python3 -m unittest sharding_cases
"""
import unittest

import jax
import jax.numpy as jnp
import numpy
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import backplane
from support import isolated_runtime

SHARDINGS = [P("data"), P("data", "seq"), P(("data", "seq")), P(None, "seq"), P()]


class ShardingCases(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runtime = isolated_runtime()
        cls.tokens = cls.runtime.array(numpy.arange(100_000, dtype=numpy.uint16) * 7 % 50_000, device="cpu:0")
        cls.mesh = Mesh(numpy.array(jax.devices()).reshape(2, 2), ("data", "seq"))

    @classmethod
    def tearDownClass(cls):
        cls.runtime.close()

    def reference(self, batch_size, context, steps, **options):
        """The batches of one process on one device: what the shards slice."""
        return list(backplane.batches(self.tokens, batch_size, context, device="cpu:0", seed=5, steps=steps,
                                      runtime=self.runtime, to="numpy", dtype="int32", **options))

    def test_four_devices_each_sharding_gives_the_requested_global_array(self):
        self.assertEqual(jax.device_count(), 4, "run with XLA_FLAGS=--xla_force_host_platform_device_count=4")
        reference = self.reference(8, 16, 3)
        for spec in SHARDINGS:
            sharding = NamedSharding(self.mesh, spec)
            with self.subTest(spec=str(spec)):
                stream = backplane.batches(self.tokens, 8, 16, seed=5, steps=3, runtime=self.runtime,
                                           sharding=sharding)
                for step, (x, y) in enumerate(stream):
                    for name, array, expected in (("x", x, reference[step][0]), ("y", y, reference[step][1])):
                        self.assertIsInstance(array, jax.Array)
                        self.assertEqual(array.shape, (8, 16))
                        self.assertTrue(array.sharding.is_equivalent_to(sharding, 2), f"{name}: {array.sharding}")
                        self.assertEqual(len(array.addressable_shards), 4)
                        for shard in array.addressable_shards:
                            numpy.testing.assert_array_equal(numpy.asarray(shard.data), expected[shard.index],
                                                             f"step {step} {name} on {shard.device}")
                self.assertEqual(stream.rank_source, "jax sharding")
                stream.close()

    def test_a_jitted_reduction_over_the_global_array_equals_the_reference(self):
        sharding = NamedSharding(self.mesh, P("data", "seq"))
        weighted = jax.jit(lambda x: (x.astype(jnp.float32) * jnp.arange(16, dtype=jnp.float32)).sum(axis=1))
        stream = backplane.batches(self.tokens, 8, 16, seed=5, steps=2, runtime=self.runtime, sharding=sharding)
        for (x, _), (expected, _) in zip(stream, self.reference(8, 16, 2)):
            numpy.testing.assert_allclose(numpy.asarray(weighted(x)), (expected * numpy.arange(16)).sum(axis=1),
                                          rtol=1e-6)

    def test_each_piece_is_read_once_and_a_sequence_split_reads_its_columns(self):
        # P("data") over (data=2, seq=2): the two seq replicas of a row block
        # share one piece, so the process reads each row once: pieces of 4
        # rows x 17 tokens x 2 bytes. P("data", "seq"): 4 pieces of 4 rows x
        # 9 tokens (8 columns and the one y adds).
        for spec, piece_bytes, pieces_per_step in ((P("data"), 4 * 17 * 2, 2), (P("data", "seq"), 4 * 9 * 2, 4)):
            stream = backplane.batches(self.tokens, 8, 16, seed=5, steps=4, prefetch=1, runtime=self.runtime,
                                       sharding=NamedSharding(self.mesh, spec))
            list(stream)
            read = stream.stats().read_bytes
            stream.close()
            # The four steps handed out, and what the producer has gathered
            # of the one step it may hold ahead (prefetch=1).
            with self.subTest(spec=str(spec)):
                self.assertEqual(read % piece_bytes, 0, read)
                self.assertGreaterEqual(read // piece_bytes, 4 * pieces_per_step)
                self.assertLessEqual(read // piece_bytes, 5 * pieces_per_step)

    def test_a_schedule_and_a_resume_keep_the_global_batches(self):
        sharding = NamedSharding(self.mesh, P("data", "seq"))
        schedule = [(0, 4, 8), (2, 8, 16)]
        reference = self.reference(None, None, 4, schedule=schedule)
        stream = backplane.batches(self.tokens, seed=5, steps=4, runtime=self.runtime, sharding=sharding,
                                   schedule=schedule)
        first = next(stream)
        numpy.testing.assert_array_equal(numpy.asarray(first[0]), reference[0][0])
        state = stream.state_dict()
        stream.close()
        resumed = backplane.batches(self.tokens, seed=5, steps=4, runtime=self.runtime, sharding=sharding,
                                    schedule=schedule, state=state)
        for step, (x, y) in enumerate(resumed, start=1):
            self.assertEqual(x.shape, reference[step][0].shape)
            numpy.testing.assert_array_equal(numpy.asarray(x), reference[step][0])
            numpy.testing.assert_array_equal(numpy.asarray(y), reference[step][1])

    def test_a_state_of_four_devices_resumes_as_four_layout_ranks_and_back(self):
        sharding = NamedSharding(self.mesh, P("data", "seq"))
        stream = backplane.batches(self.tokens, 8, 16, seed=5, steps=5, runtime=self.runtime, sharding=sharding)
        next(stream)
        state = stream.state_dict()
        rest = [(numpy.asarray(x), numpy.asarray(y)) for x, y in stream]
        layout = dict(mesh={"data": 2, "seq": 2}, batch="data", sequence="seq")
        ranks = [backplane.batches(self.tokens, 4, 16, seed=5, steps=5, runtime=self.runtime, device="cpu:0",
                                   dtype="int32", state=state, layout=backplane.Layout(rank=rank, **layout))
                 for rank in range(4)]
        for step, pieces in enumerate(zip(*ranks)):
            x, y = rest[step]
            for rank, (piece_x, piece_y) in enumerate(pieces):
                rows, columns = slice(rank // 2 * 4, rank // 2 * 4 + 4), slice(rank % 2 * 8, rank % 2 * 8 + 8)
                numpy.testing.assert_array_equal(piece_x, x[rows, columns], f"step {step + 1} rank {rank}")
                numpy.testing.assert_array_equal(piece_y, y[rows, columns], f"step {step + 1} rank {rank}")
        back = backplane.batches(self.tokens, 8, 16, seed=5, steps=5, runtime=self.runtime, sharding=sharding,
                                 state=ranks[3].state_dict())
        self.assertEqual(back.step, 5)

    def test_bad_shardings_are_refused_naming_the_problem(self):
        cases = [
            (dict(sharding=NamedSharding(self.mesh, P("data")), batch_size=7), "batch_size 7"),
            (dict(sharding=NamedSharding(self.mesh, P("data")), batch_size=8, to="torch"), "to='torch'"),
            (dict(sharding=NamedSharding(self.mesh, P("data")), batch_size=8, rank=1), "rank=1"),
            (dict(sharding=NamedSharding(self.mesh, P("data", "seq")), batch_size=8, context=15), "context 15"),
            (dict(sharding=NamedSharding(self.mesh, P("data")), batch_size=8, documents={"eos": 0}), "documents="),
            (dict(sharding="data", batch_size=8), "NamedSharding"),
        ]
        for options, words in cases:
            options.setdefault("context", 16)
            with self.subTest(words=words):
                with self.assertRaises(backplane.InvalidArgumentError) as caught:
                    backplane.batches(self.tokens, seed=5, runtime=self.runtime, **options)
                self.assertIn(words, str(caught.exception))


if __name__ == "__main__":
    unittest.main()
