"""Credentials kept off the scheduler.

A task's arguments are its ``run_spec``, which the scheduler keeps while the task's key lives,
and which any client of the scheduler, the dashboard's task pages and a dump of the cluster's
state can read. So the arguments of read, planning and write tasks carry their storage options
and URLs *redacted* (secret, session token and header values as ``***``, a URL's password as
``***``), and the real ones travel in a :class:`Secrets` that the client scatters to the
workers (:meth:`Secrets.seal`): the scheduler learns its key, never its contents, and a task
that takes it restores its arguments where it runs (:func:`unsealed`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import without_passwords
from .base import StorageOptions

if TYPE_CHECKING:
    from distributed import Client, Future

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

    def seal(self, client: Client) -> Future | None:
        """These secrets on every worker of ``client``'s cluster, scattered: tasks take the
        future, and the scheduler holds only its key. None where there are none to keep."""
        if not self.options and not self.urls:
            return None
        return client.scatter(self, broadcast=True, hash=False)

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


def unsealed(value: Any, secrets: Secrets | None) -> Any:
    """On a worker: ``value`` (or each item of a list of them) as it was before it was
    redacted."""
    if secrets is None:
        return value
    if isinstance(value, list):
        return [secrets.restore(item) for item in value]
    return secrets.restore(value)
