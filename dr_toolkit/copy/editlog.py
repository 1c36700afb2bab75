"""The NameNode's edit log as the gate's O(changes) evidence (issue 42): what changed on a side since
the proof, read from the NameNode's transaction ids and its inotify events instead of a snapshot
diff (which walks the NameNode's tree: ~0.2 µs per file, ≈ 17 s at 100,000,000 files).

**The transaction id.** Every change to an HDFS namespace is one numbered transaction of the
NameNode's edit log, numbered in the order applied (under the namesystem's write lock), and the
number a NameNode reports as ``LastAppliedOrWrittenTxId`` (its ``/jmx``, bean
``Hadoop:service=NameNode,name=NameNodeInfo``, attribute ``JournalTransactionInfo``: read from the
edit log when asked) only grows while that NameNode process runs. (Not ``LastWrittenTransactionId``
of the ``FSNamesystem`` bean: a metrics source, whose /jmx values are a cached snapshot up to ~10 s
old — found here: a write's txid did not show in it — and a stale "now" would hide a write.) So,
for one NameNode process: *the same txid read at two moments ⇒ no namespace change at all between
them* — no create, delete, rename, append, truncate, setTimes, permission change, anywhere. A txid
is evidence only as the base of what was read *after* it: the proof reads it BEFORE its evidence
(cold: before the ``drtproof`` snapshot or the counters; hot: before the full check looks at hot),
never after (a write between the evidence and a later read would be missed).

**Which NameNode.** :func:`namenode_state` asks each listed NameNode's ``NameNodeStatus`` for the
active one and reads, on it, its start time, the txid, its start time and status again (equal: both
from one process, active throughout), its cluster id and block pool id. A quick check trusts a txid
only against one recorded from the same process in the same HA term (cluster id, block pool id,
start time, RPC address, last HA transition time all equal): a NameNode
restarted (its log may have been restored from an older image, its numbers re-used for other
changes), reformatted (new block pool) or an HA failover (another process, or the same one in a new
term: a standby's txid is only what it has tailed) is not trusted — the snapshot-diff path runs,
with the reason. (A MiniDFSCluster's HA pair shares one JVM and so one /jmx: the second
NameNode's beans carry a ``-1`` suffix, and the active one's status names which.)

**The base at the start of an edit segment.** On a NameNode, ``getEditsFromTxid(T)`` opens the edit
segment holding T and decodes it from the segment's start up to T (``EditLogFileInputStream.skipUntil``)
— on every call. A base deep in a long segment makes every quick read pay for the whole segment before
it (measured: 500 transactions' events 8.3 s on a NameNode whose segment held 1,000,000 creations,
1.1 s after a roll). So, where a side's base is read, :func:`base_state` first reads the txid with the
first txid of the segment the NameNode is writing (NameNodeInfo's ``NameJournalStatus``: a file
journal's ``edits_inprogress_<txid>``, a quorum journal's "segment beginning at txid"); when the txid is
more than :data:`ROLL_MIN_TXNS` past that start (or the start is not known; ``$DRT_HDFS_EDITLOG_ROLL``:
``always`` at every proof, ``off`` never), it has the NameNode roll its
edit log (:func:`roll_edits`: ``ClientProtocol.rollEdits``, what ``hdfs dfsadmin -rollEdits`` and an
HA standby every ``dfs.ha.log-roll.period`` — 2 min by default — call: an END_LOG_SEGMENT transaction
closes the segment, a START_LOG_SEGMENT transaction, whose txid the roll returns, opens the next) and
records as the base the txid read by :func:`namenode_state` right AFTER the roll — still before the
evidence, with the same identity checks (read before and after the roll: the same process, active, the
same HA term; else the txid read after it is the base, not claimed at a segment start). The roll
changes no file and is not an event; correctness never rests on it: the base is always a txid read
before the evidence — the roll only puts it near a segment's start, so that a later read decodes
nothing before it. Where the roll cannot be made (no ``$DRT_HADOOP_CLASSPATH``, not the HDFS superuser,
a standby, a failed login, the switch :data:`ENV_ROLL` off) the proof records the txid as before and
its detail says the base is not at a segment start (each quick read then first decodes the segment up
to it). Its effect on the NameNode: one more, small segment per proof and side (a standby makes one
every 2 minutes).

**Our own writes.** Creating and deleting the proof's snapshot are transactions too (they change
no file: snapshot operations are not inotify events). Cold's txid is read after the proof's own
snapshot is taken and before the full check lists cold (a change before the read is in what the
full check sees; one after it has a later txid). Deleting the previous proof's snapshot comes
after the record: the proof reads the txid before and after it and moves the recorded txid over
it only when the txid before equals the recorded one and the one after is exactly one more (that
one transaction was ours, nothing else happened since the record); any other step keeps the
recorded value, and the quick check then reads the events (below). The full check's own reads
may log access-time updates (``dfs.namenode.accesstime.precision``, 1 h by default): the txid
then moves and the events say so (access-time updates are not changes).

**The events (O(changes)).** When the txid moved, :func:`read_edits` runs a small Java reader
(``java/HdfsEdits.java``, compiled once against the Hadoop client jars of ``$DRT_HADOOP_CLASSPATH``,
what ``hadoop classpath`` prints) that calls the NameNode's ``getEditsFromTxid`` — what HDFS inotify
(``HdfsAdmin.getInotifyEventStream``) polls — from the recorded txid to the one read now, and
prints the events that touch the policy's root: a path (or a rename's destination) at or below it,
or a create, unlink or rename of one of its ancestors. The NameNode translates every edit that
changes a file's bytes or names into an event: CREATE, CLOSE (with the length), APPEND, TRUNCATE,
UNLINK, RENAME, METADATA (times, permissions, owner, replication, ACLs, xattrs) — so, unlike the
snapshot diff, TRUNCATE + APPEND + SETTIMES restoring size and mtime is seen. Only access-time
updates (``dfs.namenode.accesstime.precision``: a read may log one) are not changes here.

**What it cannot see**: bytes changed on a DataNode behind the NameNode's back (no edit; no
namespace evidence sees that either — the full proof's checksums do). **Its cost** grows with the
NameNode's transactions since the proof, the whole namespace's (the edit log is not per
directory): bounded by :data:`MAX_EVENTS` events under the root and :data:`MAX_SECONDS`; past
either, or where the reader cannot run — no ``$DRT_HADOOP_CLASSPATH``, not the HDFS superuser
(``getEditsFromTxid`` requires it when permissions are on), edits purged after a checkpoint
(a gap), a standby — the caller takes the snapshot-diff path and states why. Never GO on belief.

**Kerberos.** On a kerberized side the reader logs in as that side's principal (:func:`_kerberos_args`: its
keytab, else the ticket cache the library reads) — it must be the HDFS superuser (the NameNode's own user or a
member of ``dfs.permissions.superusergroup``), else the snapshot diff answers, saying why. The NameNode's
principal comes from the Hadoop configuration directory on ``$DRT_HADOOP_CLASSPATH``. A failed login or SASL
handshake is a :class:`~dr_toolkit.kerberos.KerberosError` (exit 3), never "no change".
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import ConfigError
from dr_toolkit.javac import build_jar, cache_dir
from dr_toolkit.kerberos import KerberosError

if TYPE_CHECKING:
    from collections.abc import Callable

    from dr_toolkit.kerberos import Kerberos

ENV_CLASSPATH = "DRT_HADOOP_CLASSPATH"  # what `hadoop classpath` prints: the reader's Hadoop client jars
ENV_SWITCH = "DRT_HDFS_EDITLOG"  # "off" (or 0/false/no): the quick path uses the snapshot diffs only
# the proof's roll of a NameNode's edit log: "off" (or 0/false/no) never; "always" at every proof; else (the
# default) when the txid is more than ROLL_MIN_TXNS past its segment's start, or that start is not known
ENV_ROLL = "DRT_HDFS_EDITLOG_ROLL"
ROLL_MIN_TXNS = 10_000  # a base at most this far past its segment's start is not worth a roll (≈ 40 ms to decode)
ROLL_TIMEOUT_S = 60.0  # the roll's JVM: start, login, one RPC
READER_CLASS = "org.drtoolkit.copy.HdfsEdits"
READER_SOURCE = Path(__file__).parent / "java" / "HdfsEdits.java"
MAX_EVENTS = 10_000  # events under the root past which the snapshot diff is asked instead
MAX_SECONDS = 20.0  # the reader's own bound on reading the edits
JVM_TIMEOUT_S = 120.0

_BEAN_STATUS = "Hadoop:service=NameNode,name=NameNodeStatus"
_BEAN_INFO = "Hadoop:service=NameNode,name=NameNodeInfo"


class EditLogUnavailable(Exception):
    """The edit log could not be read (``kind``: superuser, missing, standby, bound, classpath, off,
    other); the message says why — the caller falls back to the snapshot diff with it."""

    def __init__(self, msg: str, kind: str = "other") -> None:
        super().__init__(msg)
        self.kind = kind


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "").strip().lower() not in ("off", "0", "false", "no")


def roll_mode() -> str:
    """``off``, ``always`` or ``on`` (the default): when the proof rolls a NameNode's edit log (:data:`ENV_ROLL`)."""
    v = os.environ.get(ENV_ROLL, "").strip().lower()
    return "off" if v in ("off", "0", "false", "no") else "always" if v == "always" else "on"


@dataclass(frozen=True)
class NameNodeState:
    """One active NameNode's last written transaction id and the identity of its process."""

    txid: int
    cluster_id: str
    block_pool_id: str
    started_ms: int
    rpc: str  # host:port of its RPC server (the reader's address)
    http: str  # the WebHDFS/HTTP base URL it answered on
    ha_since: int = 0  # its last HA transition (ms; 0: none): a failover and back is another term
    # the first txid of the edit segment holding ``txid`` (None: not read, or not known) — its cost only
    segment: int | None = None

    def record(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def of(d: Any) -> NameNodeState | None:
        if not isinstance(d, dict):
            return None
        try:
            seg = d.get("segment")
            return NameNodeState(int(d["txid"]), str(d["cluster_id"]), str(d["block_pool_id"]),
                                 int(d["started_ms"]), str(d["rpc"]), str(d["http"]), int(d.get("ha_since") or 0),
                                 None if seg is None else int(seg))
        except (KeyError, TypeError, ValueError):
            return None


def place(state: NameNodeState) -> str:
    """Where ``state.txid`` sits in its edit segment — what a read from it first decodes."""
    if state.segment is None:
        return "its place in its edit segment not known (a read from it first decodes the segment up to it)"
    if state.txid <= state.segment:
        return f"the first transaction of its edit segment ({state.segment})"
    n = state.txid - state.segment
    return (f"{n:,} transaction{'s' if n != 1 else ''} past the start of its edit segment ({state.segment}), "
            "which a read from it first decodes")



def not_same(recorded: NameNodeState, now: NameNodeState) -> str | None:
    """Why ``now`` cannot be compared with ``recorded`` (another NameNode process), or None."""
    for what, a, b in (("cluster id", recorded.cluster_id, now.cluster_id),
                       ("block pool id", recorded.block_pool_id, now.block_pool_id),
                       ("start time", recorded.started_ms, now.started_ms),
                       ("RPC address", recorded.rpc, now.rpc),
                       ("last HA transition", recorded.ha_since, now.ha_since)):
        if a != b:
            why = {"block pool id": "reformatted", "start time": "restarted", "RPC address": "another NameNode "
                   "active (HA failover)", "cluster id": "another cluster", "last HA transition": "an HA "
                   "transition since"}[what]
            return (f"the active NameNode is not the one of the proof ({why}: {what} {a} then, {b} now): its "
                    "transaction ids are not comparable")
    return None


def _jmx(get: Callable[[str], Any], base: str, bean: str, attr: str | None = None) -> Any:
    """One bean (or one attribute of it) from a NameNode's ``/jmx`` servlet."""
    q = f"get={bean}::{attr}" if attr else f"qry={bean}"
    r = get(f"{base.rstrip('/')}/jmx?{q}")
    beans = r.json().get("beans") or []
    if not beans:
        raise EditLogUnavailable(f"{base}/jmx has no bean {bean}")
    return beans[0].get(attr) if attr else beans[0]


def _txid(info: Any) -> int:
    """``LastAppliedOrWrittenTxId`` of NameNodeInfo's ``JournalTransactionInfo`` (a JSON text)."""
    d = json.loads(info) if isinstance(info, str) else info
    return int(d["LastAppliedOrWrittenTxId"])


def _active(get: Callable[[str], Any], base: str) -> tuple[str, dict[str, Any]] | None:
    """The active NameNode's ``NameNodeStatus`` at ``base`` — (its bean's name suffix, the bean) —
    or None (standby). One JVM normally serves one NameNode; a MiniDFSCluster's HA pair shares one,
    its second NameNode's beans named ``...-1``: the suffix names the NameNodeInfo of the same one."""
    r = get(f"{base.rstrip('/')}/jmx?qry={_BEAN_STATUS}*")
    for b in r.json().get("beans") or []:
        if str(b.get("State", "")).lower() == "active":
            return str(b.get("name", ""))[len(_BEAN_STATUS):], b
    return None


_SEGMENT_RES = (re.compile(r"edits_inprogress_0*(\d+)"), re.compile(r"[Ss]egment beginning at txid (\d+)"))


def _segment(journals: Any) -> int | None:
    """The first txid of the edit segment the NameNode is writing, from NameNodeInfo's
    ``NameJournalStatus`` (a JSON list of its journals, each ``stream`` the open segment's report: a
    file journal's ``EditLogFileOutputStream(.../edits_inprogress_<txid>)``, a quorum journal's
    ``Writing segment beginning at txid <txid>``) — None when no journal names one or they disagree."""
    try:
        js = json.loads(journals) if isinstance(journals, str) else journals
    except ValueError:
        return None
    found = {int(m.group(1)) for j in (js if isinstance(js, list) else []) if isinstance(j, dict)
             for rx in _SEGMENT_RES for m in [rx.search(str(j.get("stream") or ""))] if m}
    return found.pop() if len(found) == 1 else None


def namenode_state(namenodes: list[str], get: Callable[[str], Any], rpc_addresses: list[str] | None = None,
                   calls: Any = None, *, segment: bool = False) -> NameNodeState:
    """The active NameNode's txid and identity (see the module doc). ``get`` is an HTTP GET
    returning a response (the WebHDFS session's, with its authentication). Read in this order:
    its status (active, its last HA transition), its start time, the txid, (``segment``: the first
    txid of the segment it is writing — read after the txid, so a segment start not above the txid
    is the start of the segment holding it), its start time and status again — equal: the txid is
    that process's, read while it was active throughout. Raises when no NameNode answers as active
    or it changed while read."""
    errors: list[str] = []
    for i, base in enumerate(namenodes):
        try:
            found = _active(get, base)
            if calls is not None:
                calls.did("JMX")
            if found is None:
                errors.append(f"{base}: not active")
                continue
            sfx, status = found
            info = _BEAN_INFO + sfx
            started = int(_jmx(get, base, info, "NNStartedTimeInMillis"))
            txid = _txid(_jmx(get, base, info, "JournalTransactionInfo"))
            seg = _segment(_jmx(get, base, info, "NameJournalStatus")) if segment else None
            again = int(_jmx(get, base, info, "NNStartedTimeInMillis"))
            status2 = _jmx(get, base, _BEAN_STATUS + sfx)
            cluster = str(_jmx(get, base, info, "ClusterId"))
            pool = str(_jmx(get, base, info, "BlockPoolId"))
            if calls is not None:
                calls.did("JMX", 7 if segment else 6)
        except EditLogUnavailable as exc:
            errors.append(str(exc))
            continue
        except KerberosError:
            raise  # our ticket, not this NameNode: the next one would refuse it too
        except Exception as exc:  # noqa: BLE001 - this NameNode does not answer: try the next
            errors.append(f"{base}: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}")
            continue
        ha = int(status.get("LastHATransitionTime") or 0)
        if started != again or str(status2.get("State", "")).lower() != "active" or int(
                status2.get("LastHATransitionTime") or 0) != ha:
            raise EditLogUnavailable(f"the NameNode at {base} restarted or changed its HA state while its "
                                     "transaction id was read")
        rpc = (rpc_addresses[i] if rpc_addresses and i < len(rpc_addresses) else str(status.get("HostAndPort") or ""))
        if not rpc:
            raise EditLogUnavailable(f"the NameNode at {base} names no RPC address (HostAndPort)")
        return NameNodeState(txid, cluster, pool, started, rpc, base, ha,
                             seg if seg is not None and seg <= txid else None)
    raise EditLogUnavailable("no NameNode answered as active on /jmx (" + "; ".join(errors) + ")")


# -- the reader ---------------------------------------------------------------------------------------

def hadoop_jars() -> list[str]:
    """The Hadoop client jars of ``$DRT_HADOOP_CLASSPATH`` (``hadoop classpath``'s form: entries
    separated by ``:``, directories and ``dir/*`` globs expanded; configuration directories kept)."""
    text = os.environ.get(ENV_CLASSPATH, "").strip()
    if not text:
        raise EditLogUnavailable(f"${ENV_CLASSPATH} is not set (what `hadoop classpath` prints): the edit log "
                                 "reader cannot run", "classpath")
    out: list[str] = []
    for part in text.split(os.pathsep):
        part = part.strip()
        if not part:
            continue
        if part.endswith("*"):
            out += sorted(glob.glob(part if part.endswith(".jar") else part.rstrip("*") + "*.jar"))
        elif part.endswith(".jar"):
            if os.path.isfile(part):
                out.append(part)
        elif os.path.isdir(part):
            out.append(part)  # a configuration directory (core-site.xml, hdfs-site.xml)
            out += sorted(glob.glob(os.path.join(part, "*.jar")))
    if not any("hadoop-hdfs-client" in os.path.basename(j) or "hadoop-client-api" in os.path.basename(j)
               for j in out):
        raise EditLogUnavailable(f"${ENV_CLASSPATH} holds no hadoop-hdfs-client (or hadoop-client-api) jar",
                                 "classpath")
    return out


def reader_jar(jars: list[str]) -> str:
    """Our reader compiled against ``jars`` (once per source and jar set, in the cache directory)."""
    h = hashlib.sha256(READER_SOURCE.read_bytes())
    h.update("|".join(sorted(os.path.basename(j) for j in jars)).encode())
    dest = cache_dir() / f"drt-hdfs-edits-{h.hexdigest()[:12]}.jar"
    if not dest.is_file():
        build_jar(dest, READER_SOURCE, os.pathsep.join(jars), what="the HDFS edit log reader", release="8",
                  hint=f"${ENV_CLASSPATH} must be what `hadoop classpath` prints (Hadoop 3)")
    return str(dest)


def _class_archive(java: str, cp: str) -> tuple[list[str], Path | None]:
    """The JVM's class-data archive of the reader (AppCDS, JDK 13+): its classes as the first run
    loaded them, mapped by later runs — about half the reader's start CPU (0.5 s instead of 1.0 s
    here). The first run writes it (to a temporary name, renamed when the run succeeded); a JVM that
    cannot use it (another classpath, another JDK) ignores it. Not with a directory on the classpath
    (the Hadoop configuration directory `hadoop classpath` lists on an edge node): the JVM refuses to
    dump an archive then ("Cannot have non-empty directory in paths") and exits 1 after the read."""
    if any(os.path.isdir(p) for p in cp.split(os.pathsep)):
        return [], None
    h = hashlib.sha256(f"{java}|{cp}".encode()).hexdigest()[:12]
    archive = cache_dir() / f"drt-hdfs-edits-{h}.jsa"
    if archive.is_file():
        return [f"-XX:SharedArchiveFile={archive}"], None
    tmp = archive.with_name(f"{archive.stem}.{uuid.uuid4().hex[:8]}.jsa")  # two readers at once: two names
    return [f"-XX:ArchiveClassesAtExit={tmp}"], tmp


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").exists():
        return str(Path(home, "bin", "java"))
    found = shutil.which("java")
    if not found:
        raise EditLogUnavailable("java not found: the edit log reader cannot run", "classpath")
    return found


@dataclass
class Edits:
    """What the reader read after a txid: the events touching the roots, and up to where."""

    after: int
    read_to: int
    events_read: int  # all events of the NameNode in that range
    atime_only: int = 0  # access-time-only updates under the roots (counted, not changes)
    touched: list[dict[str, Any]] = field(default_factory=list)

    def changes(self) -> list[dict[str, Any]]:
        """The events that change what a copy holds: all but access-time-only updates."""
        return [e for e in self.touched if not access_time_only(e)]


def access_time_only(e: dict[str, Any]) -> bool:
    """A METADATA event of kind TIMES that sets no modification time (-1): a read's atime update."""
    return e.get("e") == "METADATA" and e.get("meta") == "TIMES" and int(e.get("mtime", 0)) < 0


def _kerberos_args(kerberos: Kerberos) -> list[str]:
    """The reader's Kerberos login (see java/HdfsEdits.java): the principal with its keytab (the JVM
    logs in from it itself, and again when a connection needs a new ticket), else the ticket cache
    the library reads (a ``kinit``'ed one, checked here first: an expired ticket is one line now).
    The JVM does not read ``KRB5_CONFIG``: it gets the realm's krb5.conf as a system property."""
    cfg = kerberos.cfg
    cache = kerberos.ccache_in_use()  # a missing keytab, an unknown principal, an expired cache: KerberosError now
    args = [f"-Ddrt.kerberos.principal={cfg.principal or ''}"]
    if cfg.keytab:
        args.append(f"-Ddrt.kerberos.keytab={Path(cfg.keytab).resolve()}")
    else:
        args.append(f"-Ddrt.kerberos.ccache={cache.removeprefix('FILE:')}")
    conf = cfg.krb5_conf or os.environ.get("KRB5_CONFIG")
    if conf:
        args.append(f"-Djava.security.krb5.conf={conf}")
    return args


def _run_tool(args: list[str], *, what: str, refused: str, user: str | None, kerberos: Kerberos | None,
              timeout: float, rpc: str) -> tuple[list[dict[str, Any]], subprocess.CompletedProcess[str]]:
    """One run of ``java/HdfsEdits.java`` (built once; with its class archive and the side's Kerberos
    login): the JSON objects it printed, and the process. An ``{"error"}`` line raises — a
    :class:`~dr_toolkit.kerberos.KerberosError` for a failed login (with ``kerberos``), else
    :class:`EditLogUnavailable` of its kind (its message after ``refused``)."""
    jars = hadoop_jars()
    try:
        jar = reader_jar(jars)
    except ConfigError as exc:
        raise EditLogUnavailable(f"the edit log reader could not be built: {exc}", "classpath") from None
    java, cp = _java(), os.pathsep.join([jar, *jars])
    cds, dump = _class_archive(java, cp)
    argv = [java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true",
            "-Xlog:disable", *cds, *(_kerberos_args(kerberos) if kerberos is not None else []), "-cp", cp,
            READER_CLASS, *args]
    env = {**os.environ}
    if user and kerberos is None:  # with Kerberos the NameNode takes the user from the ticket
        env["HADOOP_USER_NAME"] = user
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise EditLogUnavailable(f"{what} did not finish within {timeout:g}s", "bound") from None
    except OSError as exc:
        raise EditLogUnavailable(f"{what} could not start: {exc}", "classpath") from None
    if dump is not None and p.returncode == 0 and dump.is_file():
        os.replace(dump, dump.with_name(dump.name.rsplit(".", 2)[0] + ".jsa"))  # the next runs start from it
    out: list[dict[str, Any]] = []
    for line in p.stdout.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if not isinstance(d, dict):
            continue
        if "error" in d:
            if d.get("kind") == "kerberos" and kerberos is not None:
                raise KerberosError(f"{what} could not authenticate to {rpc}: {d['error']}", where=kerberos.who,
                                    hint="check the principal's keytab (or kinit) and the cluster's Hadoop "
                                         f"configuration (dfs.namenode.kerberos.principal) on ${ENV_CLASSPATH}")
            raise EditLogUnavailable(f"{refused}: {d['error']}", str(d.get("kind")))
        out.append(d)
    return out, p


def _failed(what: str, p: subprocess.CompletedProcess[str]) -> EditLogUnavailable:
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip() and not ln.startswith("log4j:")]
    tail = (next((ln for ln in reversed(lines) if "Exception" in ln or "Error" in ln), None)
            or (lines or [f"exit {p.returncode}"])[-1])[:300]
    return EditLogUnavailable(f"{what} failed: {tail}")


def read_edits(state: NameNodeState, after: int, roots: list[str], *, user: str | None,
               max_events: int = MAX_EVENTS, max_seconds: float = MAX_SECONDS,
               kerberos: Kerberos | None = None) -> Edits:
    """The events after txid ``after`` up to at least ``state.txid`` that touch ``roots`` (see
    the module doc). Raises :class:`EditLogUnavailable` with the reason when they cannot be read
    or are more than ``max_events``. ``kerberos`` (the side's WebHDFS ticket holder): the reader
    logs in as that principal — which must be the HDFS superuser (the NameNode's own user, or a
    member of ``dfs.permissions.superusergroup``) — and a failed login is a
    :class:`~dr_toolkit.kerberos.KerberosError` (exit 3), never "no change"."""
    if not enabled():
        raise EditLogUnavailable(f"the edit log evidence is switched off (${ENV_SWITCH})", "off")
    lines, p = _run_tool([state.rpc, str(after), str(state.txid), str(max_events), str(max_seconds), *roots],
                         what="the edit log reader", refused="the NameNode's edit log could not be read", user=user,
                         kerberos=kerberos, timeout=JVM_TIMEOUT_S + max_seconds, rpc=state.rpc)
    out = Edits(after, after, 0)
    done: dict[str, Any] | None = None
    for d in lines:
        if "done" in d:
            done = d
        elif "e" in d:
            out.touched.append(d)
    if p.returncode != 0 or done is None:
        raise _failed("the edit log reader", p)
    if done.get("over"):
        raise EditLogUnavailable(f"more than {max_events} events under the policy's root since the proof (txid "
                                 f"{after} to {state.txid}): the snapshot diff is asked instead", "bound")
    out.read_to, out.events_read = int(done["read_to"]), int(done["events"])
    out.atime_only = int(done.get("atime_only") or 0)
    if out.read_to < state.txid:
        raise EditLogUnavailable(f"the edits were read to txid {out.read_to}, not to {state.txid}", "missing")
    return out


def roll_edits(state: NameNodeState, *, user: str | None, kerberos: Kerberos | None = None) -> int:
    """Has the NameNode at ``state.rpc`` roll its edit log (``ClientProtocol.rollEdits``; the HDFS
    superuser, the active NameNode); returns the first txid of the new segment (its
    START_LOG_SEGMENT transaction). Raises :class:`EditLogUnavailable` (kind: classpath, superuser,
    standby, bound, other) or :class:`~dr_toolkit.kerberos.KerberosError` saying why not."""
    lines, p = _run_tool(["--roll", state.rpc], what="the edit log roll", refused="the NameNode did not roll its "
                         "edit log", user=user, kerberos=kerberos, timeout=ROLL_TIMEOUT_S, rpc=state.rpc)
    got = next((d for d in lines if "rolled" in d), None)
    if p.returncode != 0 or got is None:
        raise _failed("the edit log roll", p)
    return int(got["rolled"])


@dataclass(frozen=True)
class Base:
    """A side's recorded txid — the base of its evidence — and what the proof says about it."""

    state: NameNodeState
    rolled: bool  # the NameNode's edit log was rolled right before ``state`` was read
    note: str  # for the proof's detail: where the base sits in its edit segment, and why
    roll_s: float | None = None  # the roll's own seconds (its JVM), when one was asked


def _why(exc: BaseException) -> str:
    return f"{exc}" if isinstance(exc, (EditLogUnavailable, KerberosError)) else f"{type(exc).__name__}: {exc}"


def base_state(read: Callable[[], NameNodeState], roll: Callable[[NameNodeState], int]) -> Base:
    """The txid a proof records for one side (see the module doc), read with ``read`` (the side's
    :func:`namenode_state`, with ``segment``) BEFORE that side's evidence: first the txid and its
    segment's start; when it is more than :data:`ROLL_MIN_TXNS` past that start (or the start is not
    known; :data:`ENV_ROLL` ``always``: in any case; ``off``: never), ``roll`` (:func:`roll_edits`)
    then ``read`` again — the base is the txid read after the roll, on the same NameNode process in
    the same HA term. Where the roll cannot be made, the base is the txid read before it, its note
    saying the base is not at a segment start and why. Raises only when the first read fails (then no base is recorded)."""
    before = read()
    mode = roll_mode()
    if mode == "off":
        return Base(before, False, f"not rolled (${ENV_ROLL} is off): the txid {before.txid} is {place(before)}")
    if mode == "on" and before.segment is not None and before.txid - before.segment <= ROLL_MIN_TXNS:
        return Base(before, False, f"not rolled (within {ROLL_MIN_TXNS:,} transactions of its segment's start): the "
                                   f"txid {before.txid} is {place(before)}")
    t = time.perf_counter()
    try:
        first = roll(before)
    except Exception as exc:  # noqa: BLE001 - no roll: the txid read before it is the base, said so
        return Base(before, False, f"the edit log could not be rolled ({_why(exc)}): the txid {before.txid} is "
                                   f"{place(before)}", time.perf_counter() - t)
    took = time.perf_counter() - t
    try:
        after = read()
    except Exception as exc:  # noqa: BLE001 - the txid read before the roll is still a base read before the evidence
        return Base(before, False, f"the edit log rolled (segment {first}), but the txid could not be read after it "
                                   f"({_why(exc)}): the txid {before.txid} read before the roll is the base, "
                                   f"{place(before)}", took)
    other = not_same(before, after)
    if other is not None or after.txid < first:
        why = other or f"the txid read after it ({after.txid}) is below the new segment's first ({first})"
        after = replace(after, segment=None)
        return Base(after, False, f"the edit log rolled (segment {first}), but {why}: the txid {after.txid} read "
                                  f"after the roll is the base, {place(after)}", took)
    after = replace(after, segment=after.segment if after.segment is not None else first)
    return Base(after, True, f"the edit log rolled at the proof (segment {first}, {took:.2f} s): the txid "
                             f"{after.txid} read right after it is {place(after)}", took)


def describe(e: dict[str, Any]) -> str:
    """One event, short: ``RENAME /a -> /b``, ``METADATA(TIMES) /x``."""
    kind = str(e.get("e")) + (f"({e['meta']})" if e.get("meta") else "")
    return f"{kind} {e.get('path')}" + (f" -> {e['dst']}" if e.get("dst") else "") + f" (txid {e.get('txid')})"


def changed_paths(events: list[dict[str, Any]], root: str) -> list[str]:
    """The distinct paths (relative to ``root``; a rename's both ends) the events name, in order."""
    seen: dict[str, None] = {}
    base = root.rstrip("/")
    for e in events:
        for p in (e.get("path"), e.get("dst")):
            if not isinstance(p, str):
                continue
            rel = p[len(base):].lstrip("/") if p == base or p.startswith(base + "/") else p
            seen.setdefault(rel, None)
    return list(seen)
