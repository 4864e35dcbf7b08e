#!/usr/bin/env python3
"""Every Python and shell code block of README.md and docs/*.md runs as
written, against the freshly built library.

    test_code_blocks.py SOURCE_ROOT BUILD_ROOT

The rules (docs/architecture.md, "Testing", says the same for contributors):

- A ```python block and a ```sh (or bash, shell) block runs on its own, in a
  fresh temporary directory: it imports what it uses and defines what it
  calls. Python blocks run with this interpreter, or with another one from
  $BACKPLANE_DOCS_PYTHONS that has the modules the block imports (torch,
  jax, ...); where none has them the block is skipped and the test says why.
- That directory holds small generated token files under the names the docs
  use (FIXTURES below), and, for shell blocks, which the docs run from the
  repository root, the checkout's top-level entries and `build` (the build
  tree) as links.
- The line right before a fence may mark the block, with a reason:
      <!-- fragment: WHY -->   a piece on purpose (a synopsis, placeholders);
                               fragments stay fewer than half of the blocks.
      <!-- not run: WHY -->    a shell block that builds, installs, fuzzes or
                               benchmarks: the test must not redo that. An
                               unmarked shell block that looks like one
                               (BUILDS) fails unrun.
  A mark without a reason, a mark before a block of another language, a
  mark before no block, or `not run` on a Python block is an error.
- Blocks in other languages (toml, text, c, cpp, json, ...) are not run.
- Blocks that read s3:// objects run against the test server that
  tests/remote/object_servers.py starts around this test: every fixture is
  put in its bucket `tokens` under its file name, and AWS_ENDPOINT_URL points
  there. Without the server they are skipped, saying why.

A failure names the file, the line of the block's fence (and, for a Python
traceback, the doc line it points at) and the error.
"""
import ast
import functools
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

TIMEOUT_S = 30
PYTHON = {"python", "py"}
SHELL = {"sh", "bash", "shell"}
# Modules a block may import that an interpreter may lack.
OPTIONAL_MODULES = {"torch", "jax", "numpy", "safetensors"}
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
MARK = re.compile(r"^\s*<!--\s*(?P<kind>fragment|not run)\s*:(?P<reason>.*?)-->\s*$")
LOOKS_LIKE_MARK = re.compile(r"^\s*<!--\s*(fragment|not[ -]?run)\b", re.IGNORECASE)
# What an unmarked shell block may not do: the test refuses it unrun, so that
# a forgotten `not run` mark costs a message, not a rebuild or an install.
BUILDS = re.compile(r"scripts/(build|test|quickstart|setup|pip-test-packages|fuzz)|pip3? install|-m pip|"
                    r"\bmeson (setup|install|compile|test)\b|\bninja\b|\bapt(-get)?\b|\bmake\b|--benchmark|"
                    r"\bbench_|python3? -m (build|venv)")

VOCABULARY = 256  # generated tokens are below this, so a bigram model of it fits every file
COUNT = 65536     # tokens per file: more than one window of 1025 tokens, 128 KiB


def tokens(seed):
    return np.random.default_rng(seed).integers(0, VOCABULARY, size=COUNT, dtype=np.uint16)


def write_llmc_shard(path, seed):
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, COUNT
    with open(path, "wb") as file:
        file.write(header.tobytes())
        file.write(tokens(seed).tobytes())


def write_safetensors(path, seed):
    import backplane
    backplane.safetensors.save(path, {"tokens": tokens(seed)})


def write_raw(path, seed):
    tokens(seed).tofile(path)


def write_npy(path, seed):
    np.save(path, tokens(seed))


def write_megatron(path, seed):
    """PREFIX.idx (`path`) and PREFIX.bin: a Megatron-Core dataset of documents
    of 1,000 tokens (the last shorter), one sequence each."""
    lengths = np.diff(np.append(np.arange(0, COUNT, 1000), COUNT)).astype(np.int32)
    header = b"MMIDIDX\0\0" + np.array([1], np.uint64).tobytes() + bytes([8])  # version 1, uint16
    counts = np.array([len(lengths), len(lengths) + 1], np.uint64).tobytes()
    pointers = (np.concatenate([[0], np.cumsum(lengths)[:-1]]) * 2).astype(np.int64)
    with open(path, "wb") as file:
        file.write(header + counts + lengths.tobytes() + pointers.tobytes() +
                   np.arange(len(lengths) + 1, dtype=np.int64).tobytes())
    tokens(seed).tofile(path.with_suffix(".bin"))


# The token files the docs name: path in the block's directory -> writer.
FIXTURES = {
    "tokens.safetensors": write_safetensors,
    "tokens.u16": write_raw,
    "a.npy": write_npy,
    "b.npy": write_npy,
    "fineweb_train_000001.bin": write_llmc_shard,
    "data/wiki_text_document.idx": write_megatron,
    "data/fineweb_train_000001.bin": write_llmc_shard,
    "data/fineweb_train_000002.bin": write_llmc_shard,
    "fineweb/train_000001.bin": write_llmc_shard,
    "fineweb/train_000002.bin": write_llmc_shard,
}


class Block:
    def __init__(self, path, line, language, text, mark, reason):
        self.path, self.line, self.language, self.text = path, line, language, text
        self.mark, self.reason = mark, reason

    @property
    def where(self):
        return f"{self.path}:{self.line}"


def parse(root, relative):
    """The fenced blocks of one Markdown file, and the errors in its marks."""
    lines = (root / relative).read_text(encoding="utf-8").split("\n")
    blocks, errors = [], []
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if LOOKS_LIKE_MARK.match(lines[index]) and not MARK.match(lines[index]):
            errors.append(f"{relative}:{index + 1}: a mark must read `<!-- fragment: WHY -->` or "
                          f"`<!-- not run: WHY -->`, got {lines[index].strip()!r}")
        if MARK.match(lines[index]) and (index + 1 == len(lines) or not FENCE.match(lines[index + 1])):
            errors.append(f"{relative}:{index + 1}: a mark with no code block on the next line")
        if not match:
            index += 1
            continue
        indent, fence, info = match.group("indent", "fence", "info")
        language = info.strip().split()[0].lower() if info.strip() else ""
        end = index + 1
        closing = re.compile(r"^\s*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$")
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        if end == len(lines):
            errors.append(f"{relative}:{index + 1}: a code block that is never closed")
            break
        body = "\n".join(line[len(indent):] if line.startswith(indent) else line.lstrip()
                         for line in lines[index + 1:end]) + "\n"
        mark = reason = None
        previous = MARK.match(lines[index - 1]) if index > 0 else None
        if previous:
            mark, reason = previous.group("kind"), previous.group("reason").strip()
            if not re.search(r"[A-Za-z]{2}", reason):
                errors.append(f"{relative}:{index}: the `{mark}` mark gives no reason")
            if language not in PYTHON | SHELL:
                errors.append(f"{relative}:{index}: a `{mark}` mark before a {language or 'plain'} block, "
                              "which is never run")
            if mark == "not run" and language in PYTHON:
                errors.append(f"{relative}:{index}: a Python block is run or a fragment, never `not run`")
        if language in PYTHON | SHELL:
            blocks.append(Block(relative, index + 1, language, body, mark, reason))
        index = end + 1
    return blocks, errors


@functools.lru_cache(maxsize=None)
def modules_of(interpreter):
    """Which of OPTIONAL_MODULES `interpreter` can import."""
    probe = ("import importlib.util, sys\n"
             f"print(' '.join(m for m in {sorted(OPTIONAL_MODULES)!r} if importlib.util.find_spec(m)))")
    # Its own limit: a test that lowers TIMEOUT_S for a block may be the
    # first to call this, and an interpreter's start on a loaded machine is
    # no block that never ends.
    result = subprocess.run([interpreter, "-c", probe], capture_output=True, text=True, timeout=120)
    return frozenset(result.stdout.split()) if result.returncode == 0 else frozenset()


def imports_of(text):
    names = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    names.update(re.findall(r"""\bto=["'](torch|jax)["']""", text))  # batches(..., to="torch") imports it
    return names & OPTIONAL_MODULES


def interpreters():
    extra = [path for path in os.environ.get("BACKPLANE_DOCS_PYTHONS", "").split(os.pathsep) if path]
    return [sys.executable] + [path for path in extra if os.path.realpath(path) != os.path.realpath(sys.executable)]


def python_traceback_line(block, output, script):
    """The doc line of the last frame of the block's own file in a traceback."""
    found = re.findall(r'File "' + re.escape(str(script)) + r'", line (\d+)', output)
    return block.line + int(found[-1]) if found else None


def upload_fixtures(fixtures):
    """Puts every fixture in the test server's bucket, under its path in the
    fixtures directory, and points the blocks at the server; False without one."""
    control = os.environ.get("BACKPLANE_TEST_S3_CONTROL")
    if not control:
        return False
    import socket
    for path in sorted(fixtures.rglob("*")):
        if not path.is_file():
            continue
        with socket.create_connection(("127.0.0.1", int(control))) as connection:
            connection.sendall(f"put {path.relative_to(fixtures)} {path}\n".encode())
            answer = connection.makefile().readline().strip()
        if answer != "ok":
            raise RuntimeError(f"putting {path.relative_to(fixtures)} on the test server: {answer}")
    os.environ["AWS_ENDPOINT_URL"] = os.environ["BACKPLANE_TEST_S3_ENDPOINT"]
    return True


def prepare(root, build_root, fixtures, block, directory):
    shutil.copytree(fixtures, directory, symlinks=True)
    if block.language in SHELL:
        for entry in root.iterdir():
            if entry.name not in {"build", ".git"} and not (directory / entry.name).exists():
                (directory / entry.name).symlink_to(entry)
        (directory / "build").symlink_to(build_root)


def run(root, build_root, fixtures, block, scratch, server):
    """None when the block ran, "skipped" (said why) or the failure."""
    if "s3://" in block.text and not server:
        print(f"skipped {block.where}: it reads s3:// objects, and no test server was started "
              "(tests/remote/object_servers.py: SeaweedFS is not installed)")
        return "skipped"
    directory = scratch / f"{block.path.replace('/', '_')}-{block.line}"
    prepare(root, build_root, fixtures, block, directory)
    if block.language in PYTHON:
        try:
            needed = imports_of(block.text)
        except SyntaxError as error:
            return f"{block.where}: python block: line {block.line + (error.lineno or 0)}: {error.msg}"
        usable = [path for path in interpreters() if needed <= modules_of(path)]
        if not usable:
            print(f"skipped {block.where}: python block imports {', '.join(sorted(needed))}, which none of "
                  f"{', '.join(interpreters())} has")
            return "skipped"
        script = directory / f"{directory.name}.py"
        command = [usable[0], str(script)]
    else:
        builds = BUILDS.search(block.text)
        if builds:
            return (f"{block.where}: sh block runs `{builds.group(0)}` (a build, an install or a benchmark): "
                    "mark it `<!-- not run: WHY -->` on the line before the fence, or make it a quick check")
        script = directory / f"{directory.name}.sh"
        command = ["bash", "-e", "-o", "pipefail", str(script)]
    script.write_text(block.text, encoding="utf-8")
    # A session of its own, so that a block that times out goes with every
    # process it started.
    process = subprocess.Popen(command, cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    start = time.monotonic()
    try:
        output, _ = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return f"{block.where}: {block.language} block did not finish in {TIMEOUT_S} s (a stream that never ends?)"
    if process.returncode != 0:
        output = output.strip()
        line = python_traceback_line(block, output, script) if block.language in PYTHON else None
        at = f" (error at {block.path}:{line})" if line else ""
        tail = "\n    ".join(output.splitlines()[-12:])
        return f"{block.where}: {block.language} block exited with {process.returncode}{at} ({command[0]}):\n    {tail}"
    print(f"ran {block.where} ({block.language}, {command[0]}, {time.monotonic() - start:.1f} s)")
    return None


def check(root, build_root):
    """The failures of every document under `root` (README.md, docs/*.md),
    each naming its file and line; prints what ran, what was skipped and each
    mark's reason."""
    root, build_root = pathlib.Path(root).resolve(), pathlib.Path(build_root).resolve()
    documents = ["README.md"] + sorted(str(path.relative_to(root)) for path in (root / "docs").glob("*.md"))
    blocks, errors, skipped = [], [], []
    for document in documents:
        found, wrong = parse(root, document)
        blocks += found
        errors += wrong
    fragments = [block for block in blocks if block.mark == "fragment"]
    not_run = [block for block in blocks if block.mark == "not run"]
    if blocks and 2 * len(fragments) >= len(blocks):
        errors.append(f"{len(fragments)} of the {len(blocks)} Python and shell blocks are marked fragments: "
                      "fragments must stay fewer than half (make blocks run instead)")
    with tempfile.TemporaryDirectory(prefix="doc-blocks-") as temporary:
        scratch = pathlib.Path(temporary)
        fixtures = scratch / "fixtures"
        for seed, (relative, writer) in enumerate(FIXTURES.items()):
            (fixtures / relative).parent.mkdir(parents=True, exist_ok=True)
            writer(fixtures / relative, seed)
        server = upload_fixtures(fixtures)
        for block in blocks:
            if block.mark:
                print(f"{block.mark} {block.where} ({block.language}): {block.reason}")
                continue
            failure = run(root, build_root, fixtures, block, scratch, server)
            if failure == "skipped":
                skipped.append(block)
            elif failure:
                errors.append(failure)
    ran = len(blocks) - len(fragments) - len(not_run) - len(skipped)
    print(f"{len(blocks)} Python and shell blocks in {len(documents)} documents: {ran} run, "
          f"{len(skipped)} skipped (a module or the test server missing), {len(not_run)} not run (build, install, fuzz or benchmark), "
          f"{len(fragments)} fragments")
    return errors


def main():
    errors = check(sys.argv[1], sys.argv[2])
    for error in errors:
        print(f"FAILED {error}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
