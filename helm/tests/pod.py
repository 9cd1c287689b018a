"""Runs a rendered chart's Strata pod as a local process: the kubelet's part, without Kubernetes.

The StatefulSet's container is started from the real binary with exactly its args and env, and
its volumes are files in a temporary root: every mountPath P becomes <root>/P, ConfigMaps and
Secrets are written there as the kubelet would project them. The only rewriting is of those
mount paths (in args, env and the config file) and of the listen address (127.0.0.1 on a free
port instead of 0.0.0.0:8080). Then the probes are hit as the kubelet would (HTTPS without
verification), and the `helm test` Pod's command runs against the Service, which is this port.
"""
import json
import os
import pathlib
import re
import signal
import socket
import ssl
import subprocess
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = os.environ.get("STRATA_BIN", str(ROOT / "target" / "debug" / "strata"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find(docs, kind):
    return next(d for d in docs if d["kind"] == kind)


class StrataPod:
    def __init__(self, docs, root, secrets=None):
        self.docs = docs
        self.root = pathlib.Path(root)
        self.secrets = secrets or {}
        self.port = free_port()
        self.process = None
        self.log = self.root / "strata.log"
        sts = find(docs, "StatefulSet")
        self.pod_spec = sts["spec"]["template"]["spec"]
        self.container = self.pod_spec["containers"][0]
        self.grace = self.pod_spec["terminationGracePeriodSeconds"]
        self.mounts = {}
        self.env = {}

    # ---- the kubelet's part: volumes, env, start, probes, stop ----
    def relocate(self, text):
        for mount_path in sorted(self.mounts, key=len, reverse=True):
            text = re.sub(rf"(?<![\w/]){re.escape(mount_path)}(?=/|\"|$|\s)", str(self.root) + mount_path, text)
        return text.replace(f"0.0.0.0:{self.container_port()}", f"127.0.0.1:{self.port}")

    def container_port(self):
        return self.container["ports"][0]["containerPort"]

    def project_volumes(self, pod_spec, container):
        volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
        for mount in container.get("volumeMounts", []):
            path = self.root / mount["mountPath"].lstrip("/")
            path.mkdir(parents=True, exist_ok=True)
            self.mounts[mount["mountPath"]] = path
            volume = volumes.get(mount["name"])  # None: a volumeClaimTemplate (an empty volume)
            if volume is None or "emptyDir" in volume:
                continue
            if "configMap" in volume:
                data = next(d for d in self.docs if d["kind"] == "ConfigMap"
                            and d["metadata"]["name"] == volume["configMap"]["name"])["data"]
                files = data
            elif "secret" in volume:
                name = volume["secret"]["secretName"]
                data = self.secrets[name]
                items = volume["secret"].get("items")
                files = {i["path"]: data[i["key"]] for i in items} if items else data
            else:
                raise AssertionError(f"volume kind not handled: {volume}")
            for file_name, content in files.items():
                (path / file_name).write_text(content)

    def resolve_env(self, container):
        env = {}
        for item in container.get("env") or []:
            if "value" in item:
                env[item["name"]] = item["value"]
            elif "secretKeyRef" in item.get("valueFrom", {}):
                ref = item["valueFrom"]["secretKeyRef"]
                env[item["name"]] = self.secrets[ref["name"]][ref["key"]]
        return env

    def start(self):
        self.project_volumes(self.pod_spec, self.container)
        # The config file as the pod sees it, with mount paths moved under the temporary root.
        for mount_path in self.mounts:
            for file in self.mounts[mount_path].glob("*.toml"):
                file.write_text(self.relocate(file.read_text()))
        self.env = {k: self.relocate(v) for k, v in self.resolve_env(self.container).items()}
        args = [self.relocate(a) for a in self.container["args"]]
        self.process = subprocess.Popen([BINARY, *args], env=self.env, stdout=self.log.open("w"),
                                        stderr=subprocess.STDOUT)
        return self

    def probe(self, probe):
        get = probe["httpGet"]
        scheme = get["scheme"].lower()
        context = ssl._create_unverified_context() if scheme == "https" else None  # as the kubelet
        url = f"{scheme}://127.0.0.1:{self.port}{get['path']}"
        try:
            with urllib.request.urlopen(url, timeout=probe["timeoutSeconds"], context=context) as answer:
                return answer.status
        except urllib.error.HTTPError as error:
            return error.code
        except OSError:
            return None

    def check_probes(self):
        startup = self.container["startupProbe"]
        deadline = time.monotonic() + 60
        while self.probe(startup) != 200:
            assert self.process.poll() is None, f"strata exited: {self.log.read_text()}"
            assert time.monotonic() < deadline, f"startup probe never passed: {self.log.read_text()}"
            time.sleep(0.1)
        assert self.probe(self.container["readinessProbe"]) == 200
        assert self.probe(self.container["livenessProbe"]) == 200

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                code = self.process.wait(timeout=self.grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                raise AssertionError("strata did not stop within terminationGracePeriodSeconds")
            assert code == 0, f"strata exited {code} on SIGTERM: {self.log.read_text()}"

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- helm test: the test Pod's command against the Service (this port) ----
    def helm_test(self, drop_env=(), expect_ok=True):
        test_pod = find(self.docs, "Pod")
        spec, container = test_pod["spec"], test_pod["spec"]["containers"][0]
        scratch = StrataPod(self.docs, self.root / "test-pod", self.secrets)
        scratch.project_volumes(spec, container)
        env = {k: scratch.relocate(v) for k, v in scratch.resolve_env(container).items() if k not in drop_env}
        service = re.compile(r"^(https?)://[^/]+$")
        args = [service.sub(rf"\1://127.0.0.1:{self.port}", a) for a in container["args"]]
        assert args != container["args"], "the test Pod's command has no service URL"
        result = subprocess.run([BINARY, *args], env=env, capture_output=True, text=True, timeout=120)
        if not expect_ok:
            assert result.returncode != 0, f"helm test passed but should not: {result.stdout}"
            return result.stderr
        assert result.returncode == 0, f"helm test failed: {result.stderr}\n{self.log.read_text()}"
        return json.loads(result.stdout.strip().splitlines()[-1])


def start_fails(docs, root, secrets):
    """Starts the pod and expects Strata to exit during start-up; returns its log."""
    root.mkdir(parents=True, exist_ok=True)
    running = StrataPod(docs, root, secrets).start()
    try:
        code = running.process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        running.process.kill()
        raise AssertionError("strata started although it should not have")
    assert code != 0
    return running.log.read_text()


def make_certificates(directory):
    """A CA and a server certificate for 127.0.0.1 and the Service name, as a TLS Secret holds them."""
    directory.mkdir(parents=True)
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-days", "2", "-subj", "/CN=strata-test-ca", "-keyout", "ca.key", "-out", "ca.crt")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-subj", "/CN=rel-strata", "-addext",
            "subjectAltName=DNS:rel-strata.ci.svc,IP:127.0.0.1", "-keyout", "tls.key", "-out", "tls.csr")
    openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-copy_extensions", "copy", "-out", "tls.crt")
    return {name: (directory / name).read_text() for name in ("tls.crt", "tls.key", "ca.crt")}


def make_key(path, principal):
    """An API key file with one key, made by `strata auth create-key`; returns (file, token)."""
    result = subprocess.run([BINARY, "auth", "create-key", "--principal", principal,
                             "--auth-keys-file", str(path)], capture_output=True, text=True, check=True)
    return path.read_text(), result.stdout.strip().splitlines()[-1]


def start_s3(root):
    """The project's SeaweedFS (scripts/start-s3.sh): its settings as a dict."""
    out = subprocess.run(["bash", str(root / "scripts" / "start-s3.sh")], capture_output=True,
                         text=True, check=True).stdout
    return dict(line.removeprefix("export ").split("=", 1) for line in out.splitlines() if line.startswith("export "))
