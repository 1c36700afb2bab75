"""The one file Airflow's plugin loader reads (see plugins/.airflowignore).

Airflow imports every .py under the plugins folder as a top-level module named after the
file, so ``drt_airflow/hdfs.py`` would become ``sys.modules["hdfs"]`` and shadow the `hdfs`
package. The ``drt_airflow`` package is therefore ignored by the loader and imported
normally (the plugins folder is on ``sys.path``); this file only exposes the AirflowPlugin.
"""

from drt_airflow.plugin import DrToolkitPlugin

__all__ = ["DrToolkitPlugin"]
