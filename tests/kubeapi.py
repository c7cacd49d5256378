"""The cluster tier's Kubernetes: etcd, kube-apiserver and kube-controller-manager on loopback, envtest-style.

No node, scheduler, kubelet or workload controller runs: the API server accepts Namespaces, CRDs,
Deployments, Secrets and custom resources for real, and the controller manager runs only the
namespace, garbage-collector and service-account controllers (the Kubernetes provider deletes with
foreground propagation, which needs the garbage collector; a Namespace is emptied by the namespace
controller). Whatever a controller would write into a status is written by the tests themselves
(tests/kube_standin.py), the way envtest-based tests do.

Nothing here builds or downloads a binary: `missing_binaries()` names the ones absent from PATH and the
tier is skipped with that reason. Every process gets its own process group and dies with the test
process (PR_SET_PDEATHSIG), on `stop()`, and at exit, so none is left behind even when pytest is killed.
"""

from __future__ import annotations

import atexit
import base64
import ctypes
import datetime
import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
CONTROLLERS = ("namespace-controller,garbage-collector-controller,serviceaccount-controller,"
               "serviceaccount-token-controller,root-ca-certificate-publisher-controller")
# Every change to the cluster, with who made it and through which client: how the tests see what a
# `destroy` deleted, in which order, and that it deleted nothing else.
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
"""
PORT_ATTEMPTS = 3  # starts on new ports when a port chosen free was taken before its server bound it
# Nothing the tests read needs a clean shutdown (the audit log is written as each request completes): an API
# server that lingers in its graceful shutdown (13 s seen, after it had stopped listening) is killed.
STOP_GRACE = 3.0
READY_TIMEOUT = 180.0  # seconds; /readyz answers after ~4 s on a quiet machine, far later at a load of 10


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None]


def skip_reason() -> Optional[str]:
    missing = missing_binaries()
    if not missing:
        return None
    return (f"the cluster tier needs {', '.join(missing)} on PATH (etcd from Debian's etcd-server; kube-apiserver "
            "and kube-controller-manager built from k8s.io/kubernetes as docs/testing.md says)")


def binary_versions() -> dict[str, str]:
    """What each binary says it is (for the README's "run with" line and failure messages)."""
    out = {}
    for name, args in (("etcd", ["--version"]), ("kube-apiserver", ["--version"]),
                       ("kube-controller-manager", ["--version"])):
        try:
            text = subprocess.run([name, *args], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            text = ""
        out[name] = text.strip().splitlines()[0] if text.strip() else "unknown"
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- certificates ----------------------------------------------------------------------------------------

def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def write_certificates(folder: Path) -> dict[str, Path]:
    """A CA, a serving certificate for 127.0.0.1/localhost signed by it, and a service-account key pair."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    valid = dict(not_valid_before=now - datetime.timedelta(minutes=5), not_valid_after=now + datetime.timedelta(days=1))

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("cluster-tier-ca")).issuer_name(name("cluster-tier-ca"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(valid["not_valid_before"]).not_valid_after(valid["not_valid_after"])
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving = (x509.CertificateBuilder().subject_name(name("kube-apiserver")).issuer_name(ca.subject)
               .public_key(serving_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(valid["not_valid_before"]).not_valid_after(valid["not_valid_after"])
               .add_extension(x509.SubjectAlternativeName([
                   x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost"),
                   x509.IPAddress(ipaddress.ip_address("10.0.0.1")), x509.DNSName("kubernetes.default.svc")]),
                   critical=False)
               .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
               .sign(ca_key, hashes.SHA256()))
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    files = {
        "ca": (ca.public_bytes(serialization.Encoding.PEM)),
        "serving-cert": serving.public_bytes(serialization.Encoding.PEM),
        "serving-key": _pem_key(serving_key),
        "sa-key": _pem_key(sa_key),
        "sa-pub": sa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo),
    }
    paths = {}
    for label, data in files.items():
        path = folder / f"{label}.pem"
        path.write_bytes(data)
        path.chmod(0o600)
        paths[label] = path
    return paths


def kubeconfig_text(server: str, ca_pem: bytes, token: str) -> str:
    """A kubeconfig (JSON, which is YAML) for the admin user, its CA inline."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "cluster-tier",
        "clusters": [{"name": "cluster-tier", "cluster": {
            "server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": "cluster-tier", "context": {"cluster": "cluster-tier", "user": "admin"}}],
    }, indent=2)


# -- processes ---------------------------------------------------------------------------------------------

def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the test process goes, however it goes (PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


def _spawn(argv: list[str], log: Path) -> subprocess.Popen:
    handle = log.open("ab")
    try:
        return subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=_die_with_parent)
    finally:
        handle.close()


def _stop_process(proc: subprocess.Popen, grace: float = STOP_GRACE) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # anything its group still holds
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(15.0)
    except subprocess.TimeoutExpired:
        pass


@dataclass
class KubeCluster:
    server: str
    ca_pem: bytes
    token: str = field(repr=False)
    kubeconfig: str = field(repr=False)
    kubeconfig_path: Path
    folder: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    started_seconds: float = 0.0

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=self.ca_pem.decode())

    def request(self, method: str, path: str, body: Optional[dict] = None,
                content_type: str = "application/json", timeout: float = 30.0) -> tuple[int, dict]:
        """One API call as the admin; (HTTP status, decoded body). Errors are returned, not raised."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Accept": "application/json", "Content-Type": content_type})
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.ssl_context()) as resp:
                raw = resp.read()
                return resp.status, (json.loads(raw or b"{}") if raw[:1] in (b"{", b"[", b"") else {"text": raw.decode()})
        except urllib.error.HTTPError as exc:
            try:
                return exc.code, json.loads(exc.read() or b"{}")
            except ValueError:
                return exc.code, {}

    def get(self, path: str) -> Optional[dict]:
        status, doc = self.request("GET", path)
        if status == 404:
            return None
        assert status == 200, f"GET {path}: {status} {doc.get('message')}"
        return doc

    def audit(self) -> list[dict]:
        """The API server's audit events so far (ResponseComplete stage: what was done, and its answer)."""
        path = self.folder / "audit.log"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.folder / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def stop(self) -> None:
        # The controller manager first (it would only retry against a vanishing API), etcd last.
        for name in ("kube-controller-manager", "kube-apiserver", "etcd"):
            proc = self.procs.get(name)
            if proc is not None:
                _stop_process(proc)

    def alive(self) -> list[int]:
        return [p.pid for p in self.procs.values() if p.poll() is None]


class PortTaken(RuntimeError):
    """A server exited because its port was taken: free when chosen, bound by another process before the server
    bound it (another xdist worker's server, or any Pulumi plugin or host, which listen on free ports too)."""


def _wait(what: str, check, cluster: KubeCluster, deadline: float, every: float = 0.25) -> None:
    while time.monotonic() < deadline:
        dead = [n for n, p in cluster.procs.items() if p.poll() is not None]
        if dead:
            tail = cluster.log_tail(dead[0])
            error = PortTaken if "address already in use" in tail else RuntimeError
            raise error(f"{dead[0]} exited with {cluster.procs[dead[0]].returncode} while waiting for {what}:\n{tail}")
        if check():
            return
        time.sleep(every)
    tails = "\n".join(f"--- {n}\n{cluster.log_tail(n, 10)}" for n in cluster.procs)
    raise RuntimeError(f"timed out waiting for {what}\n{tails}")


def start_cluster(folder: Path, timeout: float = READY_TIMEOUT) -> KubeCluster:
    """Start etcd, the API server and the controller manager; return once the API is ready and the
    controller manager has acted (the `default` ServiceAccount exists). Stops what it started on failure.

    The servers are told ports found free a moment before they bind them; when another process took one in
    between, the start is made again on new ports in a new folder, within the same deadline."""
    began = time.monotonic()
    deadline = began + timeout
    for attempt in range(1, PORT_ATTEMPTS + 1):
        try:
            cluster = _start(folder if attempt == 1 else folder / f"attempt-{attempt}", deadline)
            break
        except PortTaken:
            if attempt == PORT_ATTEMPTS or time.monotonic() >= deadline:
                raise
    cluster.started_seconds = round(time.monotonic() - began, 1)
    return cluster


def _start(folder: Path, deadline: float) -> KubeCluster:
    folder.mkdir(parents=True, exist_ok=True)
    certs = write_certificates(folder)
    token = secrets.token_urlsafe(32)
    (folder / "tokens.csv").write_text(f'{token},cluster-tier-admin,cluster-tier-admin,"system:masters"\n')
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    server = f"https://127.0.0.1:{api_port}"
    ca_pem = certs["ca"].read_bytes()
    kubeconfig = kubeconfig_text(server, ca_pem, token)
    kubeconfig_path = folder / "kubeconfig"
    kubeconfig_path.write_text(kubeconfig)
    kubeconfig_path.chmod(0o600)
    (folder / "audit-policy.yaml").write_text(AUDIT_POLICY)
    cluster = KubeCluster(server, ca_pem, token, kubeconfig, kubeconfig_path, folder)
    atexit.register(cluster.stop)
    try:
        cluster.procs["etcd"] = _spawn([
            "etcd", "--data-dir", str(folder / "etcd"), "--name", "cluster-tier",
            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"cluster-tier=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync"], folder / "etcd.log")
        cluster.procs["kube-apiserver"] = _spawn([
            "kube-apiserver", f"--etcd-servers=http://127.0.0.1:{etcd_port}", "--bind-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--tls-cert-file={certs['serving-cert']}", f"--tls-private-key-file={certs['serving-key']}",
            f"--client-ca-file={certs['ca']}", f"--token-auth-file={folder / 'tokens.csv'}",
            f"--service-account-key-file={certs['sa-pub']}",
            f"--service-account-signing-key-file={certs['sa-key']}",
            f"--service-account-issuer={server}", "--service-cluster-ip-range=10.0.0.0/24",
            "--authorization-mode=RBAC", "--disable-admission-plugins=ServiceAccount",
            "--enable-priority-and-fairness=false", f"--cert-dir={folder / 'cert-dir'}",
            f"--audit-policy-file={folder / 'audit-policy.yaml'}", f"--audit-log-path={folder / 'audit.log'}",
            "--audit-log-mode=blocking"], folder / "kube-apiserver.log")

        def readyz() -> bool:
            try:
                return cluster.request("GET", "/readyz", timeout=5)[0] == 200
            except (OSError, ValueError):
                return False

        _wait("the API server's /readyz", readyz, cluster, deadline, every=0.5)
        cluster.procs["kube-controller-manager"] = _spawn([
            "kube-controller-manager", f"--kubeconfig={kubeconfig_path}", f"--controllers={CONTROLLERS}",
            "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
            f"--service-account-private-key-file={certs['sa-key']}", f"--root-ca-file={certs['ca']}",
            "--use-service-account-credentials=false"], folder / "kube-controller-manager.log")

        def controller_acted() -> bool:
            try:
                return cluster.request("GET", "/api/v1/namespaces/default/serviceaccounts/default", timeout=5)[0] == 200
            except (OSError, ValueError):
                return False

        _wait("the controller manager (the default ServiceAccount)", controller_acted, cluster, deadline, every=0.5)
    except BaseException:
        cluster.stop()
        raise
    return cluster
