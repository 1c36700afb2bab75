"""The Airflow side of dr-toolkit: hooks (Connections → library clients), thin operators and
sensors that call `dr_toolkit`, and the AirflowPlugin with the DR status view.

Everything heavy happens in the library; these classes only resolve connections and pass
values in. Hooks are built in ``execute``/``poke``, never in a constructor.
"""
