"""ZooKeeper client factory: connect and call timeouts, retries within a deadline, digest auth, ACLs.

A plain kazoo call blocks forever while ZooKeeper is down, so every call here goes through
``*_async().get(timeout=...)`` and is retried with backoff (a :class:`dr_toolkit.retry.Retry`) until a deadline;
when the deadline passes, :class:`~dr_toolkit.errors.UnreachableError` (exit 3) names the
quorum. Connecting is bounded by ``endpoint.connect_timeout_s``.

Usage::

    from dr_toolkit.zk.client import connect, zk_session

    creds = access.endpoint(topology, "hot", "zookeeper")
    with zk_session(cluster.zookeeper, credentials=creds) as zk:
        data, stat = zk.get("/hbase/replication/peers/1")

Authentication comes from the :class:`~dr_toolkit.secrets.Credentials` value the caller resolved
(through :class:`dr_toolkit.access.Access`; ``None``: no authentication) — this module never looks
a credential up itself. ``login`` and ``password`` give a digest identity; ``extra["auth"]`` may
hold ``"user:pass"``, ``{"scheme": "digest", "credential": "user:pass"}`` or a list of those;
``extra["sasl"]`` is passed to kazoo as ``sasl_options``; ``{"mechanism": "GSSAPI"}`` there is
Kerberos: the principal and keytab come from the same connection (``extra.principal`` or
``login``, ``extra.keytab``) or the environment (``DRT_KERBEROS_PRINCIPAL`` /
``DRT_KERBEROS_KEYTAB``), the ticket from :mod:`dr_toolkit.kerberos` (a private cache, renewed;
every reconnect authenticates again), the server named ``zookeeper/<host in the quorum>``. A
missing keytab or unknown principal is a :class:`~dr_toolkit.kerberos.KerberosError` (exit 3)
before any connection. When authentication is configured, every znode this client creates gets
``creator-all + world-read`` ACLs (``sasl:<principal>`` with Kerberos): never world-writable.

Kazoo's node errors are translated into :class:`ZkNoNode`, :class:`ZkNodeExists`,
:class:`ZkNotEmpty` and :class:`ZkBadVersion` so callers need not import kazoo.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from dr_toolkit.errors import ConfigError, DrtError, UnreachableError
from dr_toolkit.kerberos import KerberosConfig, KerberosError, kerberos_for, sasl_gssapi_options
from dr_toolkit.retry import Retry

if TYPE_CHECKING:
    from dr_toolkit.secrets import Credentials
    from dr_toolkit.topology import ZooKeeperEndpoint

log = logging.getLogger(__name__)
T = TypeVar("T")


# --- errors -------------------------------------------------------------------------------------


class ZkError(DrtError):
    """A ZooKeeper operation failed for a reason other than the server being unreachable."""


class ZkUnreachable(UnreachableError):
    """ZooKeeper did not answer (connect or call): the fencing state cannot be read or written."""


class ZkNoNode(ZkError):
    """The znode does not exist."""


class ZkNodeExists(ZkError):
    """The znode already exists."""


class ZkNotEmpty(ZkError):
    """The znode has children (delete it with ``recursive=True``)."""


class ZkBadVersion(ZkError):
    """The znode changed since it was read (a conditional set/delete lost a race)."""


class ZkNoAuth(ConfigError):
    """The ZooKeeper credentials are missing or do not grant this operation."""


class ZkReadRefused(UnreachableError, ZkNoAuth):
    """ZooKeeper refused to let this client (its SASL principal, digest user, or an unauthenticated
    session) read a znode: what is under it cannot be known — exit 3 naming the identity and the
    znode, never "nothing there" (a secure HBase's ``<parent>/replication`` is readable only by the
    principals its ACL names)."""


READ_OPS = frozenset({"get", "exists", "get_children", "get_acls"})


# --- retry policy -------------------------------------------------------------------------------

# How a call is retried after a connection loss or timeout: the one :class:`Retry` value of the
# toolkit (kazoo's KazooRetry shape). Its ``deadline_s`` defaults to the endpoint's
# ``call_timeout_s``; each attempt waits at most ``call_timeout_s`` (and never past the deadline).
ZK_RETRY = Retry(tries=10, backoff_s=0.1, max_backoff_s=2.0)


class _Lost(Exception):
    """A retryable ZooKeeper failure (connection loss, timeout): what the Retry retries."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(repr(cause))
        self.cause = cause


# --- ACLs and auth --------------------------------------------------------------------------------


def auth_entries(credentials: Credentials | None) -> list[tuple[str, str]]:
    """The ``(scheme, credential)`` pairs kazoo sends at connect and on every reconnect."""
    if credentials is None:
        return []
    out: list[tuple[str, str]] = []
    raw = credentials.extra.get("auth") if credentials.extra else None
    items = raw if isinstance(raw, list) else ([raw] if raw else [])
    for item in items:
        if isinstance(item, str):
            scheme, sep, cred = item.partition(":") if item.startswith(("digest:", "sasl:")) else ("", "", item)
            out.append((scheme, cred) if sep else ("digest", item))
        elif isinstance(item, dict) and item.get("credential"):
            out.append((str(item.get("scheme", "digest")), str(item["credential"])))
        else:
            raise ConfigError("ZooKeeper credentials: extra.auth must be 'user:pass', "
                              "{'scheme': 'digest', 'credential': 'user:pass'} or a list of those")
    if credentials.login and credentials.password:
        out.append(("digest", f"{credentials.login}:{credentials.password}"))
    return out


def default_acl(auth: Sequence[tuple[str, str]], *, sasl: bool = False) -> list[Any] | None:
    """``creator-all + world-read`` when authenticated (digest ids, or the SASL principal: ZooKeeper
    stores ``auth`` as the session's own ids); ``None`` (ZooKeeper's open ACL) otherwise."""
    if not auth and not sasl:
        return None
    from kazoo.security import ACL, Id, Permissions

    return [ACL(Permissions.ALL, Id("auth", "")), ACL(Permissions.READ, Id("world", "anyone"))]


def is_world_writable(acls: Sequence[Any]) -> bool:
    """True when ``world:anyone`` may write, create or delete under the znode."""
    from kazoo.security import Permissions

    write_bits = Permissions.WRITE | Permissions.CREATE | Permissions.DELETE | Permissions.ADMIN
    return any(a.id.scheme == "world" and a.id.id == "anyone" and a.perms & write_bits for a in acls)


# --- the client -----------------------------------------------------------------------------------


def _translate(exc: BaseException, op: str, path: str, quorum: str, who: str | None = None
               ) -> BaseException | None:
    """Map a kazoo error to ours; ``None`` means: retryable (connection loss, timeout). ``who``: the
    client's identity (``Kerberos principal p@R``, ``digest user u``; None: unauthenticated)."""
    from kazoo import exceptions as ke
    from kazoo.handlers.threading import KazooTimeoutError

    where = f"zookeeper {quorum} {path}"
    if isinstance(exc, (ke.ConnectionLoss, ke.SessionExpiredError, ke.OperationTimeoutError,
                        KazooTimeoutError, ke.SessionMovedError)):
        return None
    if isinstance(exc, ke.NoNodeError):
        return ZkNoNode(f"{op}: znode does not exist", where=where)
    if isinstance(exc, ke.NodeExistsError):
        return ZkNodeExists(f"{op}: znode already exists", where=where)
    if isinstance(exc, ke.NotEmptyError):
        return ZkNotEmpty(f"{op}: znode has children", where=where)
    if isinstance(exc, ke.BadVersionError):
        return ZkBadVersion(f"{op}: znode changed concurrently", where=where, hint="read it again and retry")
    if isinstance(exc, ke.NoAuthError) and op in READ_OPS:
        return ZkReadRefused(
            f"{op} {path}: ZooKeeper refuses to let {who or 'an unauthenticated client'} read it (its ACL does "
            "not grant this identity: what is under it cannot be known)", where=f"zookeeper {quorum}",
            hint=("read it as a principal the znode's ACL names (HBase's znodes: one listed in hbase.superuser, "
                  "or HBase's own service principal) — set DRT_KERBEROS_PRINCIPAL/DRT_KERBEROS_KEYTAB or the "
                  "connection's login and extra.keytab" if who and who.startswith("Kerberos") else
                  "authenticate: the connection's extra.sasl.mechanism GSSAPI with a principal "
                  "(DRT_KERBEROS_PRINCIPAL/DRT_KERBEROS_KEYTAB), or its digest credentials"))
    if isinstance(exc, (ke.NoAuthError, ke.AuthFailedError)):
        if who and who.startswith("Kerberos"):
            return ZkNoAuth(f"{op}: not authorised for {who}", where=where,
                            hint="the znode's ACL does not grant this principal write access")
        return ZkNoAuth(f"{op}: not authorised", where=where,
                        hint="check the digest credentials of the endpoint's conn_id")
    if isinstance(exc, ke.ConnectionClosedError):
        return ZkError(f"{op}: the client is closed", where=where)
    if isinstance(exc, ke.ZookeeperError):
        return ZkError(f"{op}: {type(exc).__name__} {exc}", where=where)
    return exc


class ZkTransaction:
    """Operations recorded here are committed atomically by :meth:`commit` (rebuilt on retry)."""

    def __init__(self, client: ZkClient) -> None:
        self._client = client
        self.ops: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def create(self, path: str, value: bytes = b"", *, ephemeral: bool = False) -> ZkTransaction:
        self.ops.append(("create", (path, value), {"acl": self._client.acl, "ephemeral": ephemeral}))
        return self

    def set_data(self, path: str, value: bytes, version: int = -1) -> ZkTransaction:
        self.ops.append(("set_data", (path, value), {"version": version}))
        return self

    def delete(self, path: str, version: int = -1) -> ZkTransaction:
        self.ops.append(("delete", (path,), {"version": version}))
        return self

    def check(self, path: str, version: int) -> ZkTransaction:
        self.ops.append(("check", (path, version), {}))
        return self

    def commit(self) -> list[Any]:
        """Commit all operations or none; raise the error of the operation that failed."""
        if not self.ops:
            return []
        self._client._writable("transaction", self.ops[0][1][0])

        def start() -> Any:
            tx = self._client.kazoo.transaction()
            for name, args, kw in self.ops:
                getattr(tx, name)(*args, **kw)
            return tx.commit_async()

        results: list[Any] = self._client._call("transaction", self.ops[0][1][0], start)
        from kazoo.exceptions import RolledBackError

        for (_name, args, _kw), res in zip(self.ops, results, strict=False):
            if isinstance(res, Exception) and not isinstance(res, RolledBackError):
                err = _translate(res, "transaction", args[0], self._client.quorum, self._client.who)
                raise err or res
        return results


class ZkClient:
    """A started KazooClient with call timeouts, retries, translated errors and default ACLs."""

    def __init__(self, kazoo: Any, endpoint: ZooKeeperEndpoint, *, retry: Retry, acl: list[Any] | None,
                 read_only: bool, kerberos: Any = None, who: str | None = None) -> None:
        self.kazoo = kazoo
        self.endpoint = endpoint
        self.retry = retry
        self.acl = acl
        self.read_only = read_only
        #: the :class:`dr_toolkit.kerberos.Kerberos` holder of the SASL GSSAPI session (None: none);
        #: HBase's info servers are asked with the same principal (SPNEGO)
        self.kerberos = kerberos
        #: who this session is to ZooKeeper (named when a znode's ACL refuses it); None: unauthenticated
        self.who = who

    @property
    def quorum(self) -> str:
        return self.endpoint.quorum

    # -- plumbing
    def _writable(self, op: str, path: str) -> None:
        if self.read_only:
            raise ConfigError(f"{op} {path}: this ZooKeeper client was opened read-only",
                              where=f"zookeeper {self.quorum}")

    def _call(self, op: str, path: str, start: Callable[[], Any],
              after_lost_answer: Callable[[ZkError], Any] | None = None) -> Any:
        """Run ``start()`` (returns a kazoo async result) with timeouts and retries.

        A write whose answer was lost (timeout, connection loss) may still have been applied —
        kazoo even sends a queued request after it reconnects. When a retry then fails with
        "exists"/"no node", ``after_lost_answer(error)`` decides whether that is our own earlier
        attempt (return a value) or a real conflict (raise).
        """
        retry = self._retry()
        assert retry.deadline_s is not None
        t0 = retry.clock()
        lost: BaseException | None = None
        n = 0
        try:
            for attempt in retry.attempts():
                with attempt:
                    n = attempt.number
                    remaining = max(0.001, retry.deadline_s - (retry.clock() - t0))
                    try:
                        return start().get(timeout=min(self.endpoint.call_timeout_s, remaining))
                    except Exception as exc:  # noqa: BLE001 - translated or retried below
                        mapped = _translate(exc, op, path, self.quorum, self.who)
                        if mapped is None:
                            lost = exc
                            log.debug("zookeeper %s %s %s: attempt %d failed: %r", self.quorum, op, path, n, exc)
                            raise _Lost(exc) from None
                        if lost is not None and after_lost_answer is not None and isinstance(
                                mapped, (ZkNodeExists, ZkNoNode)):
                            return after_lost_answer(mapped)
                        raise mapped from None
        except _Lost:
            pass
        raise ZkUnreachable(
            f"{op} {path}: no answer from ZooKeeper within {retry.deadline_s:g}s "
            f"({type(lost).__name__ if lost else 'timeout'})",
            where=f"zookeeper {self.quorum}",
            hint=f"check that the quorum is up and reachable ({n} attempt(s) made)")

    def _retry(self) -> Retry:
        """The client's Retry, retrying only lost answers, its deadline defaulting to call_timeout_s."""
        deadline = self.retry.deadline_s if self.retry.deadline_s is not None else self.endpoint.call_timeout_s
        return self.retry.with_(deadline_s=deadline, retry_on=(_Lost,))

    # -- reads
    def get(self, path: str) -> tuple[bytes, Any]:
        data, stat = self._call("get", path, lambda: self.kazoo.get_async(path))
        return data, stat

    def exists(self, path: str) -> Any | None:
        return self._call("exists", path, lambda: self.kazoo.exists_async(path))

    def get_children(self, path: str) -> list[str]:
        return list(self._call("get_children", path, lambda: self.kazoo.get_children_async(path)))

    def get_acls(self, path: str) -> tuple[list[Any], Any]:
        acls, stat = self._call("get_acls", path, lambda: self.kazoo.get_acls_async(path))
        return list(acls), stat

    def _many(self, op: str, paths: Sequence[str], fn: Callable[[str], Any]) -> list[Any]:
        """Issue every call at once (pipelined on one session), then collect; NoNode → None."""
        if not paths:
            return []
        retry = self._retry()
        assert retry.deadline_s is not None
        t0 = retry.clock()
        out: list[Any] = [None] * len(paths)
        todo = list(range(len(paths)))
        last: BaseException | None = None
        try:
            for attempt in retry.attempts():
                with attempt:
                    pending = [(i, fn(paths[i])) for i in todo]
                    failed: list[int] = []
                    for i, res in pending:
                        try:
                            out[i] = res.get(timeout=max(0.001, min(self.endpoint.call_timeout_s,
                                                                    retry.deadline_s - (retry.clock() - t0))))
                        except Exception as exc:  # noqa: BLE001 - translated or retried
                            mapped = _translate(exc, op, paths[i], self.quorum, self.who)
                            if isinstance(mapped, ZkNoNode):
                                out[i] = None
                            elif mapped is not None:
                                raise mapped from None
                            else:
                                failed.append(i)
                                last = exc
                    todo = failed
                    if failed:
                        raise _Lost(last or TimeoutError())
                    return out
        except _Lost:
            pass
        raise ZkUnreachable(
            f"{op} of {len(todo)} znodes (e.g. {paths[todo[0]]}): no answer within {retry.deadline_s:g}s "
            f"({type(last).__name__ if last else 'timeout'})",
            where=f"zookeeper {self.quorum}", hint="check that the quorum is up and reachable")

    def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Any] | None]:
        """``get`` every path in parallel; a missing znode gives ``None``."""
        return [None if r is None else (r[0], r[1]) for r in self._many("get", paths, self.kazoo.get_async)]

    def get_children_many(self, paths: Sequence[str]) -> list[list[str] | None]:
        """``get_children`` of every path in parallel; a missing znode gives ``None``."""
        return [None if r is None else list(r) for r in
                self._many("get_children", paths, self.kazoo.get_children_async)]

    # -- writes
    def create(self, path: str, value: bytes = b"", *, ephemeral: bool = False, sequence: bool = False,
               makepath: bool = False) -> str:
        self._writable("create", path)

        def ours(err: ZkError) -> str:
            # the znode exists: ours if it holds our value (and, if ephemeral, our session)
            if isinstance(err, ZkNodeExists) and not sequence:
                data, stat = self.get(path)
                owner_ok = not ephemeral or stat.ephemeralOwner == self.kazoo.client_id[0]
                if data == value and owner_ok:
                    return path
            raise err

        return str(self._call("create", path, lambda: self.kazoo.create_async(
            path, value, acl=self.acl, ephemeral=ephemeral, sequence=sequence, makepath=makepath), ours))

    def set(self, path: str, value: bytes, version: int = -1) -> Any:
        self._writable("set", path)
        return self._call("set", path, lambda: self.kazoo.set_async(path, value, version))

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        self._writable("delete", path)
        if recursive:
            try:
                children = self.get_children(path)
            except ZkNoNode:
                return
            for child in children:
                self.delete(f"{path.rstrip('/')}/{child}", recursive=True)
        def gone(err: ZkError) -> None:
            if isinstance(err, ZkNoNode):
                return None  # our earlier attempt deleted it
            raise err

        try:
            self._call("delete", path, lambda: self.kazoo.delete_async(path, version), gone)
        except ZkNoNode:
            if not recursive:
                raise

    def ensure_path(self, path: str) -> None:
        """Create ``path`` and its missing parents (with this client's ACL); no error if present."""
        self._writable("ensure_path", path)
        parts = [p for p in path.split("/") if p]
        cur = ""
        for part in parts:
            cur += "/" + part
            if self.exists(cur) is not None:
                continue
            try:
                self.create(cur)
            except ZkNodeExists:
                pass

    def transaction(self) -> ZkTransaction:
        return ZkTransaction(self)

    # -- lifecycle
    def close(self) -> None:
        try:
            self.kazoo.stop()
        finally:
            self.kazoo.close()

    def __enter__(self) -> ZkClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _HideCredentials(logging.Filter):
    """kazoo logs its Auth packets (``auth='user:password'``) at DEBUG: replace every credential
    this process has connected with by ``***`` before a record leaves the logger."""

    secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is left as it is
            return True
        hidden = msg
        for secret in sorted(self.secrets, key=len, reverse=True):
            hidden = hidden.replace(secret, "***")
        if hidden != msg:
            record.msg, record.args = hidden, ()
        return True


def _kazoo_logger(auth: Sequence[tuple[str, str]] = ()) -> logging.Logger:
    """kazoo logs every refused reconnect at WARNING; our errors already say what failed.

    Its messages go to ``dr_toolkit.zk.kazoo``, quiet (CRITICAL only) unless debug logging is
    on, with the credentials in ``auth`` hidden.
    """
    lg = logging.getLogger("dr_toolkit.zk.kazoo")
    if lg.level == logging.NOTSET and not logging.getLogger().isEnabledFor(logging.DEBUG):
        lg.setLevel(logging.CRITICAL)
    for _scheme, cred in auth:
        _HideCredentials.secrets.update({cred, cred.partition(":")[2]} - {""})
    if not any(isinstance(f, _HideCredentials) for f in lg.filters):
        lg.addFilter(_HideCredentials())
    return lg


def connect(endpoint: ZooKeeperEndpoint, *, credentials: Credentials | None, retry: Retry | None = None,
            read_only: bool = False) -> ZkClient:
    """Start a session on ``endpoint.quorum`` within ``endpoint.connect_timeout_s``, authenticated
    with ``credentials`` (resolved by the caller from the endpoint's ``conn_id``; ``None``: none).

    Unreachable → :class:`UnreachableError` naming the quorum (exit 3), never a hang.
    """
    from kazoo.client import KazooClient
    from kazoo.exceptions import AuthFailedError

    auth = auth_entries(credentials)
    sasl = dict(credentials.extra.get("sasl") or {}) if credentials and credentials.extra else {}
    kw: dict[str, Any] = {}
    kerberos = None
    if str(sasl.get("mechanism", "")).upper() == "GSSAPI":
        kerberos = kerberos_for(KerberosConfig.from_credentials(credentials))
        kerberos.credentials()  # a missing keytab or unknown principal: one line now, not a failed handshake
        sasl = sasl_gssapi_options(kerberos, service=str(sasl.get("service") or "zookeeper"))
    if sasl:
        kw["sasl_options"] = sasl
    client = KazooClient(
        hosts=endpoint.quorum,
        timeout=max(4.0, min(30.0, endpoint.call_timeout_s)),  # session timeout
        auth_data=auth or None,
        read_only=read_only,
        # reconnect quickly after an outage (kazoo's default backs off up to an hour)
        connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 1.5, "max_delay": 1.0},
        logger=_kazoo_logger(auth),
        **kw,
    )
    try:
        client.start(timeout=endpoint.connect_timeout_s)
    except Exception as exc:  # noqa: BLE001 - any failure to start means: not connected
        try:
            client.stop()
            client.close()
        except Exception:  # noqa: BLE001 - best effort clean-up of a client that never connected
            pass
        if isinstance(exc, AuthFailedError) and kerberos is not None:
            if isinstance(exc.__cause__, KerberosError):
                raise exc.__cause__ from None
            raise KerberosError("ZooKeeper refused the Kerberos (SASL GSSAPI) authentication",
                                where=f"zookeeper {endpoint.quorum}, {kerberos.who}",
                                hint="check that the server's principal is zookeeper/<host in the quorum> "
                                     "and that it runs the SASL authentication provider") from None
        if isinstance(exc, AuthFailedError):
            raise ZkNoAuth("authentication failed", where=f"zookeeper {endpoint.quorum}",
                           hint="check the digest/SASL credentials of the endpoint's conn_id") from None
        raise ZkUnreachable(
            f"cannot connect within {endpoint.connect_timeout_s:g}s ({type(exc).__name__})",
            where=f"zookeeper {endpoint.quorum}",
            hint="check that the quorum is up and reachable, or raise connect_timeout_s") from None
    who = (kerberos.who if kerberos is not None else
           (f"digest user {auth[0][1].partition(':')[0]}" if auth else None))
    return ZkClient(client, endpoint, retry=retry or ZK_RETRY, acl=default_acl(auth, sasl=kerberos is not None),
                    read_only=read_only, kerberos=kerberos, who=who)


@contextmanager
def zk_session(endpoint: ZooKeeperEndpoint, *, credentials: Credentials | None, retry: Retry | None = None,
               read_only: bool = False) -> Iterator[ZkClient]:
    """``with zk_session(endpoint, credentials=creds) as zk: ...`` — :func:`connect`, then close on exit."""
    client = connect(endpoint, credentials=credentials, retry=retry, read_only=read_only)
    try:
        yield client
    finally:
        client.close()
