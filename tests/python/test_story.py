"""examples/story.py: the story's trainer, in each framework this
interpreter has, runs on a CPU-only machine and its loss falls."""
import os
import pathlib
import subprocess
import sys
import unittest

from support import optional_module

SOURCE = pathlib.Path(os.environ.get("BACKPLANE_TEST_SOURCE_DIR", pathlib.Path(__file__).parents[2]))


@unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "torch and jaxlib under a preloaded sanitizer runtime")
class StoryTest(unittest.TestCase):
    def run_story(self, framework):
        if optional_module(framework) is None:
            self.skipTest(f"{sys.executable} cannot import {framework}")
        result = subprocess.run([sys.executable, str(SOURCE / "examples" / "story.py"), "--framework", framework,
                                 "--steps", "40"], capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("backends:", result.stdout)
        self.assertIn("tokens: 1,000,000 on cpu:0", result.stdout)
        self.assertIn(f"{framework}: 40 steps of 16 x 64 tokens", result.stdout)
        self.assertIn("stream: 40 steps, ", result.stdout)
        self.assertIn("data stall ", result.stdout)

    def test_torch_trainer(self):
        self.run_story("torch")

    def test_jax_trainer(self):
        self.run_story("jax")


if __name__ == "__main__":
    unittest.main()
