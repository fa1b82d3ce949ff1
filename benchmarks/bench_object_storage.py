"""Requests to object storage a minibatch, training from an s3:// store in process and on a cluster.

    python benchmarks/bench_object_storage.py                 # the demo books, 4 minibatches
    python benchmarks/bench_object_storage.py --workers 2 --batches 6

moto's S3 server (the `test` extra) runs on 127.0.0.1 with its request recorder on; the demo
books are ingested to s3:// there, then `bigtopics train` runs from that URL as a user runs it,
once in process and once with `--cluster local:N`, and the requests each run made are counted
by method from the recording (a training run's metadata reads, the blocks of the store, and the
checkpoints and model it writes stay on local disk). Printed: requests per minibatch of each run,
and their ratio.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import subprocess
import sys
import tempfile
import urllib.request
from importlib.resources import files
from pathlib import Path

BUCKET = "bigtopics-bench"


def post(endpoint: str, path: str, body: bytes = b"") -> bytes:
    request = urllib.request.Request(f"{endpoint}{path}", data=body, method="POST",
                                     headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read()


def recorded_requests(endpoint: str) -> collections.Counter:
    """The requests recorded since the last reset, by method, less the recorder's own."""
    counts = collections.Counter()
    with urllib.request.urlopen(f"{endpoint}/moto-api/recorder/download-recording", timeout=30) as response:
        for line in response.read().decode().splitlines():
            if line.strip():
                entry = json.loads(line)
                if "/moto-api/" not in entry.get("url", ""):
                    counts[entry["method"]] += 1
    return counts


def bigtopics(*args: str, env: dict) -> None:
    subprocess.run([sys.executable, "-c", "from bigtopics.cli import main; main()", *args], check=True, env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=200)
    args = parser.parse_args()
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request otherwise
    with tempfile.TemporaryDirectory() as work:
        os.environ["MOTO_RECORDER_FILEPATH"] = str(Path(work) / "recording")
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
               "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_ENDPOINT_URL": endpoint, "AWS_EC2_METADATA_DISABLED": "true",
               "AWS_CONFIG_FILE": str(Path(work) / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(Path(work) / "none")}
        try:
            urllib.request.urlopen(urllib.request.Request(f"{endpoint}/{BUCKET}", method="PUT"), timeout=30)
            url = f"s3://{BUCKET}/demo/books.zarr"
            books = str(files("bigtopics") / "data" / "demo_books.jsonl.gz")
            bigtopics("ingest", books, "-o", url, "--section-tokens", "500", "--quiet", env=env)
            counts = {}
            for name, extra in (("in process", []), (f"local:{args.workers}", ["--cluster", f"local:{args.workers}"])):
                post(endpoint, "/moto-api/recorder/reset-recording")
                post(endpoint, "/moto-api/recorder/start-recording")
                bigtopics("train", url, "-o", str(Path(work) / name.replace(" ", "-")), "-k", "20", "--seed", "1",
                          "--batch-size", str(args.batch_size), "--max-docs", str(args.batch_size * args.batches),
                          "--quiet", *extra, env=env)
                post(endpoint, "/moto-api/recorder/stop-recording")
                counts[name] = recorded_requests(endpoint)
        finally:
            server.stop()
    for name, count in counts.items():
        total = sum(count.values())
        print(f"{name:>12}: {total} requests ({', '.join(f'{m} {n}' for m, n in sorted(count.items()))}), "
              f"{total / args.batches:.1f} a minibatch", flush=True)
    first, second = (sum(c.values()) for c in counts.values())
    print(f"cluster / in process: {second / max(first, 1):.2f}x")


if __name__ == "__main__":
    main()
