"""A small HTTP client shared by the API connectors (Prometheus, Loki, Kubernetes).

Standard library only. What it guarantees:

* bounded retries with exponential backoff and jitter on connection errors, timeouts,
  HTTP 429 (honouring ``Retry-After``) and 5xx, then :class:`TransientError`;
* any other 4xx is a :class:`ConnectorError` naming the status and the first 200 bytes of
  the body (a retry will not fix bad credentials or a bad query);
* a body that should be JSON and is not is a :class:`ConnectorError`;
* the credential is read from the environment variable the options name (``token_env``)
  and never appears in an error message, a log record or a manifest: every message built
  here passes through :meth:`HttpClient.redact`.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ingest.connectors.base import ConnectorError, TransientError

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
"""Statuses a retry may fix (rate limiting, overloaded or restarting servers)."""

Params = Mapping[str, object] | Sequence[tuple[str, object]]


@dataclass
class HttpClient:
    """GET/POST against one base URL with retries; see the module docstring.

    ``token_env`` names the environment variable holding the credential, sent as
    ``Authorization: <auth_scheme> <token>``. ``sleep`` (default :func:`time.sleep`) is injectable so
    tests can count the backoff without waiting for it.
    """

    base_url: str
    token_env: str | None = None
    auth_scheme: str = "Bearer"
    timeout: float = 30.0
    max_attempts: int = 5
    backoff: float = 0.5
    max_backoff: float = 30.0
    headers: dict[str, str] = field(default_factory=dict)
    sleep: Callable[[float], None] | None = None

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        self._token = self._read_token()

    # ------------------------------------------------------------------ public

    def get_json(self, path: str, params: Params | None = None) -> dict:
        """GET ``path`` with query ``params`` and decode the JSON answer."""
        return self._decode(self.request("GET", path, params), path)

    def post_form_json(self, path: str, params: Params) -> dict:
        """POST ``params`` as a form (long PromQL fits no URL) and decode the JSON answer."""
        return self._decode(self.request("POST", path, params), path)

    def get_text(self, path: str, params: Params | None = None) -> str:
        """GET ``path`` and return the body as UTF-8 text (invalid bytes replaced)."""
        return self.request("GET", path, params).decode("utf-8", errors="replace")

    def url(self, path: str, params: Params | None = None) -> str:
        """The full URL of ``path`` with ``params``: what provenance (``origin``) records."""
        query = urllib.parse.urlencode(list(_items(params)), doseq=True) if params else ""
        return f"{self.base_url}{path}" + (f"?{query}" if query else "")

    def redact(self, text: str) -> str:
        """``text`` with the credential replaced, for anything that may be shown or stored."""
        return text.replace(self._token, "***") if self._token else text

    def request(self, method: str, path: str, params: Params | None = None) -> bytes:
        """Send one logical request, retrying what may pass; return the body bytes."""
        if method == "GET":
            req_url, data = self.url(path, params), None
        else:
            req_url = f"{self.base_url}{path}"
            data = urllib.parse.urlencode(list(_items(params or {})), doseq=True).encode()
        last = ""
        for attempt in range(1, self.max_attempts + 1):
            request = urllib.request.Request(req_url, data=data, method=method)
            for name, value in self._headers(form=data is not None).items():
                request.add_header(name, value)
            retry_after: float | None = None
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                    return resp.read()
            except urllib.error.HTTPError as exc:
                body = exc.read()[:200].decode("utf-8", errors="replace")
                if exc.code not in RETRY_STATUSES:
                    raise ConnectorError(self.redact(
                        f"{method} {req_url}: HTTP {exc.code}: {body!r} — "
                        + _hint(exc.code)
                    )) from None
                last = f"HTTP {exc.code}: {body!r}"
                retry_after = _retry_after(exc.headers.get("Retry-After"))
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                reason = getattr(exc, "reason", exc)
                last = f"{type(exc).__name__}: {reason}"
            if attempt < self.max_attempts:
                delay = self._delay(attempt, retry_after)
                log.info(self.redact(
                    f"{method} {req_url}: {last}; retry {attempt}/{self.max_attempts - 1} "
                    f"in {delay:.2f}s"
                ))
                (self.sleep or time.sleep)(delay)
        raise TransientError(self.redact(
            f"{method} {req_url}: gave up after {self.max_attempts} attempts, last: {last} — "
            "the server is unreachable or overloaded; retry later or raise max_attempts"
        ))

    # --------------------------------------------------------------- internals

    def _read_token(self) -> str | None:
        if not self.token_env:
            return None
        token = os.environ.get(self.token_env)
        if not token:
            raise ConnectorError(
                f"{self.base_url}: environment variable {self.token_env} (named by token_env) "
                "is not set — export it with the API token"
            )
        return token

    def _headers(self, *, form: bool) -> dict[str, str]:
        out = {"Accept": "application/json, text/plain;q=0.9", **self.headers}
        if form:
            out["Content-Type"] = "application/x-www-form-urlencoded"
        if self._token:
            out["Authorization"] = f"{self.auth_scheme} {self._token}"
        return out

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_backoff)
        # Full jitter keeps many clients that failed together from retrying together.
        ceiling = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
        return ceiling * (0.5 + random.random() / 2)

    def _decode(self, body: bytes, path: str) -> dict:
        try:
            value = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConnectorError(self.redact(
                f"{self.base_url}{path}: answer is not JSON ({exc}): {body[:200]!r} — "
                "check that the URL points at the API, not a proxy or login page"
            )) from None
        if not isinstance(value, dict):
            raise ConnectorError(f"{self.base_url}{path}: expected a JSON object, got {type(value).__name__}")
        return value


def _items(params: Params | None) -> list[tuple[str, object]]:
    if params is None:
        return []
    return list(params.items()) if isinstance(params, Mapping) else list(params)


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _hint(status: int) -> str:
    if status in (401, 403):
        return "check the token in the environment variable named by token_env"
    if status == 404:
        return "check the base URL and API path"
    return "fix the request (query, parameters) and run again"
