"""Writing the runner's outputs to the presigned PUT URLs the task made (no S3 credentials in the pod)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from kai_scale_model.runner_interface import OUTCOME, OUTPUT_URLS_ENV, OUTPUTS

ATTEMPTS = 5
# Every output is JSON; the task presigns its URLs for this Content-Type, which the signature covers.
CONTENT_TYPE = "application/json"


class UploadError(RuntimeError):
    """An output could not be uploaded after retries."""


def parse_output_urls(raw: str | None) -> dict[str, str]:
    """The upload URLs variable: a JSON object of output name -> presigned PUT URL."""
    if not raw:
        raise ValueError(f"{OUTPUT_URLS_ENV} is not set: the pipeline passes the upload URLs in it")
    try:
        urls = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(f"{OUTPUT_URLS_ENV} is not JSON: {error}") from error
    if not isinstance(urls, dict) or not all(isinstance(v, str) for v in urls.values()):
        raise ValueError(f"{OUTPUT_URLS_ENV} must be a JSON object of name -> URL")
    # A pipeline and a runner image of different versions must not pass each other by in silence.
    unknown = sorted(set(urls) - set(OUTPUTS))
    if unknown or OUTCOME not in urls:
        raise ValueError(
            f"{OUTPUT_URLS_ENV} names outputs {sorted(urls)}, this runner writes {list(OUTPUTS)} "
            f"(unknown: {unknown}; '{OUTCOME}' required): the runner image and the pipeline differ in version"
        )
    return urls


def upload(*, path: Path, url: str) -> None:
    """PUT the file to the URL, retrying transient failures with backoff."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with path.open("rb") as body:
                request = urllib.request.Request(
                    url,
                    data=body,
                    method="PUT",
                    # Without an explicit type urllib sends a form type, and S3 would store what it parsed.
                    headers={"Content-Length": str(path.stat().st_size), "Content-Type": CONTENT_TYPE},
                )
                with urllib.request.urlopen(request, timeout=120) as response:
                    response.read()
            return
        except urllib.error.HTTPError as error:
            if error.code < 500 or attempt == ATTEMPTS:
                raise UploadError(
                    f"uploading {path.name} failed: HTTP {error.code} {error.reason}"
                ) from error
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            if attempt == ATTEMPTS:
                raise UploadError(
                    f"uploading {path.name} failed after {ATTEMPTS} attempts: {error}"
                ) from error
        time.sleep(min(2**attempt, 30))


def upload_all(*, files: Mapping[str, Path], urls: Mapping[str, str]) -> list[str]:
    """Upload each existing file that has a URL, in the given order; return the names uploaded."""
    uploaded = []
    for name, path in files.items():
        if name in urls and path.exists():
            upload(path=path, url=urls[name])
            uploaded.append(name)
    return uploaded
