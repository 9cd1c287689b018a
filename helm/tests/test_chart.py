"""Tests of the Helm chart helm/strata, run by scripts/check-helm.sh with the real `helm`.

Each value set is linted, rendered, validated against the Kubernetes OpenAPI schemas of the
oldest and newest Kubernetes the chart supports, compared with its golden render, and asserted
on. Invalid values files must be rejected. And the rendered configuration must really start
Strata: tests/pod.py runs the real binary with the rendered ConfigMap, env and args, then does
what the kubelet (probes) and `helm test` (the test Pod's command) would.
"""
import json
import os
import pathlib
import subprocess
import tomllib

import kubernetes_validate
import pytest
import yaml

import pod

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "strata"
GOLDEN = ROOT / "helm" / "tests" / "golden"
BAD = ROOT / "helm" / "tests" / "bad-values"
HELM = os.environ.get("STRATA_HELM", "helm")
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest with schemas.
KUBE_VERSIONS = ["1.30.0", "1.35.0"]
# Custom resources have no schema in kubernetes-validate; tests below assert on them instead.
CUSTOM_KINDS = {"ServiceMonitor", "Certificate"}

VALUE_SETS = {
    "defaults": [],
    "s3": ["ci/s3-values.yaml"],
    "tls": ["ci/tls-values.yaml"],
    "auth": ["ci/auth-values.yaml"],
    "metrics": ["ci/metrics-values.yaml"],
    "pdb-networkpolicy": ["ci/pdb-networkpolicy-values.yaml"],
    "dev": ["values-dev.yaml"],
    "production": ["ci/production-values.yaml"],
}


def helm(*args, check=True):
    return subprocess.run([HELM, *args], capture_output=True, text=True, check=check)


def render_text(files, *extra, kube_version=KUBE_VERSIONS[-1]):
    args = ["template", "rel", str(CHART), "--namespace", "ci", "--kube-version", kube_version]
    for name in files:
        args += ["-f", str(CHART / name)]
    return helm(*args, *extra).stdout


def render(files, *extra):
    return [doc for doc in yaml.safe_load_all(render_text(files, *extra)) if doc]


def find(docs, kind, name=None):
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert found, f"no {kind} {name or ''} rendered"
    return found[0]


def container(docs):
    return find(docs, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]


def strata_toml(docs):
    return tomllib.loads(find(docs, "ConfigMap", "rel-strata")["data"]["strata.toml"])


@pytest.mark.parametrize("name", VALUE_SETS)
def test_lint_strict(name):
    args = ["lint", "--strict", str(CHART)]
    for f in VALUE_SETS[name]:
        args += ["-f", str(CHART / f)]
    result = helm(*args, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("version", KUBE_VERSIONS)
@pytest.mark.parametrize("name", VALUE_SETS)
def test_valid_for_kubernetes(name, version):
    docs = [d for d in yaml.safe_load_all(render_text(VALUE_SETS[name], kube_version=version)) if d]
    assert docs
    for doc in docs:
        if doc["kind"] in CUSTOM_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']}: {error.message} at {list(error.path)}")


@pytest.mark.parametrize("name", VALUE_SETS)
def test_golden_render(name):
    """A change to any rendered object shows up as a diff to review (STRATA_UPDATE_GOLDEN=1)."""
    text = render_text(VALUE_SETS[name])
    golden = GOLDEN / f"{name}.yaml"
    if os.environ.get("STRATA_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"{golden} missing: run with STRATA_UPDATE_GOLDEN=1"
    assert text == golden.read_text(), f"render of {name} differs from {golden}"


@pytest.mark.parametrize("bad", sorted(BAD.glob("*.yaml")), ids=lambda p: p.stem)
def test_schema_rejects_bad_values(bad):
    expect = bad.read_text().splitlines()[0].removeprefix("# expect:").strip()
    assert expect, f"{bad} must start with '# expect: <part of the error>'"
    result = helm("template", "rel", str(CHART), "-f", str(bad), check=False)
    assert result.returncode != 0, f"{bad.name} was accepted"
    assert expect in result.stderr, f"{bad.name}: wanted {expect!r} in {result.stderr!r}"


def test_defaults_keep_data_on_a_volume_per_pod():
    docs = render([])
    sts = find(docs, "StatefulSet")
    assert sts["spec"]["replicas"] == 1
    claim = sts["spec"]["volumeClaimTemplates"][0]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert "storageClassName" not in claim["spec"]
    mounts = {m["name"]: m["mountPath"] for m in container(docs)["volumeMounts"]}
    assert mounts["data"] == "/data"
    assert strata_toml(docs)["data_dir"] == "/data"
    assert find(docs, "Service", "rel-strata-headless")["spec"]["clusterIP"] == "None"
    assert sts["spec"]["serviceName"] == "rel-strata-headless"


def test_storage_class_and_size_reach_the_claim():
    sts = find(render(["ci/production-values.yaml"]), "StatefulSet")
    claim = sts["spec"]["volumeClaimTemplates"][0]["spec"]
    assert claim["storageClassName"] == "gp3-iops"
    assert claim["resources"]["requests"]["storage"] == "500Gi"


def test_probes_check_readiness_and_liveness_paths():
    c = container(render([]))
    assert c["startupProbe"]["httpGet"]["path"] == "/readyz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    startup = c["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 3600, "recovery needs time"
    assert {p["httpGet"]["scheme"] for p in (c["startupProbe"], c["livenessProbe"])} == {"HTTP"}
    tls = container(render(["ci/tls-values.yaml"]))
    assert tls["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"


def test_pods_run_locked_down():
    docs = render([])
    pod_spec = find(docs, "StatefulSet")["spec"]["template"]["spec"]
    assert pod_spec["securityContext"]["runAsNonRoot"] is True
    assert pod_spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod_spec["automountServiceAccountToken"] is False
    sc = container(docs)["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    test_pod = find(docs, "Pod")
    assert test_pod["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def test_grace_period_covers_the_drain():
    for files in ([], ["ci/production-values.yaml"]):
        docs = render(files)
        shutdown_ms = strata_toml(docs).get("shutdown_timeout_ms", 30000)
        spec = find(docs, "StatefulSet")["spec"]["template"]["spec"]
        pre_stop = spec["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]
        assert spec["terminationGracePeriodSeconds"] > shutdown_ms / 1000 + pre_stop


def test_config_values_reach_the_toml_with_their_types():
    toml = strata_toml(render(["ci/production-values.yaml"]))
    assert toml["max_request_bytes"] == 33554432 and isinstance(toml["max_request_bytes"], int)
    assert toml["tiering_chunk_cache_bytes"] == 1073741824
    assert toml["access_log_sample_rate"] == pytest.approx(0.1)
    assert toml["auth_super_users"] == ["platform-admin"]
    assert toml["tls_client_ca_file"] == "/etc/strata/tls/ca.crt"
    auth = strata_toml(render(["ci/auth-values.yaml"]))
    assert auth["auth_acls"][0]["resource_name"] == "pay."
    assert auth["auth_quotas"]["batch-importer"]["produce_bytes_per_second"] == 524288000
    assert auth["auth_keys_file"] == "/etc/strata/auth/keys.json"
    # --set gives integers, values files floats: both must come out as TOML integers.
    overridden = strata_toml(render([], "--set", "config.max_connections=77"))
    assert overridden["max_connections"] == 77


def test_the_archive_signing_key_comes_from_its_secret():
    """A pod on an empty volume needs the key the bucket was signed with, or it refuses to start."""
    docs = render(["ci/production-values.yaml"])
    assert strata_toml(docs)["archive_signing_key_file"] == "/etc/strata/archive/signing.key"
    spec = find(docs, "StatefulSet")["spec"]["template"]["spec"]
    volume = next(v for v in spec["volumes"] if v["name"] == "archive-key")
    assert volume["secret"]["secretName"] == "strata-archive-key"
    assert volume["secret"]["items"] == [{"key": "signing.key", "path": "signing.key"}]
    mounts = {m["name"]: m for m in container(docs)["volumeMounts"]}
    assert mounts["archive-key"]["mountPath"] == "/etc/strata/archive"
    assert mounts["archive-key"]["readOnly"] is True
    assert "archive_signing_key_file" not in strata_toml(render([]))


def test_config_changes_roll_the_pods():
    def checksum(*extra):
        return find(render([], *extra), "StatefulSet")["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    assert checksum() != checksum("--set", "config.max_connections=77")


def test_s3_credentials_come_from_the_secret():
    env = {e["name"]: e for e in container(render(["ci/s3-values.yaml"]))["env"]}
    ref = env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "strata-s3", "key": "secret-access-key"}
    assert "AWS_ACCESS_KEY_ID" not in {e["name"] for e in container(render([])).get("env") or []}


def test_irsa_annotation_on_the_service_account():
    sa = find(render(["ci/production-values.yaml"]), "ServiceAccount")
    assert sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")


def test_service_monitor_scrapes_the_service_port():
    docs = render(["ci/metrics-values.yaml"])
    monitor = find(docs, "ServiceMonitor")
    ports = {p["name"] for p in find(docs, "Service", "rel-strata")["spec"]["ports"]}
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["port"] in ports and endpoint["path"] == "/metrics"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["selector"]["matchLabels"] == find(docs, "StatefulSet")["spec"]["selector"]["matchLabels"]


def test_dashboard_is_the_repository_dashboard_bound_to_a_datasource():
    text = find(render(["ci/metrics-values.yaml"]), "ConfigMap", "rel-strata-dashboard")["data"]["strata.json"]
    assert "${DS_PROMETHEUS}" not in text and "prom-main" in text
    shipped = (ROOT / "dashboards" / "strata.json").read_text()
    assert (CHART / "dashboards" / "strata.json").read_text() == shipped, "copy dashboards/strata.json into the chart"
    assert json.loads(text)["title"] == json.loads(shipped)["title"]


def test_certificate_covers_the_service_names():
    cert = find(render(["ci/production-values.yaml"]), "Certificate")
    names = cert["spec"]["dnsNames"]
    assert "rel-strata.ci.svc" in names and "strata.internal.example.com" in names
    assert cert["spec"]["secretName"] == "rel-strata-tls"
    assert cert["spec"]["issuerRef"]["kind"] == "ClusterIssuer"


def test_pdb_and_network_policy():
    docs = render(["ci/pdb-networkpolicy-values.yaml"])
    assert find(docs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    policy = find(docs, "NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    peers = policy["ingress"][0]["from"]
    assert {"podSelector": {"matchLabels": {"strata-client": "true"}}} in peers
    kinds = {d["kind"] for d in render([])}
    assert not kinds & {"PodDisruptionBudget", "NetworkPolicy", "ServiceMonitor", "Certificate"}


def test_dev_values_start_seaweedfs_and_point_strata_at_it():
    docs = render(["values-dev.yaml"])
    s3 = find(docs, "Deployment", "rel-strata-dev-s3")
    args = s3["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "-bucket=strata" in args
    toml = strata_toml(docs)
    assert toml["tiered_storage_url"] == "s3://strata/strata"
    assert toml["tiered_storage_s3_endpoint"] == "http://rel-strata-dev-s3:8333"
    sts = find(docs, "StatefulSet")
    assert "volumeClaimTemplates" not in sts["spec"]
    assert {"name": "data", "emptyDir": {"sizeLimit": "5Gi"}} in sts["spec"]["template"]["spec"]["volumes"]


def test_selectors_pick_only_the_strata_pods():
    """The demo S3 and the test Pod carry the release's labels too: no selector may match them."""
    docs = render(["values-dev.yaml", "ci/metrics-values.yaml", "ci/pdb-networkpolicy-values.yaml"])
    def matches(selector, labels):
        return all(labels.get(k) == v for k, v in selector.items())
    others = [find(docs, "Deployment")["spec"]["template"]["metadata"]["labels"],
              find(docs, "Pod")["metadata"]["labels"]]
    server = find(docs, "StatefulSet")["spec"]["template"]["metadata"]["labels"]
    selectors = [find(docs, "StatefulSet")["spec"]["selector"]["matchLabels"],
                 find(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
                 find(docs, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"]]
    selectors += [s["spec"]["selector"] for s in docs if s["kind"] == "Service" and "dev-s3" not in s["metadata"]["name"]]
    for selector in selectors:
        assert matches(selector, server), selector
        assert not any(matches(selector, labels) for labels in others), selector
    # The ServiceMonitor scrapes the client Service only, not the headless one (no double scrape).
    monitor = find(docs, "ServiceMonitor")["spec"]["selector"]["matchLabels"]
    scraped = [s["metadata"]["name"] for s in docs if s["kind"] == "Service" and matches(monitor, s["metadata"]["labels"])]
    assert scraped == ["rel-strata"]


def test_test_pod_checks_through_the_client_service():
    test_pod = find(render([]), "Pod")
    assert test_pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    args = test_pod["spec"]["containers"][0]["args"]
    assert args[:3] == ["check", "--url", "http://rel-strata.ci.svc:8080"]


def test_schema_file_is_generated_from_make_schema():
    result = subprocess.run(["python3", str(ROOT / "helm" / "tools" / "make_schema.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_chart_readme_documents_every_value():
    result = subprocess.run(["python3", str(ROOT / "scripts" / "helm_docs.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rendered_defaults_start_strata_and_pass_the_helm_test(tmp_path):
    docs = render([])
    with pod.StrataPod(docs, tmp_path) as running:
        running.check_probes()
        assert running.helm_test()["records"] == 10


def test_rendered_tls_and_auth_start_strata_and_pass_the_helm_test(tmp_path):
    certs = pod.make_certificates(tmp_path / "pki")
    keys, token = pod.make_key(tmp_path / "keys.json", "admin")
    secrets = {
        "strata-tls": certs,
        "strata-keys": {"keys.json": keys},
        "strata-test-token": {"token": token},
    }
    docs = render(["ci/tls-values.yaml", "ci/auth-values.yaml"])
    with pod.StrataPod(docs, tmp_path, secrets) as running:
        running.check_probes()
        assert running.helm_test()["records"] == 10
        # The check fails when it should: without the token the server refuses it.
        refused = running.helm_test(drop_env={"STRATA_CHECK_TOKEN"}, expect_ok=False)
        assert "401" in refused


def test_rendered_s3_values_tier_to_a_real_s3_server(tmp_path):
    s3 = pod.start_s3(ROOT)
    prefix = f"helm-{os.getpid()}-{tmp_path.name}"
    docs = render(["ci/s3-values.yaml"],
                  "--set", f"config.tiered_storage_url=s3://{s3['STRATA_TEST_S3_BUCKET']}/{prefix}",
                  "--set", f"config.tiered_storage_s3_endpoint={s3['STRATA_TEST_S3_ENDPOINT']}",
                  "--set", "config.tiered_storage_s3_region=us-east-1")
    secrets = {"strata-s3": {"access-key-id": s3["AWS_ACCESS_KEY_ID"],
                             "secret-access-key": s3["AWS_SECRET_ACCESS_KEY"]}}
    with pod.StrataPod(docs, tmp_path, secrets) as running:
        running.check_probes()
        assert running.helm_test()["records"] == 10
    # The credentials really came from the Secret: with a wrong one Strata refuses to start
    # (its start-up probe writes to the bucket).
    wrong = {"strata-s3": dict(secrets["strata-s3"], **{"secret-access-key": "wrong"})}
    failed = pod.start_fails(docs, tmp_path / "wrong", wrong)
    assert "tiered storage" in failed, failed
