"""The one file Airflow's plugin loader reads (see plugins/.airflowignore).

Airflow imports every .py under the plugins folder as a top-level module named after the
file, so ``drt_airflow/hdfs.py`` would become ``sys.modules["hdfs"]`` and shadow the `hdfs`
package. The ``drt_airflow`` package is therefore ignored by the loader and imported
normally (the plugins folder is on ``sys.path``); this file only exposes the AirflowPlugin —
unless dr-toolkit is installed as a provider, whose ``airflow.plugins`` entry point registers
the same plugin (exposing it here too would register it twice: "already registered").
"""

from importlib.metadata import entry_points

if not any(ep.value == "drt_airflow.plugin:DrToolkitPlugin" for ep in entry_points(group="airflow.plugins")):
    from drt_airflow.plugin import DrToolkitPlugin

    __all__ = ["DrToolkitPlugin"]
