"""The deployed account's moto data, kept aside when another test's ``mock_aws()`` resets moto.

moto holds every service's data in ``BackendDict`` globals. A reset (``mock_aws()`` starting or
stopping) empties each region's backend *in place* (``BaseBackend.reset`` gives the object a new
``__dict__``) and drops the accounts from the ``BackendDict``. :class:`KeptAccount` holds the
objects themselves (the backends, and the ``__dict__`` each had), not copies: it costs nothing to
take, follows every change the kit's tests make, and after a reset :meth:`KeptAccount.restore`
puts the very same data back, where deploying the app again costs several CPU seconds.

What comes back is the account as the last ``vigil_stack`` test left it, which the plugin then
empties as it empties it between any two tests; whatever the resetting tests created is dropped,
and the restored backends are registered again, so the next reset empties them for the test after.

One backend's reset does more than replace its data: S3's closes every object's buffer
(``FakeKey.dispose``) and forgets its buckets' owners (the ``BackendDict``'s ``bucket_accounts``),
which would leave the deployed assets' objects unreadable once put back. :meth:`KeptAccount.take`
makes the kept objects' disposal a no-op (each buffer is freed with its object) and keeps the
owners, which :meth:`KeptAccount.restore` registers again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class _Service:
    backends: Any
    """The service's ``BackendDict``."""
    accounts: dict[str, Any]
    """account id -> its ``AccountSpecificBackend``, as the ``BackendDict`` held it."""
    regions: list[tuple[Any, dict[str, Any], dict[str, Any]]]
    """(account backend, region -> backend it held, backend -> the data it held) per account."""
    owners: dict[str, Any]
    """S3's bucket name -> (partition, account) as its ``BackendDict`` held them (reset pops them)."""


@dataclass(frozen=True)
class KeptAccount:
    services: tuple[_Service, ...]

    @classmethod
    def take(cls) -> KeptAccount:
        """What moto holds now: to be called while the deployed account is there."""
        from moto.core.base_backend import BackendDict, backend_lock

        services = []
        with backend_lock:
            for backends in dict.fromkeys(BackendDict._instances):  # type: ignore[misc]
                accounts = dict(backends.items())
                regions = [
                    (account, dict(account.items()), {r: b.__dict__ for r, b in account.items()})
                    for account in accounts.values()
                ]
                for account in accounts.values():
                    for backend in account.values():
                        _hold_objects(backend)
                owners = dict(getattr(backends, "bucket_accounts", {}))
                services.append(_Service(backends, accounts, regions, owners))
        return cls(tuple(services))

    def restore(self) -> None:
        """Put the kept data back in place of what moto holds now (which is dropped)."""
        from moto.core.base_backend import BackendDict, backend_lock

        with backend_lock:
            BackendDict.reset()  # what the tests since then left, dropped as any reset drops it
            for service in self.services:
                for account, regions, data in service.regions:
                    dict.clear(account)
                    dict.update(account, regions)
                    for region, backend in regions.items():
                        backend.__dict__ = data[region]
                dict.clear(service.backends)
                dict.update(service.backends, service.accounts)
                if service.owners:
                    service.backends.bucket_accounts.update(service.owners)
                if service.accounts:
                    BackendDict._instances.append(service.backends)  # type: ignore[misc]


def _hold_objects(backend: Any) -> None:
    """An S3 backend's objects, every version, kept readable through moto's reset (which closes
    each one's buffer before it drops the backend's data)."""
    from moto.s3.models import FakeKey, S3Backend

    if not isinstance(backend, S3Backend):
        return
    for bucket in backend.buckets.values():
        for name in list(bucket.keys):
            for key in bucket.keys.getlist(name):
                if isinstance(key, FakeKey):
                    key.dispose = _held  # type: ignore[method-assign]


def _held(garbage: bool = False) -> None:
    """A kept object's ``dispose``: nothing (its buffer closes when the object is collected)."""
