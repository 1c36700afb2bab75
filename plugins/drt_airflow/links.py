"""Operator extra links: a verify task → its HTML report (served by the DR page's app), a
failover task → the DR page. Both are relative to the api-server (``[api] base_url``)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink

URL_PREFIX = "/dr-toolkit"


def _base_url() -> str:
    from airflow.configuration import conf

    return str(conf.get("api", "base_url", fallback="") or "").rstrip("/")


class DrPageLink(BaseOperatorLink):
    """The DR status page (verdict, recovery point, signals, runs)."""

    name = "DR status"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        return f"{_base_url()}{URL_PREFIX}/"


class VerifyReportLink(BaseOperatorLink):
    """The HTML report of this verify task (its ``report_id`` in the task's return value)."""

    name = "Verification report"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        from airflow.sdk.execution_time.xcom import XCom

        value = XCom.get_value(ti_key=ti_key, key="return_value")
        report_id = value.get("report_id") if isinstance(value, dict) else None
        return f"{_base_url()}{URL_PREFIX}/reports/{report_id}" if report_id else ""
