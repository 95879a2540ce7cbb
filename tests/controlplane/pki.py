"""Certificates and keys of a test control plane, made with ``cryptography``.

A throwaway CA signs the API server's serving certificate (for 127.0.0.1 and localhost, the
only addresses it listens on) and the stand-in kubelet's (``tests.controlplane.standins``: the
API server calls it for pod logs and checks it against this CA, as a cluster's API server
checks its kubelets with ``--kubelet-certificate-authority``); an RSA key signs ServiceAccount
tokens (TokenRequest) and its public half verifies them. Nothing is reused across sessions.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

_PEM = serialization.Encoding.PEM


_CA_USAGE = x509.KeyUsage(
    digital_signature=True,
    key_cert_sign=True,
    crl_sign=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    encipher_only=False,
    decipher_only=False,
)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _serving(
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    common: str,
    names: list[x509.GeneralName],
    valid: tuple[dt.datetime, dt.datetime],
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A key and a TLS serving certificate for ``names``, signed by the CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.OID_SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def _client(
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    common: str,
    valid: tuple[dt.datetime, dt.datetime],
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A key and a TLS client certificate for user ``common``, signed by the CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.ExtendedKeyUsage([x509.OID_CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


#: the user the API server is to kubelets when a real node joins (bound to
#: system:kubelet-api-admin by tests.node, as kubeadm binds it)
KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"
#: the ``kubernetes`` Service's address in the node's service range (its first address)
SERVICE_IP = "10.0.0.1"


def write_pki(directory: Path, node_ip: str | None = None) -> dict[str, Path]:
    """Write ca.crt, apiserver.crt/.key, kubelet.crt/.key and sa.key/.pub into ``directory``;
    their paths. With ``node_ip`` (a real node joins, ``tests.node``) the API server's
    certificate also names the node's address and the ``kubernetes`` Service's, the kubelet's
    names the node's address, and the API server gets a client certificate for kubelets
    (kubelet_client.crt/.key)."""
    now = dt.datetime.now(dt.UTC)
    valid = (now - dt.timedelta(minutes=5), now + dt.timedelta(days=2))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("txntable-test-ca"))
        .issuer_name(_name("txntable-test-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_CA_USAGE, critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    names: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        *(x509.DNSName(n) for n in ("localhost", "kubernetes", "kubernetes.default.svc")),
    ]
    kubelet_names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    if node_ip is not None:
        names += [x509.IPAddress(ipaddress.ip_address(a)) for a in (node_ip, SERVICE_IP)]
        names += [
            x509.DNSName("kubernetes.default"),
            x509.DNSName("kubernetes.default.svc.cluster.local"),
        ]
        kubelet_names.append(x509.IPAddress(ipaddress.ip_address(node_ip)))
    key, serving = _serving(ca, ca_key, "kube-apiserver", names, valid)
    kubelet_key, kubelet = _serving(
        ca, ca_key, "kubelet" if node_ip else "standin-kubelet", kubelet_names, valid
    )
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    paths = {
        "ca": directory / "ca.crt",
        "cert": directory / "apiserver.crt",
        "key": directory / "apiserver.key",
        "sa_key": directory / "sa.key",
        "sa_pub": directory / "sa.pub",
        "kubelet_cert": directory / "kubelet.crt",
        "kubelet_key": directory / "kubelet.key",
    }
    directory.mkdir(parents=True, exist_ok=True)
    paths["ca"].write_bytes(ca.public_bytes(_PEM))
    paths["cert"].write_bytes(serving.public_bytes(_PEM))
    paths["key"].write_bytes(_key_pem(key))
    paths["kubelet_cert"].write_bytes(kubelet.public_bytes(_PEM))
    paths["kubelet_key"].write_bytes(_key_pem(kubelet_key))
    paths["sa_key"].write_bytes(_key_pem(sa_key))
    paths["sa_pub"].write_bytes(
        sa_key.public_key().public_bytes(_PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    if node_ip is not None:
        client_key, client = _client(ca, ca_key, KUBELET_CLIENT_USER, valid)
        paths["kubelet_client_cert"] = directory / "kubelet_client.crt"
        paths["kubelet_client_key"] = directory / "kubelet_client.key"
        paths["kubelet_client_cert"].write_bytes(client.public_bytes(_PEM))
        paths["kubelet_client_key"].write_bytes(_key_pem(client_key))
        paths["kubelet_client_key"].chmod(0o600)
    for p in (paths["key"], paths["sa_key"], paths["kubelet_key"]):
        p.chmod(0o600)
    return paths
