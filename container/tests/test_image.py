"""Tests of Strata's container image, built by scripts/build-image.sh with buildah from the
binary this test run already built (STRATA_BIN), as CI does.

buildah's OCI runtime cannot create namespaces on this kind of machine, so the binary runs
with `buildah run --isolation chroot` (the image's root, user and mounts, the host's network),
and a second test unpacks the image's root filesystem, mounts it read-only, and runs the server
from it as user 65532 with only /data writable: what `readOnlyRootFilesystem` means in the chart.
"""
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = os.environ.get("STRATA_BIN", str(ROOT / "target" / "debug" / "strata"))
TAG = f"localhost/strata:test-{os.getpid()}"
HADOLINT = ROOT / ".tools" / "py" / "bin" / "hadolint"


def run(*args, **kwargs):
    return subprocess.run(list(args), capture_output=True, text=True, check=True, **kwargs)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, process, log):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, f"server exited: {log.read_text()}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"not ready: {log.read_text()}")


def stop_server(port, process):
    """SIGTERM to the server itself (buildah does not forward signals); it must stop cleanly."""
    pids = run("pgrep", "-f", f"^/usr/local/bin/strata serve --listen 127.0.0.1:{port}( |$)").stdout.split()
    assert pids, "server process not found"
    for pid in pids:
        os.kill(int(pid), signal.SIGTERM)
    process.wait(timeout=30)


@pytest.fixture(scope="module")
def image():
    if not (ROOT / ".tools" / "seaweedfs" / "bin" / "weed").exists():
        run("bash", str(ROOT / "scripts" / "start-s3.sh"))  # installs the pinned weed binary
    run("bash", str(ROOT / "scripts" / "build-image.sh"), "--binary", BINARY, "--tag", TAG, "--dev-s3")
    yield TAG
    subprocess.run(["buildah", "rmi", "-f", TAG], capture_output=True)


@pytest.fixture
def container(image):
    name = run("buildah", "from", image).stdout.strip()
    yield name
    subprocess.run(["buildah", "rm", name], capture_output=True)


def test_image_config(image):
    config = json.loads(run("buildah", "inspect", "--type", "image", image).stdout)["OCIv1"]["config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["/usr/local/bin/strata"]
    assert config["Cmd"] == ["serve"]
    assert "/data" in config["Volumes"]
    assert "8080/tcp" in config["ExposedPorts"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == run(BINARY, "--version").stdout.split()[1]
    assert labels["org.opencontainers.image.source"]
    assert labels["org.opencontainers.image.revision"] != ""


def test_version_runs_inside_the_image(container):
    out = run("buildah", "run", "--isolation", "chroot", container, "--", "strata", "--version").stdout
    assert out == run(BINARY, "--version").stdout


def test_serve_and_check_inside_the_image(container, tmp_path):
    # Not under tmp_path: buildah's chroot isolation needs the volume's parents searchable by
    # the image's user, and pytest makes its directories 0700.
    data = pathlib.Path(tempfile.mkdtemp(prefix="strata-image-"))
    data.chmod(0o755)
    os.chown(data, 65532, 65532)
    port = free_port()
    log = tmp_path / "serve.log"
    server = subprocess.Popen(
        # buildah run mounts its own volume over an image VOLUME (/data), whatever -v says, so
        # the host folder goes elsewhere; the read-only test below uses /data itself.
        ["buildah", "run", "--isolation", "chroot", "-v", f"{data}:/srv/strata", container, "--",
         "/usr/local/bin/strata", "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", "/srv/strata"],
        stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        wait_ready(port, server, log)
        # The helm test Pod's command, from the same image.
        check = run("buildah", "run", "--isolation", "chroot", container, "--",
                    "strata", "check", "--url", f"http://127.0.0.1:{port}")
        assert json.loads(check.stdout)["check"] == "ok"
        # buildah's seccomp profile may block io_uring, as a Kubernetes runtime's can: the
        # fallback must then show in the log and in the metrics, and they must agree.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            metrics = answer.read().decode()
        fell_back = "falling back to the sync io backend" in log.read_text()
        backend = "sync" if fell_back else "io_uring"
        assert f'io_backend="{backend}"' in metrics, metrics
    finally:
        stop_server(port, server)
    # The server ran as the image's user.
    assert (data / "topics").is_dir()
    assert (data / "topics").stat().st_uid == 65532
    shutil.rmtree(data)


def test_read_only_root_filesystem_as_non_root(container, tmp_path):
    root = run("buildah", "mount", container).stdout.strip()
    data = tmp_path / "data"
    data.mkdir()
    os.chown(data, 65532, 65532)
    port = free_port()
    log = tmp_path / "serve.log"
    read_only = tmp_path / "rootfs"
    read_only.mkdir()
    script = (f"mount --bind {root} {read_only} && mount -o remount,bind,ro {read_only} && "
              f"mount --bind {data} {read_only}/data && "
              f"exec chroot --userspec=65532:65532 {read_only} /usr/local/bin/strata serve --listen 127.0.0.1:{port}")
    server = subprocess.Popen(["unshare", "-m", "sh", "-c", script], stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        wait_ready(port, server, log)
    finally:
        stop_server(port, server)
        subprocess.run(["buildah", "umount", container], capture_output=True)
    assert server.returncode == 0, log.read_text()
    assert "stopped cleanly" in log.read_text()
    assert (data / "topics").stat().st_uid == 65532


def test_dev_s3_image_runs_seaweedfs(image):
    version = run("sed", "-n", "s/^SEAWEEDFS_VERSION=//p", str(ROOT / "scripts" / "start-s3.sh")).stdout.strip()
    name = run("buildah", "from", f"localhost/strata-dev-s3:{version}").stdout.strip()
    try:
        out = run("buildah", "run", "--isolation", "chroot", name, "--", "weed", "version").stdout
        assert version in out
    finally:
        subprocess.run(["buildah", "rm", name], capture_output=True)


def test_containerfiles_pass_hadolint():
    """The from-source Containerfile is checked, not built, in CI (it would compile Rust again)."""
    files = sorted(str(p) for p in (ROOT / "container").glob("Containerfile*"))
    assert len(files) == 3
    result = subprocess.run([str(HADOLINT), *files], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
