"""DistCp's options on `drt distcp` (issue 24 item 6), each against the real HDFS of the session
(tests/support/fixtures_hdfs.py: source and target are two directories of the hot cluster,
read and written through WebHDFS) and, where it applies, local trees: -filters, -i, -log,
-m/-strategy, -p[ugpaxt] (the test HDFS runs with dfs.permissions.enabled=false, so SETOWNER
is allowed to the client's user; a real cluster needs its superuser), several sources,
-diff/-rdiff snapshot names. -p re-applied to kept files whose attributes drifted (local) and a
chmod on an HDFS source (fileId, size and mtime unchanged) applied."""

from __future__ import annotations

import grp
import json
import os
import pwd
import time
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.fs import open_fs
from dr_toolkit.topology import CopyOptions
from tests.support.fixtures_copy import make_tree, run_distcp, tree_digest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


drt = run_distcp  # `drt --json distcp ARGS` in this process (tests/support/fixtures_copy.py)


def hdfs_tree(d: Any, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        d.write(rel, data)


def test_filters_file_excludes_what_a_regex_matches_whole(tmp_path: Path, hot_dir: Any,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    hdfs_tree(hot_dir, {"src/a/keep.txt": b"k", "src/a/part.tmp": b"t", "src/staging/x.txt": b"s",
                        "src/b/_temporary/0/y": b"y", "src/tmpfile": b"partial match only: copied"})
    flt = tmp_path / "filters"
    flt.write_text(".*\\.tmp\n\n/staging\n.*/_temporary\ntmp\n")
    code, out, err = drt(capsys, hot_dir.uri("/src"), hot_dir.uri("/dst"), "-filters", str(flt))
    assert code == 0, err
    assert sorted(hot_dir.tree("/dst")) == ["a/keep.txt", "tmpfile"]
    assert out["files_total"] == 2
    # the same rules on local trees (--filters, the long spelling)
    make_tree(tmp_path / "src", {"a/keep.txt": b"k", "a/part.tmp": b"t", "staging/x.txt": b"s"})
    code, _, err = drt(capsys, str(tmp_path / "src"), str(tmp_path / "dst"), "--filters", str(flt))
    assert code == 0, err
    assert list(tree_digest(tmp_path / "dst")) == ["a/keep.txt"]
    # a line that is no regular expression: one line naming the file and line, exit 2, nothing copied
    flt.write_text(".*\\.tmp\n(unclosed\n")
    code, out, err = drt(capsys, hot_dir.uri("/src"), hot_dir.uri("/dst2"), "-filters", str(flt))
    assert code == 2 and out is None and len(err.strip().splitlines()) == 1
    assert f"-filters {flt}, line 2: '(unclosed' is not a regular expression" in err
    assert hot_dir.stat("/dst2") is None


def test_ignore_failures_goes_on_lists_each_failure_logs_every_file_and_exits_1(
        tmp_path: Path, hot_dir: Any, capsys: pytest.CaptureFixture[str]) -> None:
    hdfs_tree(hot_dir, {"src/ok/a.bin": b"a" * 2000, "src/ok/b.bin": b"b" * 3000, "src/full/c.bin": b"c" * 4000,
                        "src/full/d.bin": b"d" * 10})
    # a space quota of 1 byte on the target's full/: the NameNode refuses every block there
    hot_dir.mkdir("/dst/full")
    r = hot_dir.fs().client._session.put(
        f"{hot_dir.active_url}/webhdfs/v1{hot_dir.p('/dst/full')}",
        params={"op": "SETQUOTA", "namespacequota": "-1", "storagespacequota": "1", "user.name": "hdfs"})
    assert r.status_code == 200, r.text
    logs = tmp_path / "logs"
    code, out, err = drt(capsys, hot_dir.uri("/src"), hot_dir.uri("/dst"), "-i", "-log", str(logs), "-m", "2")
    assert code == 1, err  # "found a problem": never 0 when a file was not copied
    assert out["files_copied"] == 2 and out["files_failed"] == 2
    assert sorted(f["path"] for f in out["failures"]) == ["full/c.bin", "full/d.bin"]
    assert all("Quota" in f["error"] for f in out["failures"]), out["failures"]
    assert sorted(hot_dir.tree("/dst")) == ["ok/a.bin", "ok/b.bin"]
    # -log: <dir>/<run id>.jsonl, the run first, then one line per file
    lines = [json.loads(x) for x in (logs / f"{out['run_id']}.jsonl").read_text().splitlines()]
    assert out["log_file"] == str(logs / f"{out['run_id']}.jsonl")
    assert lines[0]["run_id"] == out["run_id"] and lines[0]["status"] == "failed" and lines[0]["files_failed"] == 2
    acts = {x["path"]: x["action"] for x in lines[1:]}
    assert acts == {"ok/a.bin": "copied", "ok/b.bin": "copied", "full/c.bin": "failed", "full/d.bin": "failed"}
    # the quota lifted, the next run copies only what failed; its log says what was skipped
    r = hot_dir.fs().client._session.put(
        f"{hot_dir.active_url}/webhdfs/v1{hot_dir.p('/dst/full')}",
        params={"op": "SETQUOTA", "namespacequota": "-1", "storagespacequota": "-1", "user.name": "hdfs"})
    assert r.status_code == 200, r.text
    code, out, err = drt(capsys, hot_dir.uri("/src"), hot_dir.uri("/dst"), "--update", "-log", str(logs))
    assert code == 0 and out["files_copied"] == 2, err
    lines = [json.loads(x) for x in (logs / f"{out['run_id']}.jsonl").read_text().splitlines()]
    assert {x["path"]: x["action"] for x in lines[1:]} == {
        "ok/a.bin": "skipped", "ok/b.bin": "skipped", "full/c.bin": "copied", "full/d.bin": "copied"}
    # a -log that is a file: one line, exit 2, nothing copied
    (tmp_path / "afile").write_text("x")
    code, out, err = drt(capsys, hot_dir.uri("/src"), hot_dir.uri("/dst3"), "-log", str(tmp_path / "afile"))
    assert code == 2 and "is a file" in err and hot_dir.stat("/dst3") is None
    # one inside the target (the logs would be copied over, or deleted by --delete): refused too
    code, out, err = drt(capsys, hot_dir.uri("/src"), hot_dir.uri("/dst3"), "-log", hot_dir.uri("/dst3/logs"))
    assert code == 2 and "lies inside the target" in err and hot_dir.stat("/dst3") is None


def test_strategy_and_m_copy_every_file(hot_dir: Any, capsys: pytest.CaptureFixture[str]) -> None:
    files = {f"src/d{i % 3}/f{i:02d}": bytes([i]) * (300 * i + 1) for i in range(7)}
    hdfs_tree(hot_dir, files)
    for strategy in ("dynamic", "uniformsize"):
        code, out, err = drt(capsys, hot_dir.uri("/src"), hot_dir.uri(f"/{strategy}"), "-m", "3",
                             "-strategy", strategy)
        assert code == 0 and out["files_copied"] == 7, err
        assert hot_dir.tree(f"/{strategy}") == {k[4:]: v for k, v in files.items()}


def test_list_threads_list_the_same_files_and_directory_tokens_as_one_walk(
        tmp_path: Path, hot_dir: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from dr_toolkit.copy.listing import Side, list_tree
    from dr_toolkit.fs import open_fs
    from dr_toolkit.fs.uri import parse_uri

    files = {"src/top.txt": b"t", "src/a/1": b"1", "src/a/b/2": b"2", "src/c/3": b"3", "src/d/e/f/4": b"4",
             "src/g/.drt-tmp.x": b"killed run's", "src/h/5": b"5"}
    hdfs_tree(hot_dir, files)
    make_tree(tmp_path / "src", {k[4:]: v for k, v in files.items()})
    (tmp_path / "src/empty").mkdir()
    # the local directories' times set in the past: a directory changed within FRESH_S of a listing has a
    # token marked fresh, and the two listings below must not straddle that window (a flake under load)
    old = time.time() - 3600
    for d in [tmp_path / "src", *(p for p in (tmp_path / "src").rglob("*") if p.is_dir())]:
        os.utime(d, (old, old))
    for uri in (hot_dir.uri("/src"), str(tmp_path / "src")):
        loc = parse_uri(uri)
        fs = open_fs(loc, Access.from_env())
        seen = []
        for n in (1, 4):
            tokens: dict[str, Any] = {}
            skips: list[tuple[str, str]] = []

            def skip(p: str, r: str, into: list[tuple[str, str]] = skips) -> None:
                into.append((p, r))

            got = list_tree(Side(loc, fs, loc.path, list_threads=n), skipped=skip, dirs=tokens)
            seen.append((sorted(got), tokens, sorted(skips)))
        assert seen[0] == seen[1] and seen[0][0] == ["a/1", "a/b/2", "c/3", "d/e/f/4", "h/5", "top.txt"], uri
        assert {"", "a", "a/b", "d/e/f", "g"} <= set(seen[0][1]), seen[0][1]
    code, out, err = drt(capsys, hot_dir.uri("/src"), hot_dir.uri("/dst"), "-numListstatusThreads", "4")
    assert code == 0 and out["files_copied"] == 6, err
    assert sorted(hot_dir.tree("/dst")) == ["a/1", "a/b/2", "c/3", "d/e/f/4", "h/5", "top.txt"]


def test_uniformsize_splits_the_files_into_lists_of_equal_bytes() -> None:
    from dr_toolkit.copy.execute import uniform_lists
    from dr_toolkit.copy.plan import FileTask

    tasks = [FileTask(f"f{i}", s, 0.0) for i, s in enumerate([900, 500, 400, 300, 300, 200, 100, 100])]
    lists = uniform_lists(tasks, 3)
    assert sorted(t.rel for x in lists for t in x) == sorted(t.rel for t in tasks)  # each once
    assert sorted(sum(t.size for t in x) for x in lists) == [900, 900, 1000]


def _xattrs(hot_dir: Any, rel: str) -> dict[str, str]:
    r = hot_dir.fs().client._get_xattrs(hot_dir.p(rel), encoding="hex")
    return {x["name"]: x["value"] for x in r.json()["XAttrs"]}


def test_preserve_ugpaxt_on_hdfs_and_again_on_files_kept(hot_dir: Any, capsys: pytest.CaptureFixture[str]) -> None:
    hdfs_tree(hot_dir, {"src/a.txt": b"alpha", "src/sub/b.txt": b"beta"})
    c = hot_dir.fs().client
    for rel in ("/src/a.txt", "/src/sub/b.txt"):
        p = hot_dir.p(rel)
        c.set_owner(p, owner="alice", group="analysts")
        c.set_permission(p, "640")
        c.set_acl(p, "user::rw-,user:bob:r--,group::r--,mask::r--,other::---")
        c._set_xattr(p, **{"xattr.name": "user.origin", "xattr.value": "0x686f74", "flag": "CREATE"})
        c.set_times(p, modification_time=1_600_000_000_000)
    code, out, err = drt(capsys, hot_dir.uri("/src"), hot_dir.uri("/dst"), "-pugpaxt")
    assert code == 0 and out["files_copied"] == 2, err
    for rel in ("/dst/a.txt", "/dst/sub/b.txt"):
        st = hot_dir.stat(rel)
        assert (st["owner"], st["group"], st["permission"], st["modificationTime"]) == (
            "alice", "analysts", "640", 1_600_000_000_000), st
        assert c.acl_status(hot_dir.p(rel))["entries"] == ["user:bob:r--", "group::r--"]
        assert _xattrs(hot_dir, rel) == {"user.origin": "0x686f74"}
    # behind our back: the target's owner, ACL and xattr change; the next -p run re-applies them
    # to the file it keeps (as DistCp re-applies -p to the files it skips)
    p = hot_dir.p("/dst/a.txt")
    c.set_owner(p, owner="mallory", group="other")
    c.remove_acl(p)
    c._set_xattr(p, **{"xattr.name": "user.origin", "xattr.value": "0x636f6c64", "flag": "REPLACE"})
    code, out, err = drt(capsys, hot_dir.uri("/src"), hot_dir.uri("/dst"), "--update", "-pugpaxt")
    assert code == 0 and out["files_copied"] == 0 and out["attributes_reapplied"] == 1, err
    st = hot_dir.stat("/dst/a.txt")
    assert (st["owner"], st["group"]) == ("alice", "analysts")
    assert c.acl_status(p)["entries"] == ["user:bob:r--", "group::r--"]
    assert _xattrs(hot_dir, "/dst/a.txt") == {"user.origin": "0x686f74"}
    # --preserve owner (the long spelling) on a new target: the owner only, not the group
    code, out, err = drt(capsys, hot_dir.uri("/src"), hot_dir.uri("/dst2"), "--preserve", "owner")
    assert code == 0, err
    st = hot_dir.stat("/dst2/a.txt")
    assert st["owner"] == "alice" and st["group"] != "analysts"
    assert c.acl_status(hot_dir.p("/dst2/a.txt"))["entries"] == []


def test_preserve_owner_and_group_between_local_trees_and_acl_refused_there(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if os.geteuid() != 0:
        pytest.fail("chown needs root: run the suite as root (as CI does)")
    make_tree(tmp_path / "src", {"a.txt": b"a"})
    nobody = pwd.getpwnam("nobody")
    group = grp.getgrgid(nobody.pw_gid).gr_name
    os.chown(tmp_path / "src/a.txt", nobody.pw_uid, nobody.pw_gid)
    code, _, err = drt(capsys, str(tmp_path / "src"), str(tmp_path / "dst"), "-pug")
    assert code == 0, err
    st = os.stat(tmp_path / "dst/a.txt")
    assert (st.st_uid, grp.getgrgid(st.st_gid).gr_name) == (nobody.pw_uid, group)
    code, out, err = drt(capsys, str(tmp_path / "src"), str(tmp_path / "dst2"), "-pa")
    assert code == 2 and out is None and "cannot read acl" in err and not (tmp_path / "dst2").exists()


def test_several_sources_each_under_its_name_and_colliding_names_refused(
        hot_dir: Any, capsys: pytest.CaptureFixture[str]) -> None:
    hdfs_tree(hot_dir, {"a/logs/l1": b"1", "b/data/d1": b"2", "b/data/sub/d2": b"3", "c/one.txt": b"4",
                        "c/logs/l9": b"9"})
    code, out, err = drt(capsys, hot_dir.uri("/a/logs"), hot_dir.uri("/b/data"), hot_dir.uri("/c/one.txt"),
                         hot_dir.uri("/dst"), "--update")
    assert code == 0, err
    assert hot_dir.tree("/dst") == {"logs/l1": b"1", "data/d1": b"2", "data/sub/d2": b"3", "one.txt": b"4"}
    assert out["files_copied"] == 4 and len(out["results"]) == 3
    # a second run: nothing to copy
    code, out, err = drt(capsys, hot_dir.uri("/a/logs"), hot_dir.uri("/b/data"), hot_dir.uri("/c/one.txt"),
                         hot_dir.uri("/dst"), "--update")
    assert code == 0 and out["files_copied"] == 0, err
    code, out, err = drt(capsys, hot_dir.uri("/a/logs"), hot_dir.uri("/c/logs"), hot_dir.uri("/dst2"))
    assert code == 2 and out is None and len(err.strip().splitlines()) == 1
    assert "would both be copied to" in err and "/dst2/logs" in err
    assert hot_dir.stat("/dst2") is None


def test_diff_and_rdiff_snapshot_names_on_the_command_line(hot_dir: Any, capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    hot_dir.allow_snapshot("/src")
    hdfs_tree(hot_dir, {"src/a": b"a1", "src/b": b"b1"})
    hot_dir.create_snapshot("/src", "s1")
    hot_dir.write("/src/c", b"c1")
    hot_dir.write("/src/a", b"a2-longer")
    hot_dir.create_snapshot("/src", "s2")
    src, dst = hot_dir.uri("/src"), hot_dir.uri("/dst")
    # first run: the target has no run at s1, so s2 is listed (DistCp would refuse its diff too)
    code, out, err = drt(capsys, src, dst, "--update", "-diff", "s1", "s2")
    assert code == 0, err
    assert out["source_snapshot"] == "s2" and "-diff s1 s2: read from snapshot s2" in out["mode_reason"]
    assert hot_dir.tree("/dst") == {"a": b"a2-longer", "b": b"b1", "c": b"c1"}
    hot_dir.delete("/src/b")
    hot_dir.write("/src/d", b"d1")
    hot_dir.create_snapshot("/src", "s3")
    hot_dir.write("/src/live-only", b"after s3")  # in no snapshot: never copied by -diff/-rdiff
    # the target's last run was at s2: only the NameNode's diff s2 -> s3 is applied
    code, out, err = drt(capsys, src, dst, "--update", "--delete", "-diff", "s2", "s3")
    assert code == 0, err
    assert "snapshot diff s2 → s3" in out["mode_reason"] and out["files_copied"] == 1, out["mode_reason"]
    assert hot_dir.tree("/dst") == {"a": b"a2-longer", "c": b"c1", "d": b"d1"}
    # -rdiff s3 s1: the target put back to s1 (files s1 lacks deleted, changed ones restored)
    code, out, err = drt(capsys, src, dst, "--update", "-rdiff", "s3", "s1")
    assert code == 0, err
    assert hot_dir.tree("/dst") == {"a": b"a1", "b": b"b1"}
    snaps = hot_dir.cluster.client().list(hot_dir.p("/src/.snapshot"))
    assert sorted(snaps) == ["s1", "s2", "s3"]  # none created or deleted by these runs
    # refused, one line and exit 2, nothing written: a missing snapshot, no --update, one name twice
    for args, says in ((["--update", "-diff", "s1", "nope"], "has no snapshot 'nope'"),
                       (["-diff", "s1", "s2"], "-diff needs --update"),
                       (["--update", "-diff", "s1", "s1"], "the two snapshots are the same")):
        code, out, err = drt(capsys, src, hot_dir.uri("/dst9"), *args)
        assert code == 2 and out is None and says in err and len(err.strip().splitlines()) == 1, err
    assert hot_dir.stat("/dst9") is None


def test_preserve_is_reapplied_when_the_target_drifts(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"a": b"a", "b": b"b"})
    os.chmod(tmp_path / "src/a", 0o640)
    os.utime(tmp_path / "src/a", (1_600_000_000, 1_600_000_000))
    opts = CopyOptions(update=True, delete=True, preserve=["permissions", "times"])
    assert distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=opts),
                  access=Access.from_env()).ok
    os.chmod(tmp_path / "dst/a", 0o666)  # behind our back
    os.utime(tmp_path / "dst/a", (1_700_000_000, 1_700_000_000))
    r = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=opts),
               access=Access.from_env())
    assert r.ok and r.files_copied == 0 and r.attributes_reapplied == 1, (r.mode_reason, r.basis)
    st = os.stat(tmp_path / "dst/a")
    assert oct(st.st_mode & 0o777) == "0o640" and st.st_mtime == 1_600_000_000
    r = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=opts),
               access=Access.from_env())
    assert r.ok and r.mode == "fast-forward" and r.attributes_reapplied == 0, r.mode_reason


def test_a_chmod_on_an_hdfs_source_is_applied_with_preserve(tmp_path: Path, hot_dir: Any) -> None:
    fs = open_fs(hot_dir.location("/s"), Access.from_env())
    fs.write_bytes(hot_dir.p("/s/f"), b"f")
    fs.set_permission(hot_dir.p("/s/f"), "644")
    opts = CopyOptions(update=True, delete=True, preserve=["permissions"])
    dst = tmp_path / "dst"
    assert distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=opts), access=Access.from_env()).ok
    fs.set_permission(hot_dir.p("/s/f"), "600")  # fileId, size and mtime unchanged
    r = distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=opts), access=Access.from_env())
    assert r.ok and r.attributes_reapplied == 1, (r.mode_reason, r.basis)
    assert oct(os.stat(dst / "f").st_mode & 0o777) == "0o600"
