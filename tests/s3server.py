"""A real S3 endpoint on 127.0.0.1 for the object-storage tests: moto's server mode
(ThreadedMotoServer, from the `test` extra), as zarr-python's and s3fs's own test suites use.

`s3_server` (session) starts one server on a free port; `s3` (per test) resets its state, points
the standard AWS_* variables at it through monkeypatch (never ~/.aws: AWS_CONFIG_FILE and
AWS_SHARED_CREDENTIALS_FILE are pointed at nothing) and creates the bucket BUCKET. Use with
`from s3server import s3_fixture, s3_server_fixture  # noqa: F401` (the fixtures are named `s3`
and `s3_server`; the functions are not, so that a test's `s3` argument shadows no import).
"""

from __future__ import annotations

import json
import os
import urllib.request
from dataclasses import dataclass

import pytest

BUCKET = "bigtopics-test"
KEY_ID, SECRET = "testing-key", "testing-secret"


@dataclass
class S3:
    endpoint: str
    bucket: str = BUCKET

    def url(self, name: str) -> str:
        return f"s3://{self.bucket}/{name}"

    def post(self, path: str, body: bytes = b"") -> dict:
        request = urllib.request.Request(f"{self.endpoint}{path}", data=body, method="POST",
                                         headers={"Content-Type": "text/plain"})  # not a form: moto reads the body
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"{}")

    def client(self, **kwargs):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=kwargs.get("key", KEY_ID),
                            aws_secret_access_key=kwargs.get("secret", SECRET))

    def keys(self, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def require_auth(self):
        """From now on moto checks signatures against its IAM users (none: every key is wrong)
        until `self.post("/moto-api/reset-auth", b"inf")`; the `s3` fixture resets it."""
        self.post("/moto-api/reset-auth", b"0")


@pytest.fixture(scope="session", name="s3_server")
def s3_server_fixture():
    pytest.importorskip("s3fs")
    server_module = pytest.importorskip("moto.server")
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(name="s3")
def s3_fixture(s3_server, monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    server = S3(s3_server)
    server.post("/moto-api/reset")
    server.client().create_bucket(Bucket=BUCKET)
    yield server
    server.post("/moto-api/reset-auth", b"inf")
