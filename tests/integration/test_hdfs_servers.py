"""The HDFS the tests run is the real one: Hadoop 3.4.1's NameNodes and DataNode
(hadoop-client-minicluster), hot an HA pair whose first NameNode is standby, cold a single
NameNode; both on 127.0.0.1 only."""

from __future__ import annotations

import json

import pytest
import requests

from drt_servers.hdfs import HADOOP_VERSION, HdfsCluster
from tests.support.fixtures_hdfs import HdfsDir

pytestmark = pytest.mark.integration


def _nn_info(url: str) -> dict[str, object]:
    r = requests.get(f"{url}/jmx", params={"qry": "Hadoop:service=NameNode,name=NameNodeInfo"}, timeout=10)
    beans = r.json()["beans"]
    assert beans, r.text
    return dict(beans[0])


def _ha_state(url: str) -> str:
    """What WebHDFS says (the JMX NameNodeStatus bean is JVM-wide: both NameNodes of the in-JVM
    HA pair show the first one's)."""
    r = requests.get(f"{url}/webhdfs/v1/", params={"op": "GETFILESTATUS", "user.name": "hdfs"}, timeout=10)
    if r.status_code == 200:
        return "active"
    assert r.status_code == 403 and r.json()["RemoteException"]["exception"] == "StandbyException", r.text
    return "standby"


def test_real_namenodes_of_the_pinned_release(hot_dir: HdfsDir, cold_dir: HdfsDir, hdfs_hot: HdfsCluster,
                                               hdfs_cold: HdfsCluster) -> None:
    for url in [*hdfs_hot.namenodes, *hdfs_cold.namenodes]:
        info = _nn_info(url)
        assert str(info["SoftwareVersion"]) == HADOOP_VERSION, info["SoftwareVersion"]
        assert url.startswith("http://127.0.0.1:")
    assert [_ha_state(u) for u in hdfs_hot.namenodes] == ["standby", "active"]
    assert _ha_state(hdfs_cold.namenodes[0]) == "active"
    # one DataNode each, live
    for c in (hdfs_hot, hdfs_cold):
        assert c.datanode_http_port > 0
        live = json.loads(str(_nn_info(c.webhdfs_url)["LiveNodes"]))
        assert len(live) == 1 and all(k.startswith("127.0.0.1:") and v["version"] == HADOOP_VERSION
                                      for k, v in live.items()), live
        assert c.rss_bytes() > 0 and c.started_in_s is not None
