# Airflow 3.3 with dr-toolkit installed (the library, the `drt` CLI, the providers it uses).
FROM apache/airflow:3.3.2-python3.11
USER root
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless libkrb5-dev gcc \
    && rm -rf /var/lib/apt/lists/*
USER airflow
COPY --chown=airflow requirements.in constraints.txt pyproject.toml README.md /opt/dr-toolkit/src/
COPY --chown=airflow dr_toolkit /opt/dr-toolkit/src/dr_toolkit
COPY --chown=airflow sql /opt/dr-toolkit/src/sql
RUN pip install --no-cache-dir -c /opt/dr-toolkit/src/constraints.txt /opt/dr-toolkit/src[airflow,postgres]
