"""Dask's TLS, passed through (docs/cluster.md §6): a real `dask scheduler`
and two `dask worker` processes that speak only TLS, certificates in files,
and the trainer configured the way the docs say (Dask config through
DASK_DISTRIBUTED__COMM__TLS__* variables, a tls:// address)."""
from __future__ import annotations

import datetime
import ipaddress
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lancetnic_flow.data.synth import write_corpus

from servers import scheduler_address, stop_processes

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (it is its own CA) and its key, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lancetnic-flow test cluster")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tls")
    cert, key = _certificate(tmp)
    tls = ["--tls-ca-file", str(cert), "--tls-cert", str(cert), "--tls-key", str(key)]
    sched_file = tmp / "scheduler.json"
    env = {**os.environ, "ARROW_DEFAULT_MEMORY_POOL": "system"}
    procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--protocol", "tls", "--host", "127.0.0.1",
                               "--port", "0", "--no-dashboard", "--scheduler-file", str(sched_file), *tls],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)]
    try:
        address = scheduler_address(sched_file)
        assert address.startswith("tls://"), address
        for i in range(2):
            procs.append(subprocess.Popen([str(BIN / "dask"), "worker", address, "--nthreads", "1",
                                           "--memory-limit", "1GiB", "--no-dashboard", "--name", f"tls{i}",
                                           "--local-directory", str(tmp / f"w{i}"), *tls],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
        # The trainer's side, as docs/cluster.md says: Dask's own config, here as environment variables.
        client_env = {**env, "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(cert),
                      "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": str(cert),
                      "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": str(key),
                      "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True"}
        from distributed import Client
        from distributed.security import Security

        sec = Security(tls_ca_file=str(cert), tls_client_cert=str(cert), tls_client_key=str(key),
                       require_encryption=True)
        with Client(address, security=sec, timeout="30s") as c:
            c.wait_for_workers(2, timeout=60)
        yield {"address": address, "env": client_env, "plain_env": env}
    finally:
        stop_processes(procs)


def _train(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lancetnic_flow", "train", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def test_train_and_ddp_on_a_tls_only_cluster_configured_through_dask_config(tls_cluster, tmp_path):
    data = tmp_path / "train.csv"
    write_corpus(str(data), 3000, classes=3, seed=4)
    r = _train([str(data), "--scheduler", tls_cluster["address"], "--epochs", "2", "--batch-size", "64",
                "--buckets", "65536", "--ddp", "2", "--out", str(tmp_path / "runs"), "--name", "tls"], tls_cluster["env"])
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((tmp_path / "runs" / "tls" / "metrics.json").read_text())
    assert m["memory"]["plan"]["external"] is True and m["memory"]["plan"]["workers"] == 2
    assert m["ddp"]["ranks"] == 2 and all(w.startswith("tls://") for w in m["ddp"]["workers"])
    assert m["rows"]["read"] == 3000 and m["val_accuracy"] > 0.7
    # Dask's TLS does not cover torch.distributed: the run says so.
    assert "gradient exchange is not" in r.stderr


def test_a_tls_cluster_without_certificates_is_a_user_error(tls_cluster, tmp_path):
    data = tmp_path / "train.csv"
    write_corpus(str(data), 200, classes=3, seed=4)
    r = _train([str(data), "--scheduler", tls_cluster["address"], "--out", str(tmp_path / "runs")],
               tls_cluster["plain_env"])
    out = r.stdout + r.stderr
    assert r.returncode == 2, out[-3000:]
    assert "Traceback" not in out and out.count("error:") == 1, out[-3000:]
    assert tls_cluster["address"] in out and "tls" in out.lower()
