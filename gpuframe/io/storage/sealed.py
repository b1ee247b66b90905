"""Credentials kept off the scheduler.

A task's arguments are its ``run_spec``, which the scheduler keeps while the task's key lives,
and which any client of the scheduler, the dashboard's task pages and a dump of the cluster's
state can read. So the arguments of read, planning and write tasks carry their storage options
and URLs *redacted* (secret, session token and header values as ``***``, a URL's password as
``***``), and the real ones travel in a :class:`Secrets` that a worker plugin carries to every
worker (:meth:`Secrets.seal`), joining ones included: not as data under a key, which any client
that sees the key could gather. Tasks take the plugin's token, and restore their arguments where
they run (:func:`unsealed`).
"""

from __future__ import annotations

import dataclasses
import pickle
import secrets as tokens
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from distributed.diagnostics.plugin import WorkerPlugin

from ..errors import SecretsMissingError, without_passwords
from .base import StorageOptions

if TYPE_CHECKING:
    from distributed import Client, Worker

REDACTED = "***"
SECRET_FIELDS = tuple(f.name for f in dataclasses.fields(StorageOptions) if not f.repr)
"""The options that never show in a repr: they never reach a task's arguments either."""

@dataclass
class Secrets:
    """The real options and URLs behind the redacted ones that tasks' arguments hold."""

    options: dict[StorageOptions, StorageOptions] = field(default_factory=dict)
    urls: dict[str, str] = field(default_factory=dict)

    def redact(self, value: Any) -> Any:
        """``value`` (storage options, a URL, or a dataclass holding them, such as a
        :class:`~gpuframe.io.tasks.FragmentTask`) without its secrets, which this keeps."""
        if isinstance(value, StorageOptions):
            if not any(getattr(value, name) for name in SECRET_FIELDS):
                return value
            hidden = dataclasses.replace(
                value, secret=value.secret and REDACTED,
                session_token=value.session_token and REDACTED,
                http_headers=tuple((name, REDACTED) for name, _ in value.http_headers))
            self.options[hidden] = value
            return hidden
        if isinstance(value, str):
            hidden_url = without_passwords(value)
            if hidden_url != value:
                self.urls[hidden_url] = value
            return hidden_url
        return _fields_mapped(value, self.redact)

    def seal(self, client: Client) -> str | None:
        """These secrets on every worker of ``client``'s cluster, now and joining later, by a
        worker plugin; the token tasks take to find them (the same secrets, the same token and
        one plugin). None where there are none to keep."""
        if not self.options and not self.urls:
            return None
        content = pickle.dumps(self)
        sealed = _SEALED.setdefault(client, {})
        if content not in sealed:
            token = tokens.token_hex(16)
            client.register_plugin(KeptSecrets(token, self), name=f"gpuframe-secrets-{token}")
            sealed[content] = token
        return sealed[content]

    def restore(self, value: Any) -> Any:
        """``value`` with the secrets :meth:`redact` took from it."""
        if isinstance(value, StorageOptions):
            return self.options.get(value, value)
        if isinstance(value, str):
            return self.urls.get(value, value)
        return _fields_mapped(value, self.restore)

    def __repr__(self) -> str:
        return f"<Secrets of {len(self.options)} options, {len(self.urls)} URLs>"


def _fields_mapped(value: Any, change: Callable[[Any], Any]) -> Any:
    """A dataclass ``value`` with ``change`` applied to its string and storage-option fields;
    any other value as it is."""
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return value
    return dataclasses.replace(value, **{
        f.name: change(getattr(value, f.name)) for f in dataclasses.fields(value)
        if isinstance(getattr(value, f.name), (str, StorageOptions))})


class KeptSecrets(WorkerPlugin):
    """Carries one :class:`Secrets` to every worker, under its token."""

    def __init__(self, token: str, secrets: Secrets) -> None:
        self.token = token
        self.secrets = secrets

    def setup(self, worker: Worker) -> None:
        _KEPT[self.token] = self.secrets

    def teardown(self, worker: Worker) -> None:
        _KEPT.pop(self.token, None)


_SEALED: weakref.WeakKeyDictionary[Client, dict[bytes, str]] = weakref.WeakKeyDictionary()
"""Per client, the token of each set of secrets already sealed on its cluster."""
_KEPT: dict[str, Secrets] = {}
"""On a worker: the secrets its plugins carried, by token."""


def unsealed(value: Any, token: str | None) -> Any:
    """On a worker: ``value`` (or each item of a list of them) as it was before it was
    redacted; ``token``: what :meth:`Secrets.seal` gave for its secrets."""
    if token is None:
        return value
    secrets = _KEPT.get(token)
    if secrets is None:
        raise SecretsMissingError("the credentials of this task did not reach its worker (its "
                                  f"plugin gpuframe-secrets-{token} is not installed there)")
    if isinstance(value, list):
        return [secrets.restore(item) for item in value]
    return secrets.restore(value)
