"""dr-toolkit as an Airflow provider: ``get_provider_info`` (the ``apache_airflow_provider``
entry point of the dr-toolkit distribution). It declares the ``drt`` connection type with its
form fields, the operators, sensors and hook, the extra links and the DR page plugin — all in
``drt_airflow`` (plugins/drt_airflow in a checkout, a package of the wheel).

It lives in the library, which never imports Airflow: it only returns names, so Airflow can
always read it wherever the distribution's metadata is visible (a provider whose info cannot
be imported breaks every Airflow command), and the classes are imported by Airflow when used.

The plugin itself is registered through the ``airflow.plugins`` entry point (Airflow loads
providers' plugins only with ``[core] lazy_discover_providers = False``)."""

from __future__ import annotations

from typing import Any

MODULES = ["drt_airflow.hdfs", "drt_airflow.kafka", "drt_airflow.hbase", "drt_airflow.verify",
           "drt_airflow.failover"]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dr-toolkit")
    except PackageNotFoundError:
        return "0.0.0"


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "dr-toolkit",
        "name": "dr-toolkit",
        "description": "Disaster recovery for Hadoop-style platforms: HDFS replication, Kafka offsets, HBase "
                       "replication, verification and a gated failover runbook.",
        "versions": [_version()],
        "integrations": [{"integration-name": "dr-toolkit", "tags": ["software"]}],
        "operators": [{"integration-name": "dr-toolkit", "python-modules": MODULES}],
        "sensors": [{"integration-name": "dr-toolkit",
                     "python-modules": ["drt_airflow.kafka", "drt_airflow.hbase", "drt_airflow.failover"]}],
        "hooks": [{"integration-name": "dr-toolkit", "python-modules": ["drt_airflow.hooks"]}],
        "connection-types": [{
            "hook-class-name": "drt_airflow.hooks.DrtHook",
            "hook-name": "dr-toolkit",
            "connection-type": "drt",
            "conn-fields": {
                "config": {"label": "Topology file",
                           "description": "Path of the topology YAML on the workers and the api-server "
                                          "(default: the Variable drt_config, then $DRT_CONFIG)",
                           "schema": {"type": ["string", "null"]}},
            },
            "ui-field-behaviour": {
                "hidden-fields": ["host", "schema", "login", "password", "port"],
                "relabeling": {},
                "placeholders": {"config": "/etc/drt/drt.yaml"},
            },
        }],
        "extra-links": ["drt_airflow.links.DrPageLink", "drt_airflow.links.VerifyReportLink"],
        "plugins": [{"name": "dr_toolkit", "plugin-class": "drt_airflow.plugin.DrToolkitPlugin"}],
    }
