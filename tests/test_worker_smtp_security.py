"""Delivery over STARTTLS and implicit TLS, with AUTH, as configured by AUTHSVC_SMTP_URL."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from testkit.smtp_double import SmtpDouble
from tests.worker_support import events, job_status, queue_notices, worker

pytestmark = pytest.mark.e2e  # the certificate comes from the openssl command


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, made with the openssl command."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    return cert, key


@pytest.fixture
def trusted(certificate, monkeypatch) -> tuple[Path, Path]:
    # OpenSSL reads SSL_CERT_FILE when the worker builds its default context,
    # the same way an operator would trust a private CA.
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    return certificate


@pytest.mark.parametrize("security", ["starttls", "ssl"])
def test_sends_over_tls_with_auth(database_url, conn, settings, trusted, security):
    queue_notices(conn, 2)
    login = ("mailer", "s3cret:/@")
    with SmtpDouble(security=security, certificate=trusted, credentials=login) as smtp:
        worker(database_url, settings, smtp.url, once=True).run()
    assert len(smtp.messages) == 2
    assert conn.execute("SELECT DISTINCT status FROM email_jobs").fetchall() == [("sent",)]


def test_wrong_password_is_kept_as_a_retryable_error(database_url, conn, settings, trusted):
    [job_id] = queue_notices(conn, 1)
    login = ("mailer", "right")
    with SmtpDouble(security="starttls", certificate=trusted, credentials=login) as smtp:
        wrong = smtp.url.replace(":right@", ":wrong@")
        worker(database_url, settings, wrong, once=True).run()
    assert smtp.messages == []
    assert job_status(conn, job_id)[0] == "pending"
    error = conn.execute("SELECT last_error FROM email_jobs WHERE id = %s", (job_id,)).fetchone()
    assert error[0].startswith("connect: 535")
    assert [e[0] for e in events(conn, job_id)] == ["claimed", "retry"]


def test_untrusted_certificate_is_refused_and_retried(database_url, conn, settings, certificate):
    [job_id] = queue_notices(conn, 1)
    with SmtpDouble(security="ssl", certificate=certificate) as smtp:
        worker(database_url, settings, smtp.url, once=True).run()
    assert smtp.messages == []
    error = conn.execute("SELECT last_error FROM email_jobs WHERE id = %s", (job_id,)).fetchone()
    assert job_status(conn, job_id)[0] == "pending" and "CERTIFICATE_VERIFY_FAILED" in error[0]
