"""The SQL ledger (mirrors sql/schema.sql): runs, manifests, checkpoints, reports, audit, leases."""

from dr_toolkit.ledger.rows import ManifestRow, VerifyReportRow
from dr_toolkit.ledger.store import SCHEMA_VERSION, Ledger, actor, new_id, open_ledger

__all__ = ["SCHEMA_VERSION", "Ledger", "ManifestRow", "VerifyReportRow", "actor", "new_id", "open_ledger"]
