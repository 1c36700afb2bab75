"""Many consumer groups' committed offsets in a few requests: Kafka's OffsetFetch v8 (KIP-709,
Kafka ≥ 3.0) with many groups per request, after one batched FindCoordinator v4 (KIP-699).

librdkafka (confluent-kafka 2.16) sends one group per OffsetFetch (its consumer asks only for
the partitions it is given; its admin ListConsumerGroupOffsets takes one group and can crash the
process on a NOT_COORDINATOR answer — librdkafka issue #5040). At 40,000 groups and 100,000
partitions that is 40,000 requests of 100,000 partitions each. This module speaks the two
requests itself, over PLAINTEXT or SASL_PLAINTEXT with GSSAPI (Kerberos: SaslHandshake v1 +
SaslAuthenticate v1 carrying the GSSAPI tokens of RFC 4752, made by python-gssapi with the
toolkit's own ticket — :func:`register_kerberos`); any other ``security.protocol`` or mechanism
(TLS, SCRAM, PLAIN) gets :class:`WireUnsupported` and the caller takes the per-group path. A
broker refusing the ticket is a :class:`~dr_toolkit.kerberos.KerberosError` (exit 3), never a
fallback. Every group is answered or the call raises — a group is never silently left out
(a group the broker did not name in its answer is an error).

Requests: 1 FindCoordinator for every group + per coordinator ⌈G_c / :data:`GROUPS_PER_REQUEST`⌉
OffsetFetch, each asking for every committed partition of its groups (topics = null): the
answer grows with the committed (group, partition) pairs, never with the cluster's partitions.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import DrtError, UnreachableError

if TYPE_CHECKING:
    from dr_toolkit.kerberos import Kerberos

GROUPS_PER_REQUEST = 500
FIND_COORDINATOR, OFFSET_FETCH = 10, 9
RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
Committed = dict[str, dict[tuple[str, int], int]]


class WireUnsupported(DrtError):
    """The batched path cannot be used with this client configuration or broker."""


_KERBEROS: dict[str, Kerberos] = {}  # principal → its ticket holder (client.client_config registers it)
_KERBEROS_LOCK = threading.Lock()


def register_kerberos(principal: str, holder: Kerberos) -> None:
    """The ticket holder the wire clients use for a configuration naming ``principal``."""
    with _KERBEROS_LOCK:
        _KERBEROS[principal] = holder


def kerberos_of(conf: Mapping[str, Any]) -> Kerberos:
    """The ticket holder of a GSSAPI client configuration (made by ``client.client_config``)."""
    from dr_toolkit.kerberos import KerberosError

    principal = str(conf.get("sasl.kerberos.principal", ""))
    with _KERBEROS_LOCK:
        holder = _KERBEROS.get(principal)
    if holder is None:
        raise KerberosError("a SASL GSSAPI Kafka configuration without the toolkit's ticket",
                            where=f"Kerberos principal {principal or '(none)'}",
                            hint="build Kafka client settings with dr_toolkit.kafka.client.client_config")
    return holder


def _gssapi(conf: Mapping[str, Any]) -> bool:
    return str(conf.get("sasl.mechanisms", conf.get("sasl.mechanism", "GSSAPI"))).upper() == "GSSAPI"


def supported(conf: Mapping[str, Any]) -> bool:
    proto = str(conf.get("security.protocol", "plaintext")).lower()
    return proto == "plaintext" or (proto == "sasl_plaintext" and _gssapi(conf))


def _sasl(conf: Mapping[str, Any]) -> tuple[Kerberos, str] | None:
    """(ticket holder, service name) when ``conf`` speaks SASL GSSAPI, else None."""
    if str(conf.get("security.protocol", "plaintext")).lower() != "sasl_plaintext":
        return None
    return kerberos_of(conf), str(conf.get("sasl.kerberos.service.name", "kafka"))


def connect(host: str, port: int, timeout_s: float, client_id: str, conf: Mapping[str, Any]) -> _Conn:
    """A connection to one broker, authenticated with SASL GSSAPI when ``conf`` says so."""
    return _Conn(host, port, timeout_s, client_id, sasl=_sasl(conf))


# -- encoding (flexible versions: compact strings/arrays, tagged fields) ------------------------------

def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _cstr(s: str | None) -> bytes:
    if s is None:
        return _uvarint(0)
    b = s.encode()
    return _uvarint(len(b) + 1) + b


def _str16(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _header(api_key: int, version: int, corr: int, client_id: str) -> bytes:
    cid = client_id.encode()
    return struct.pack(">hhih", api_key, version, corr, len(cid)) + cid + _uvarint(0)


def find_coordinator_request(groups: list[str]) -> bytes:
    body = struct.pack(">b", 0) + _uvarint(len(groups) + 1) + b"".join(_cstr(g) for g in groups) + _uvarint(0)
    return body


def offset_fetch_request(groups: list[str]) -> bytes:
    out = bytearray(_uvarint(len(groups) + 1))
    for g in groups:
        out += _cstr(g) + _uvarint(0) + _uvarint(0)  # group id, topics = null (all), tagged fields
    out += b"\x00" + _uvarint(0)  # require_stable false (as the consumer's committed()), tagged fields
    return bytes(out)


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def take(self, fmt: str) -> Any:
        v = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v[0]

    def uvarint(self) -> int:
        n = shift = 0
        while True:
            b = self.buf[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7

    def cstr(self) -> str | None:
        n = self.uvarint()
        if n == 0:
            return None
        s = self.buf[self.pos:self.pos + n - 1].decode()
        self.pos += n - 1
        return s

    def str16(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        s = self.buf[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def bytes32(self) -> bytes:
        n = self.take(">i")
        if n < 0:
            return b""
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return bytes(b)

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def parse_find_coordinator(body: bytes) -> dict[str, tuple[int, str, int, int]]:
    """group → (node id, host, port, error code)."""
    r = _Reader(body)
    r.tags()  # response header v1
    r.take(">i")  # throttle
    out = {}
    for _ in range(r.uvarint() - 1):
        key = r.cstr() or ""
        node, host, port = r.take(">i"), r.cstr() or "", r.take(">i")
        err = r.take(">h")
        r.cstr()
        r.tags()
        out[key] = (node, host, port, err)
    return out


def parse_offset_fetch(body: bytes) -> dict[str, tuple[int, dict[tuple[str, int], int], int]]:
    """group → (group error code, committed offsets (offset ≥ 0 only), first partition error code)."""
    r = _Reader(body)
    r.tags()
    r.take(">i")
    out = {}
    for _ in range(r.uvarint() - 1):
        g = r.cstr() or ""
        offs: dict[tuple[str, int], int] = {}
        perr = 0
        for _ in range(r.uvarint() - 1):
            t = r.cstr() or ""
            for _ in range(r.uvarint() - 1):
                p, off = r.take(">i"), r.take(">q")
                r.take(">i")  # leader epoch
                r.cstr()  # metadata
                e = r.take(">h")
                r.tags()
                if e:
                    perr = perr or e
                elif off >= 0:
                    offs[(t, p)] = off
            r.tags()
        gerr = r.take(">h")
        r.tags()
        out[g] = (gerr, offs, perr)
    r.tags()
    return out


# -- connections ----------------------------------------------------------------------------------

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


class _Conn:
    def __init__(self, host: str, port: int, timeout_s: float, client_id: str,
                 sasl: tuple[Kerberos, str] | None = None) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.settimeout(timeout_s)
        self.corr = 0
        self.client_id = client_id
        self.requests = 0
        if sasl is not None:
            try:
                self._authenticate(host, *sasl)
            except BaseException:
                self.close()
                raise
            self.requests = 0  # what callers count are their own requests, not the SASL exchange

    def call(self, api_key: int, version: int, body: bytes, *, flexible: bool = True) -> bytes:
        self.corr += 1
        self.requests += 1
        head = _header(api_key, version, self.corr, self.client_id)
        msg = (head if flexible else head[:-1]) + body  # request header v2 (tagged fields) or v1
        self.sock.sendall(struct.pack(">i", len(msg)) + msg)
        size = struct.unpack(">i", self._recv(4))[0]
        resp = self._recv(size)
        if struct.unpack_from(">i", resp, 0)[0] != self.corr:
            raise DrtError("Kafka answer out of order (correlation id)")
        return resp[4:]

    def _recv(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def _authenticate(self, host: str, kerberos: Kerberos, service: str) -> None:
        """SASL GSSAPI (RFC 4752) on Kafka's SaslHandshake v1 + SaslAuthenticate v1: the GSSAPI
        context's tokens for ``service/host``, then the security-layer answer ("none": Kafka's
        SASL_PLAINTEXT does not wrap its traffic)."""
        import gssapi
        import gssapi.raw.misc

        from dr_toolkit.kerberos import KerberosError

        who = kerberos.who
        r = _Reader(self.call(SASL_HANDSHAKE, 1, _str16("GSSAPI"), flexible=False))
        err = r.take(">h")
        if err:
            offered = [r.str16() for _ in range(r.take(">i"))]
            raise KerberosError(f"the broker {host}:{self.sock.getpeername()[1]} does not take SASL GSSAPI "
                                f"(error code {err}; it offers {offered})", where=who,
                                hint="check the connection's sasl.mechanisms against the broker's listener")
        try:
            ctx = gssapi.SecurityContext(name=gssapi.Name(f"{service}@{host}", gssapi.NameType.hostbased_service),
                                         creds=kerberos.credentials(), usage="initiate", mech=gssapi.MechType.kerberos)
            token = bytes(ctx.step(None) or b"")
        except gssapi.raw.misc.GSSError as exc:
            raise KerberosError(f"no service ticket for {service}/{host}: {' '.join(str(exc).split())}",
                                where=who, hint=f"check that {service}/{host} is a principal of the realm (brokers "
                                                "are named by the host they advertise)") from None
        answered = False
        for _ in range(10):
            r = _Reader(self.call(SASL_AUTHENTICATE, 1, struct.pack(">i", len(token)) + token, flexible=False))
            err = r.take(">h")
            msg = r.str16()
            challenge = r.bytes32()
            if err:
                raise KerberosError(f"the broker {host} refused the Kerberos authentication (error code {err}: "
                                    f"{msg})", where=who, hint=f"check the principal and that the broker's is "
                                                              f"{service}/{host}")
            if answered:
                return
            if not ctx.complete:
                token = bytes(ctx.step(challenge) or b"")
                continue
            if not challenge:
                token = b""
                continue
            offer = ctx.unwrap(challenge).message
            if not offer or not offer[0] & 1:
                raise KerberosError("the broker offers no SASL GSSAPI security layer this client takes", where=who)
            token = bytes(ctx.wrap(bytes([1, 0, 0, 0]), False).message)  # layer "none", no buffer
            answered = True
        raise KerberosError(f"the broker {host} did not finish SASL GSSAPI", where=who)


def _addresses(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for a in bootstrap.split(","):
        a = a.strip().split("://")[-1]
        if a:
            host, _, port = a.rpartition(":")
            out.append((host.strip("[]") or "localhost", int(port or 9092)))
    return out


class OffsetFetcher:
    """Committed offsets of many groups (see the module doc). ``requests`` counts what was sent."""

    def __init__(self, bootstrap: str, conf: Mapping[str, Any], timeout_s: float, role: str = "kafka") -> None:
        if not supported(conf):
            raise WireUnsupported(f"batched OffsetFetch speaks PLAINTEXT and SASL_PLAINTEXT/GSSAPI only "
                                  f"(security.protocol={conf.get('security.protocol')})")
        self.bootstrap, self.timeout_s, self.role = bootstrap, timeout_s, role
        self.conf = dict(conf)
        self.client_id = str(conf.get("client.id", "drt-offset-fetch"))
        self.requests = 0
        self._lock = threading.Lock()

    def _unreachable(self, what: str) -> UnreachableError:
        return UnreachableError(f"{self.role} Kafka cluster did not answer ({what}) within {self.timeout_s:g}s",
                                where=self.bootstrap, hint="check that the brokers run and the address is right")

    def _connect(self, host: str, port: int) -> _Conn:
        return connect(host, port, self.timeout_s, self.client_id, self.conf)

    def _count(self, n: int) -> None:
        with self._lock:
            self.requests += n

    def _coordinators(self, groups: list[str]) -> dict[str, tuple[int, str, int, int]]:
        last: BaseException | None = None
        for host, port in _addresses(self.bootstrap):
            try:
                c = self._connect(host, port)
            except OSError as exc:
                last = exc
                continue
            try:
                out: dict[str, tuple[int, str, int, int]] = {}
                for i in range(0, len(groups), 10 * GROUPS_PER_REQUEST):
                    out.update(parse_find_coordinator(
                        c.call(FIND_COORDINATOR, 4, find_coordinator_request(groups[i:i + 10 * GROUPS_PER_REQUEST]))))
                return out
            except (OSError, ConnectionError, struct.error, IndexError, UnicodeDecodeError) as exc:
                # an old broker (no FindCoordinator v4) closes the connection
                raise WireUnsupported(f"batched FindCoordinator refused by {host}:{port}: {exc}") from None
            finally:
                self._count(c.requests)
                c.close()
        raise self._unreachable(f"connect: {last}")

    def _fetch_at(self, node: tuple[str, int], groups: list[str]) -> dict[str, tuple[int, dict[tuple[str, int], int],
                                                                                      int]]:
        c = self._connect(*node)
        try:
            out = {}
            for i in range(0, len(groups), GROUPS_PER_REQUEST):
                part = groups[i:i + GROUPS_PER_REQUEST]
                out.update(parse_offset_fetch(c.call(OFFSET_FETCH, 8, offset_fetch_request(part))))
            return out
        finally:
            self._count(c.requests)
            c.close()

    def committed(self, groups: Iterable[str]) -> Committed:
        """Every group's committed offsets (partitions without a commit left out). A coordinator
        not ready (loading after a start, moved) is asked again until the timeout; any other
        group or partition error raises; so does a group missing from an answer."""
        import concurrent.futures as cf

        todo = list(dict.fromkeys(groups))
        out: Committed = {}
        deadline = time.monotonic() + self.timeout_s
        while todo:
            coords = self._coordinators(todo)
            by_node: dict[tuple[str, int], list[str]] = {}
            retry: list[str] = []
            for g in todo:
                if g not in coords:
                    raise DrtError(f"{self.role} Kafka cluster's FindCoordinator answer lacks group {g!r}",
                                   where=self.bootstrap)
                _node, host, port, err = coords[g]
                if err in RETRIABLE:
                    retry.append(g)
                elif err:
                    raise DrtError(f"{self.role} Kafka cluster refused the coordinator of group {g!r} "
                                   f"(error code {err})", where=self.bootstrap)
                else:
                    by_node.setdefault((host, port), []).append(g)
            try:
                with cf.ThreadPoolExecutor(max_workers=max(1, min(8, len(by_node))),
                                           thread_name_prefix="drt-offset-fetch") as ex:
                    answers = list(ex.map(lambda kv: (kv[1], self._fetch_at(*kv)), by_node.items()))
            except (OSError, ConnectionError) as exc:
                raise self._unreachable(f"OffsetFetch: {exc}") from None
            except (struct.error, IndexError, UnicodeDecodeError) as exc:
                raise WireUnsupported(f"OffsetFetch v8 answer not understood: {exc}") from None
            for asked, ans in answers:
                for g in asked:
                    if g not in ans:
                        raise DrtError(f"{self.role} Kafka cluster's OffsetFetch answer lacks group {g!r}",
                                       where=self.bootstrap)
                    gerr, offs, perr = ans[g]
                    if gerr in RETRIABLE or perr in RETRIABLE:
                        retry.append(g)
                    elif gerr or perr:
                        raise DrtError(f"{self.role} Kafka cluster refused the committed offsets of group {g!r} "
                                       f"(error code {gerr or perr})", where=self.bootstrap)
                    else:
                        out[g] = offs
            todo = retry
            if todo:
                if time.monotonic() > deadline:
                    raise self._unreachable(f"committed offsets of {len(todo)} group(s): coordinator not ready")
                time.sleep(0.2)
        return out


# -- ListOffsets (v6: flexible, isolation level) --------------------------------------------------

LIST_OFFSETS = 2
EARLIEST, LATEST = -2, -1
PARTITIONS_PER_REQUEST = 20_000
Leader = tuple[str, int]


def list_offsets_request(parts: list[tuple[str, int]], ts: int, isolation: int) -> bytes:
    by: dict[str, list[int]] = {}
    for t, p in parts:
        by.setdefault(t, []).append(p)
    out = bytearray(struct.pack(">ib", -1, isolation) + _uvarint(len(by) + 1))
    for t, ps in by.items():
        out += _cstr(t) + _uvarint(len(ps) + 1)
        for p in ps:
            out += struct.pack(">iiq", p, -1, ts) + _uvarint(0)  # partition, current leader epoch, timestamp
        out += _uvarint(0)
    out += _uvarint(0)
    return bytes(out)


def parse_list_offsets(body: bytes) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) → (error code, offset)."""
    r = _Reader(body)
    r.tags()
    r.take(">i")
    out = {}
    for _ in range(r.uvarint() - 1):
        t = r.cstr() or ""
        for _ in range(r.uvarint() - 1):
            p, err = r.take(">i"), r.take(">h")
            r.take(">q")  # timestamp
            off = r.take(">q")
            r.take(">i")  # leader epoch
            r.tags()
            out[(t, p)] = (err, off)
        r.tags()
    r.tags()
    return out


class OffsetLister:
    """ListOffsets of many partitions: one request per partition leader (up to
    :data:`PARTITIONS_PER_REQUEST` partitions each), leaders asked in parallel. librdkafka's admin
    ListOffsets grows faster than linearly with the partitions of one call (measured on the
    brokers here: 1,000 partitions 0.17 s, 5,000 partitions 1.9 s for the two requests of
    ``watermarks_many``; this path: 0.08 s for one request of 5,000). PLAINTEXT or SASL GSSAPI."""

    def __init__(self, conf: Mapping[str, Any], timeout_s: float) -> None:
        if not supported(conf):
            raise WireUnsupported("batched ListOffsets speaks PLAINTEXT and SASL_PLAINTEXT/GSSAPI only")
        self.timeout_s = timeout_s
        self.conf = dict(conf)
        self.client_id = str(conf.get("client.id", "drt-list-offsets"))
        self.requests = 0
        self._lock = threading.Lock()

    def offsets(self, leaders: Mapping[tuple[str, int], Leader], tps: list[tuple[str, int]], ts: int,
                isolation: int = 0) -> dict[tuple[str, int], int]:
        """Each partition's offset for ``ts`` (EARLIEST, LATEST); partitions whose leader is not
        known, that the broker answered with an error, or whose leader did not answer are left
        out (the caller asks for those another way)."""
        import concurrent.futures as cf

        by: dict[Leader, list[tuple[str, int]]] = {}
        for tp in tps:
            if tp in leaders:
                by.setdefault(leaders[tp], []).append(tp)

        def one(item: tuple[Leader, list[tuple[str, int]]]) -> dict[tuple[str, int], int]:
            (host, port), parts = item
            got: dict[tuple[str, int], int] = {}
            try:
                c = connect(host, port, self.timeout_s, self.client_id, self.conf)
            except OSError:
                return got
            try:
                for i in range(0, len(parts), PARTITIONS_PER_REQUEST):
                    ans = parse_list_offsets(c.call(LIST_OFFSETS, 6, list_offsets_request(
                        parts[i:i + PARTITIONS_PER_REQUEST], ts, isolation)))
                    got.update({tp: off for tp, (err, off) in ans.items() if not err and off >= 0})
            except (OSError, ConnectionError, struct.error, IndexError, UnicodeDecodeError):
                pass  # the rest of this leader's partitions are asked another way
            finally:
                with self._lock:
                    self.requests += c.requests
                c.close()
            return got

        out: dict[tuple[str, int], int] = {}
        if not by:
            return out
        with cf.ThreadPoolExecutor(max_workers=max(1, min(8, len(by))), thread_name_prefix="drt-list-offsets") as ex:
            for got in ex.map(one, by.items()):
                out.update(got)
        return out


# -- the evidence of an incremental proof (lag.py): Metadata v12 + ListOffsets v6 fenced by epoch ----

METADATA = 3
FENCED = {74, 75}  # FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH: the leader's epoch moved on since Metadata
Evidence = tuple[str, int, int, int]  # topic id (hex), log start offset, end offset, leader epoch


def metadata_request(topics: list[str]) -> bytes:
    out = bytearray(_uvarint(len(topics) + 1))
    for t in topics:
        out += b"\x00" * 16 + _cstr(t) + _uvarint(0)  # topic id (zero: by name), name, tagged fields
    out += b"\x00\x00" + _uvarint(0)  # allow_auto_topic_creation, include_topic_authorized_operations
    return bytes(out)


def parse_metadata(body: bytes) -> tuple[dict[int, Leader], dict[str, tuple[int, str, dict[int, tuple[int, int, int]]]]]:
    """(node id → (host, port), topic → (error code, topic id hex, partition → (error code,
    leader id, leader epoch)))."""
    r = _Reader(body)
    r.tags()
    r.take(">i")  # throttle
    brokers: dict[int, Leader] = {}
    for _ in range(r.uvarint() - 1):
        node, host, port = r.take(">i"), r.cstr() or "", r.take(">i")
        r.cstr()  # rack
        r.tags()
        brokers[node] = (host, port)
    r.cstr()  # cluster id
    r.take(">i")  # controller
    topics: dict[str, tuple[int, str, dict[int, tuple[int, int, int]]]] = {}
    for _ in range(r.uvarint() - 1):
        err, name = r.take(">h"), r.cstr() or ""
        tid = r.buf[r.pos:r.pos + 16].hex()
        r.pos += 16
        r.take(">b")  # is_internal
        parts: dict[int, tuple[int, int, int]] = {}
        for _ in range(r.uvarint() - 1):
            perr, p, leader, epoch = r.take(">h"), r.take(">i"), r.take(">i"), r.take(">i")
            for _arr in range(3):  # replicas, isr, offline replicas
                for _ in range(r.uvarint() - 1):
                    r.take(">i")
            r.tags()
            parts[p] = (perr, leader, epoch)
        r.take(">i")  # topic authorized operations
        r.tags()
        topics[name] = (err, tid, parts)
    r.tags()
    return brokers, topics


def fenced_list_offsets_request(parts: list[tuple[str, int, int]], ts: int) -> bytes:
    """ListOffsets v6 (read_uncommitted) of (topic, partition, current leader epoch): the broker
    refuses a partition whose leader epoch is no longer that one (FENCED_LEADER_EPOCH)."""
    by: dict[str, list[tuple[int, int]]] = {}
    for t, p, e in parts:
        by.setdefault(t, []).append((p, e))
    out = bytearray(struct.pack(">ib", -1, 0) + _uvarint(len(by) + 1))
    for t, ps in by.items():
        out += _cstr(t) + _uvarint(len(ps) + 1)
        for p, e in ps:
            out += struct.pack(">iiq", p, e, ts) + _uvarint(0)
        out += _uvarint(0)
    out += _uvarint(0)
    return bytes(out)


def parse_list_offsets_epochs(body: bytes) -> dict[tuple[str, int], tuple[int, int, int]]:
    """(topic, partition) → (error code, offset, leader epoch)."""
    r = _Reader(body)
    r.tags()
    r.take(">i")
    out = {}
    for _ in range(r.uvarint() - 1):
        t = r.cstr() or ""
        for _ in range(r.uvarint() - 1):
            p, err = r.take(">i"), r.take(">h")
            r.take(">q")
            off, epoch = r.take(">q"), r.take(">i")
            r.tags()
            out[(t, p)] = (err, off, epoch)
        r.tags()
    r.tags()
    return out


def log_evidence(bootstrap: str, conf: Mapping[str, Any], timeout_s: float, tps: list[tuple[str, int]],
                 ) -> tuple[dict[tuple[str, int], Evidence], int]:
    """What the brokers say of each partition's log, as the evidence of lag.py's incremental
    proof: the topic id (Metadata v12: a topic deleted and re-created under the same name has a
    new one), then per partition leader its log start and end offsets (ListOffsets v6, EARLIEST
    and LATEST at once on two connections, read_uncommitted) asked *at the leader epoch Metadata
    named* — the broker refuses the partition once its leader epoch moved on (a leader change, an unclean election: the only
    ways records below the end offset are ever truncated) — and the epoch the LATEST answer
    carries, which must be that one. Partitions not answered whole are left out (the caller takes
    the full path for them). Returns (evidence, requests sent). PLAINTEXT or SASL_PLAINTEXT with
    GSSAPI (:class:`WireUnsupported` otherwise); a cluster that does not answer Metadata raises."""
    import concurrent.futures as cf

    if not supported(conf):
        raise WireUnsupported("the incremental proof's evidence (Metadata v12) speaks PLAINTEXT and "
                              "SASL_PLAINTEXT/GSSAPI only")
    client_id = str(conf.get("client.id", "drt-evidence"))
    topics = sorted({t for t, _ in tps})
    requests = 0
    answer: tuple[dict[int, Leader], dict[str, tuple[int, str, dict[int, tuple[int, int, int]]]]] | None = None
    last: BaseException | None = None
    for host, port in _addresses(bootstrap):
        try:
            c = connect(host, port, timeout_s, client_id, conf)
        except OSError as exc:
            last = exc
            continue
        try:
            answer = parse_metadata(c.call(METADATA, 12, metadata_request(topics)))
            requests += 1
            break
        except (OSError, ConnectionError) as exc:
            last = exc
        except (struct.error, IndexError, UnicodeDecodeError) as exc:
            raise WireUnsupported(f"Metadata v12 answer not understood: {exc}") from None
        finally:
            c.close()
    if answer is None:
        raise UnreachableError(f"Kafka cluster did not answer Metadata within {timeout_s:g}s: {last}", where=bootstrap)
    brokers, meta = answer
    by: dict[Leader, list[tuple[str, int, int]]] = {}
    tid: dict[str, str] = {}
    for t, p in tps:
        m = meta.get(t)
        if m is None or m[0] or (p not in m[2]):
            continue
        perr, leader, epoch = m[2][p]
        if perr or leader not in brokers or epoch < 0:
            continue
        tid[t] = m[1]
        by.setdefault(brokers[leader], []).append((t, p, epoch))

    def ask(item: tuple[Leader, list[tuple[str, int, int]], int]
            ) -> tuple[dict[tuple[str, int], tuple[int, int, int]] | None, int]:
        """One leader's answers to one ListOffsets (EARLIEST or LATEST) on its own connection;
        None when the leader did not answer whole (its partitions then have no evidence)."""
        (host, port), parts, ts = item
        try:
            c = connect(host, port, timeout_s, client_id, conf)
        except OSError:
            return None, 0
        got: dict[tuple[str, int], tuple[int, int, int]] = {}
        try:
            for i in range(0, len(parts), PARTITIONS_PER_REQUEST):
                got.update(parse_list_offsets_epochs(c.call(LIST_OFFSETS, 6, fenced_list_offsets_request(
                    parts[i:i + PARTITIONS_PER_REQUEST], ts))))
        except (OSError, ConnectionError, struct.error, IndexError, UnicodeDecodeError):
            return None, c.requests  # this leader's partitions have no evidence: the full path
        finally:
            c.close()
        return got, c.requests

    # Per leader, EARLIEST and LATEST at once, each on its own connection (one ListOffsets cannot
    # name a partition twice, and a broker answers one connection's requests one at a time). Their
    # order is not part of the evidence: both are asked at the epoch Metadata named and the broker
    # refuses either once it moved on; each field is compared for equality with the proof's own,
    # and a head removed (or records appended) after one of the two was answered is a change after
    # the check, as it would be after both — the same whichever is asked first.
    items = [(leader, parts, ts) for leader, parts in by.items() for ts in (EARLIEST, LATEST)]
    out: dict[tuple[str, int], Evidence] = {}
    if items:
        with cf.ThreadPoolExecutor(max_workers=max(1, min(16, len(items))), thread_name_prefix="drt-evidence") as ex:
            answers = list(ex.map(ask, items))
        requests += sum(n for _, n in answers)
        for k, (_leader, parts) in enumerate(by.items()):
            lo, hi = answers[2 * k][0], answers[2 * k + 1][0]
            if lo is None or hi is None:
                continue
            for t, p, epoch in parts:
                a, b = lo.get((t, p)), hi.get((t, p))
                if a is None or b is None or a[0] or b[0] or a[1] < 0 or b[1] < 0 or b[2] != epoch:
                    continue  # refused (fenced: the epoch moved on), or not that epoch: no evidence
                out[(t, p)] = (tid[t], a[1], b[1], epoch)
    return out, requests
