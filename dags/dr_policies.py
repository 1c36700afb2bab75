"""One DAG per policy of the topology, each on the policy's own `schedule` (Airflow schedules them;
replicate/verify tasks update Assets `x-drt://<kind>/<policy>`; linked verifications are
Asset-triggered). Built in plugins/drt_airflow/policy_dags.py; an unreadable topology is this
file's one import error."""

from __future__ import annotations

import airflow  # noqa: F401 - its settings put plugins/ on sys.path
from drt_airflow.policy_dags import policy_dags

globals().update(policy_dags())
