"""Kerberos for the clients the library opens: one ticket per principal, in a private credential
cache, renewed before it runs out; SPNEGO for HTTP (WebHDFS, a NameNode's ``/jmx``).

**Where the credentials come from** — never the topology file (it only says ``kerberos: true``):

- an Airflow connection (the endpoint's ``conn_id``; its hook resolves it, or
  ``AIRFLOW_CONN_<ID>`` outside Airflow): ``login`` is the principal, ``extra`` holds
  ``keytab`` (a path on the worker) or ``ccache`` (an existing ticket cache), optionally
  ``krb5_conf``; ``extra.principal`` wins over ``login``;
- else the environment: ``DRT_KERBEROS_PRINCIPAL`` + ``DRT_KERBEROS_KEYTAB``, or a ticket cache
  someone filled with ``kinit`` (``KRB5CCNAME``, or the default cache) — used, never written;
  ``KRB5_CONFIG`` names the realm's ``krb5.conf`` as for any Kerberos client.

**The ticket.** With a keytab the library obtains the ticket itself (``kinit -kt``, through MIT's
libkrb5) into a credential cache of its own — a file in a private temporary directory, mode
0600, never the user's default cache — and obtains a new one when less than a third of its
lifetime is left (a run may outlive any ticket). With only a ticket cache the ticket is read
from there; when it is renewable it is renewed into the private cache before it expires, else
the run stops at its end with one line saying so.

**Errors** are :class:`KerberosError` (exit 3, a dependency refused us): one line naming the
principal and what to do — a keytab missing or unreadable, a principal the KDC or the keytab
does not know, a KDC that does not answer, an expired ticket, a server refusing the ticket.
No key, password or ticket is ever logged.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import UnreachableError

if TYPE_CHECKING:
    from dr_toolkit.secrets import Credentials

ENV_PRINCIPAL = "DRT_KERBEROS_PRINCIPAL"
ENV_KEYTAB = "DRT_KERBEROS_KEYTAB"
REFRESH_FRACTION = 1 / 3  # a new ticket when less than this part of its lifetime is left
MIN_LEFT_S = 5.0  # never use a ticket with less than this left (a request in flight may need it)


class KerberosError(UnreachableError):
    """No valid Kerberos ticket can be had for a principal, or a server refused it (exit 3)."""


@dataclass(frozen=True)
class KerberosConfig:
    """Where a principal's ticket comes from (no secret in it: a keytab is a path)."""

    principal: str | None = None
    keytab: str | None = None
    ccache: str | None = None  # an existing ticket cache to read (KRB5CCNAME's form), when no keytab
    krb5_conf: str | None = None
    source: str = "environment"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> KerberosConfig:
        env = os.environ if env is None else env
        return cls(principal=env.get(ENV_PRINCIPAL) or None, keytab=env.get(ENV_KEYTAB) or None,
                   ccache=env.get("KRB5CCNAME") or None, krb5_conf=env.get("KRB5_CONFIG") or None,
                   source="environment")

    @classmethod
    def from_credentials(cls, creds: Credentials | None, env: Mapping[str, str] | None = None) -> KerberosConfig:
        """From a connection when it names a principal or a keytab, else from the environment."""
        extra = dict(creds.extra) if creds is not None else {}
        principal = extra.get("principal") or extra.get("kerberos_principal") or (creds.login if creds else None)
        keytab = extra.get("keytab") or extra.get("kerberos_keytab")
        ccache = extra.get("ccache")
        if creds is None or not (keytab or ccache or extra.get("principal") or extra.get("kerberos_principal")):
            base = cls.from_env(env)
            if creds is not None and principal and not base.principal:
                return cls(principal, base.keytab, base.ccache, base.krb5_conf, "environment")
            return base
        return cls(principal=str(principal) if principal else None, keytab=str(keytab) if keytab else None,
                   ccache=str(ccache) if ccache else None, krb5_conf=extra.get("krb5_conf") or None,
                   source="connection")

    def key(self) -> tuple[str | None, ...]:
        return (self.principal, self.keytab, self.ccache, self.krb5_conf)


def _hint(cfg: KerberosConfig) -> str:
    return (f"set {ENV_PRINCIPAL} and {ENV_KEYTAB} (or the connection's login and extra.keytab), "
            f"or run `kinit {cfg.principal or '<principal>'}` and set KRB5CCNAME")


class Kerberos:
    """One principal's ticket in a private credential cache, kept valid (see the module doc).

    Thread-safe: copies on many threads share one ticket and one re-acquisition."""

    def __init__(self, cfg: KerberosConfig, *, clock: Any = time.time) -> None:
        self.cfg = cfg
        self._clock = clock
        self._lock = threading.Lock()
        self._dir: str | None = None
        self._ends = 0.0
        self._starts = 0.0
        self._creds: Any = None
        self._in_use: str | None = None  # the credential cache the current ticket is in
        if cfg.krb5_conf:
            if not Path(cfg.krb5_conf).is_file():
                raise KerberosError(f"krb5.conf {cfg.krb5_conf} does not exist", where=self.who,
                                    hint="set KRB5_CONFIG (or the connection's extra.krb5_conf) to the realm's krb5.conf")
            os.environ["KRB5_CONFIG"] = cfg.krb5_conf  # libkrb5 and GSSAPI read it per context
        if cfg.keytab is None and cfg.ccache is None and cfg.principal is None:
            raise KerberosError("no Kerberos credentials (no principal, keytab or ticket cache)",
                                where="Kerberos", hint=_hint(cfg))

    @property
    def who(self) -> str:
        return f"Kerberos principal {self.cfg.principal or '(from the ticket cache)'}"

    @property
    def principal(self) -> str | None:
        return self.cfg.principal

    @property
    def ccache(self) -> str:
        """The private credential cache (``FILE:…``), created on first use."""
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="drt-krb5-")
            os.chmod(self._dir, 0o700)
            atexit.register(shutil.rmtree, self._dir, True)
        return f"FILE:{self._dir}/ccache"

    def close(self) -> None:
        with self._lock:
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None
            self._creds, self._ends, self._in_use = None, 0.0, None

    # -- the ticket --------------------------------------------------------------------------------
    def _use_realm_conf(self) -> None:
        """libkrb5 and GSSAPI read ``KRB5_CONFIG`` per context, from the process's environment: set it
        again on every use — anything in the process may have changed it since this holder was made
        (a shared holder outlives whoever set it; without it SPNEGO read /etc/krb5.conf: "Cannot find
        KDC for realm")."""
        if self.cfg.krb5_conf and os.environ.get("KRB5_CONFIG") != self.cfg.krb5_conf:
            os.environ["KRB5_CONFIG"] = self.cfg.krb5_conf

    def credentials(self) -> Any:
        """GSSAPI initiator credentials with a ticket valid for a while yet (see the module doc)."""
        self._use_realm_conf()
        with self._lock:
            now = self._clock()
            left = self._ends - now
            if self._creds is None or left < max(MIN_LEFT_S, (self._ends - self._starts) * REFRESH_FRACTION):
                self._acquire()
            return self._creds

    def ccache_in_use(self) -> str:
        """The credential cache (``FILE:…``) holding the ticket :meth:`credentials` gives now — the
        private cache with a keytab or after a renewal, else the ``kinit``'ed one read — for clients
        in other processes that read a cache themselves (librdkafka's ``KRB5CCNAME``, a JVM's
        ticket-cache login). A valid ticket is obtained first (KerberosError when none can be)."""
        self.credentials()
        with self._lock:
            assert self._in_use is not None
            return self._in_use

    def lifetime_left(self) -> float:
        return max(0.0, float(self._ends - self._clock()))

    def _acquire(self) -> None:
        if self.cfg.keytab:
            self._kinit_keytab()
        else:
            self._from_ccache()

    def _krb5(self) -> tuple[Any, Any]:
        import krb5

        return krb5, krb5.init_context()

    def _kinit_keytab(self) -> None:
        cfg = self.cfg
        assert cfg.keytab is not None
        kt_path = Path(cfg.keytab)
        if not kt_path.is_file() or not os.access(kt_path, os.R_OK):
            state = "does not exist" if not kt_path.exists() else "cannot be read"
            raise KerberosError(f"keytab {cfg.keytab} {state}", where=self.who,
                                hint=f"point {ENV_KEYTAB} (or the connection's extra.keytab) at a readable "
                                     "keytab of this principal")
        if not cfg.principal:
            raise KerberosError(f"a keytab ({cfg.keytab}) but no principal", where="Kerberos",
                                hint=f"set {ENV_PRINCIPAL} (or the connection's login)")
        krb5, ctx = self._krb5()
        try:
            princ = krb5.parse_name_flags(ctx, cfg.principal.encode())
            kt = krb5.kt_resolve(ctx, f"FILE:{kt_path.resolve()}".encode())
            opt = krb5.get_init_creds_opt_alloc(ctx)
            creds = krb5.get_init_creds_keytab(ctx, princ, opt, keytab=kt)
            cc = krb5.cc_resolve(ctx, self.ccache.encode())
            krb5.cc_initialize(ctx, cc, princ)
            krb5.cc_store_cred(ctx, cc, creds)
        except krb5.Krb5Error as exc:
            raise self._error(exc) from None
        self._starts, self._ends = float(creds.times.starttime or self._clock()), float(creds.times.endtime)
        self._creds = self._gss_creds(self.ccache)
        self._in_use = self.ccache

    def _from_ccache(self) -> None:
        """A ticket someone else obtained (``kinit``): read it; renew it into our own cache when it
        is renewable and close to its end."""
        krb5, ctx = self._krb5()
        src = self.cfg.ccache or krb5.cc_default_name(ctx).decode()
        try:
            cc = krb5.cc_resolve(ctx, src.encode())
            princ = krb5.cc_get_principal(ctx, cc)
        except krb5.Krb5Error:
            raise KerberosError(f"no Kerberos ticket in {src}", where=self.who, hint=_hint(self.cfg)) from None
        name = princ.name.decode() if hasattr(princ, "name") else None
        if self.cfg.principal and name and name != self.cfg.principal:
            raise KerberosError(f"the ticket cache {src} holds {name}, not {self.cfg.principal}", where=self.who,
                                hint=f"run `kinit {self.cfg.principal}` or set KRB5CCNAME to its cache")
        import gssapi.raw.misc

        creds = self._gss_creds(src)
        try:
            left = float(creds.lifetime or 0)
        except gssapi.raw.misc.GSSError:  # ExpiredCredentialsError
            left = 0.0
        if left < MIN_LEFT_S:
            raise KerberosError(f"the Kerberos ticket in {src} has expired", where=self.who,
                                hint=f"run `kinit {self.cfg.principal or name or '<principal>'}` again, or give "
                                     f"a keytab ({ENV_KEYTAB}) so tickets are renewed by themselves")
        now = self._clock()
        if self._creds is not None and left < (self._ends - self._starts) * REFRESH_FRACTION:
            try:  # a renewable ticket: renewed into our own cache (the user's is never written)
                renewed = krb5.get_renewed_creds(ctx, princ, cc)
                own = krb5.cc_resolve(ctx, self.ccache.encode())
                krb5.cc_initialize(ctx, own, princ)
                krb5.cc_store_cred(ctx, own, renewed)
                self._starts, self._ends = now, float(renewed.times.endtime)
                self._creds = self._gss_creds(self.ccache)
                self._in_use = self.ccache
                return
            except krb5.Krb5Error:
                pass  # not renewable: used until it ends, then the error above
        self._starts, self._ends = now, now + left
        self._creds = creds
        self._in_use = src if ":" in src.split("/")[0] else f"FILE:{src}"

    def _gss_creds(self, ccache: str) -> Any:
        import gssapi
        import gssapi.raw.misc

        try:
            return gssapi.Credentials(usage="initiate", store={"ccache": ccache})
        except gssapi.raw.misc.GSSError as exc:
            raise KerberosError(f"no usable Kerberos ticket in {ccache}: {_gss_text(exc)}", where=self.who,
                                hint=_hint(self.cfg)) from None

    def _error(self, exc: Any) -> KerberosError:
        text = str(exc.message.decode() if isinstance(getattr(exc, "message", None), bytes) else exc)
        low = text.lower()
        if "not found in kerberos database" in low or "no suitable keys" in low or "keytab" in low:
            return KerberosError(f"the KDC or the keytab {self.cfg.keytab} does not know this principal ({text})",
                                 where=self.who, hint=f"check {ENV_PRINCIPAL} (or the connection's login) against "
                                                      f"`klist -kt {self.cfg.keytab}`")
        if "cannot contact any kdc" in low or "cannot find kdc" in low or "connection refused" in low:
            return KerberosError(f"no KDC of the realm answered ({text})", where=self.who,
                                 hint="check the KDC and the realm in krb5.conf (KRB5_CONFIG)")
        if "preauthentication failed" in low or "integrity" in low or "decrypt" in low:
            return KerberosError(f"the keytab {self.cfg.keytab} holds stale keys ({text})", where=self.who,
                                 hint="export a fresh keytab for this principal")
        return KerberosError(f"cannot obtain a Kerberos ticket ({text})", where=self.who, hint=_hint(self.cfg))

    # -- SPNEGO ------------------------------------------------------------------------------------
    def negotiate_token(self, host: str, service: str = "HTTP") -> str:
        """``Negotiate <base64>`` for ``service/host`` (SPNEGO with the Kerberos mechanism)."""
        import base64

        import gssapi
        import gssapi.raw.misc

        creds = self.credentials()
        try:
            ctx = gssapi.SecurityContext(name=gssapi.Name(f"{service}@{host}", gssapi.NameType.hostbased_service),
                                         creds=creds, usage="initiate", mech=gssapi.MechType.kerberos)
            token = ctx.step()
        except gssapi.raw.misc.GSSError as exc:
            text = _gss_text(exc)
            if "expired" in text.lower():
                raise KerberosError(f"the Kerberos ticket has expired ({text})", where=self.who,
                                    hint=_hint(self.cfg)) from None
            raise KerberosError(f"no service ticket for {service}/{host}: {text}", where=self.who,
                                hint=f"check that {service}/{host} is a principal of the realm (servers are "
                                     "named by the host in their URL)") from None
        return "Negotiate " + base64.b64encode(token or b"").decode()


def _gss_text(exc: Any) -> str:
    try:
        return " ".join(str(exc.gen_message()).split())
    except Exception:  # noqa: BLE001 - the message itself is best-effort
        return type(exc).__name__


_HOLDERS: dict[tuple[str | None, ...], Kerberos] = {}
_HOLDERS_LOCK = threading.Lock()


def kerberos_for(cfg: KerberosConfig) -> Kerberos:
    """The one :class:`Kerberos` of this process for ``cfg`` (every client of one principal shares
    its ticket)."""
    with _HOLDERS_LOCK:
        hit = _HOLDERS.get(cfg.key())
        if hit is None:
            hit = _HOLDERS[cfg.key()] = Kerberos(cfg)
        return hit


def kerberos_wanted(kerberos: bool, credentials: Credentials | None = None) -> Kerberos | None:
    """The ticket holder a client of a Hadoop HTTP server uses: when the topology says
    ``kerberos: true``, or the environment names a principal (a bare ``webhdfs://`` URI on a
    kerberized cluster). None otherwise."""
    if not kerberos and not os.environ.get(ENV_PRINCIPAL):
        return None
    return kerberos_for(KerberosConfig.from_credentials(credentials))


def kerberos_required(response: Any, *args: Any, **kwargs: Any) -> Any:
    """A requests response hook for clients without Kerberos: a server asking to ``Negotiate`` is
    one clear error, not "Authentication required" deep in a copy (or an HTML page read as JSON)."""
    if response.status_code == 401 and "negotiate" in response.headers.get("WWW-Authenticate", "").lower():
        from urllib.parse import urlsplit

        raise KerberosError("the server asks for Kerberos (SPNEGO) and none is configured",
                            where=urlsplit(response.url).netloc,
                            hint=f"set hdfs.kerberos: true in the topology and {ENV_PRINCIPAL} + "
                                 f"{ENV_KEYTAB} (or the connection's login and extra.keytab)")
    return response


def http_get(url: str, *, kerberos: Kerberos | None = None, timeout_s: float = 10.0) -> Any:
    """One GET on a Hadoop HTTP server (a NameNode's or a region server's ``/jmx``), with SPNEGO
    when ``kerberos`` is given; returns the ``requests`` response (the caller checks its status).
    A server asking for Kerberos when none is given is a :class:`KerberosError`."""
    import requests

    with requests.Session() as s:
        if kerberos is not None:
            s.auth = SpnegoAuth(kerberos)
        else:
            s.hooks["response"].append(kerberos_required)
        return s.get(url, timeout=timeout_s)


class SpnegoAuth:
    """A ``requests`` auth: answers a ``401`` + ``WWW-Authenticate: Negotiate`` with a SPNEGO token
    for ``HTTP/<host of the URL>`` and sends the request again (Hadoop then sets its signed
    ``hadoop.auth`` cookie, which the session sends until it expires). A second 401 is a
    :class:`KerberosError` naming the principal and the server."""

    def __init__(self, kerberos: Kerberos, service: str = "HTTP") -> None:
        self.kerberos = kerberos
        self.service = service

    def __call__(self, r: Any) -> Any:
        r.register_hook("response", self._on_response)
        return r

    def _on_response(self, response: Any, **kwargs: Any) -> Any:
        from urllib.parse import urlsplit

        if response.status_code != 401 or "negotiate" not in response.headers.get("WWW-Authenticate", "").lower():
            return response
        host = urlsplit(response.url).hostname or ""
        again = response.request.copy()
        again.headers["Authorization"] = self.kerberos.negotiate_token(host, self.service)
        response.content  # noqa: B018 - drain, so the connection goes back to the pool
        response.raw.release_conn()
        out = response.connection.send(again, **kwargs)
        out.history.append(response)
        if out.status_code == 401:
            raise KerberosError(f"{urlsplit(response.url).netloc} refused the Kerberos ticket (HTTP 401)",
                                where=self.kerberos.who,
                                hint=f"check that the server's principal is {self.service}/{host} and the "
                                     "clocks agree")
        return out


# -- SASL/GSSAPI (ZooKeeper) -----------------------------------------------------------------------
SASL_MECHANISM = "DRT-GSSAPI"  # our name in pure-sasl's registry: its own GSSAPI needs pykerberos


def sasl_gssapi_options(kerberos: Kerberos, service: str = "zookeeper") -> dict[str, Any]:
    """kazoo's ``sasl_options`` for Kerberos (SASL GSSAPI, RFC 4752) with ``kerberos``'s own ticket
    (its private cache, renewed as for HTTP) — not whatever the process's default cache holds.
    The server is named ``<service>/<host as in the quorum string>``."""
    import puresasl.mechanisms  # type: ignore[import-untyped]

    if SASL_MECHANISM not in puresasl.mechanisms.mechanisms:
        puresasl.mechanisms.mechanisms[SASL_MECHANISM] = _gssapi_mechanism()
    return {"mechanism": SASL_MECHANISM, "service": service, "kerberos": kerberos}


def _gssapi_mechanism() -> Any:
    import gssapi
    from puresasl.mechanisms import Mechanism

    class DrtGssapiMechanism(Mechanism):  # type: ignore[misc]
        """SASL GSSAPI (RFC 4752) on python-gssapi: the context's tokens, then the security-layer
        answer (no layer: ZooKeeper authenticates the session, it does not wrap its traffic)."""

        name = SASL_MECHANISM
        score = 100
        allows_anonymous = False
        uses_plaintext = False
        active_safe = True

        def __init__(self, sasl: Any, kerberos: Kerberos | None = None, **props: Any) -> None:
            super().__init__(sasl)
            if kerberos is None:
                raise KerberosError("SASL GSSAPI without a Kerberos principal", where="ZooKeeper",
                                    hint="name the principal and keytab in the connection or the environment")
            self.kerberos = kerberos
            self.ctx: Any = None

        def process(self, challenge: bytes | None = None) -> bytes | None:
            if self.ctx is None:
                target = gssapi.Name(f"{self.sasl.service}@{self.sasl.host}", gssapi.NameType.hostbased_service)
                self.ctx = gssapi.SecurityContext(name=target, creds=self.kerberos.credentials(), usage="initiate",
                                                  mech=gssapi.MechType.kerberos)
                return bytes(self.ctx.step(None) or b"")
            if not self.ctx.complete:
                return bytes(self.ctx.step(challenge) or b"")
            if not challenge:
                return b""
            offer = self.ctx.unwrap(challenge).message
            if not offer or not offer[0] & 1:
                raise KerberosError("the server offers no SASL GSSAPI security layer this client takes",
                                    where=self.kerberos.who)
            self.complete = True
            return bytes(self.ctx.wrap(bytes([1, 0, 0, 0]), False).message)  # layer "none", no buffer

        def wrap(self, outgoing: bytes) -> bytes:
            return outgoing

        def unwrap(self, incoming: bytes) -> bytes:
            return incoming

        def dispose(self) -> None:
            self.ctx = None

    return DrtGssapiMechanism
