# The two commands: `make test` and `make demo`. Each sets up what is missing first.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
DEMO_ARGS ?=  # e.g. make demo DEMO_ARGS="--ui" or DEMO_ARGS="--workdir /tmp/demo"

.PHONY: setup system venv librdkafka hadoop-shim servers lint typecheck test demo lock clean bench spark-cluster spark-cluster-stop

setup: system venv librdkafka hadoop-shim servers

# the real servers' Maven artifacts (drt_servers/maven/*/pom.xml), resolved once into ~/.m2 and cached
servers: venv
	@$(PY) -m drt_servers resolve

system:
	@bash scripts/setup-system.sh

venv: $(STAMP)

$(STAMP): requirements.in constraints.txt pyproject.toml
	@command -v uv >/dev/null 2>&1 || python3 -m pip install -q uv
	@[ -x $(PY) ] || uv venv -q $(VENV) -p python3.11
	VIRTUAL_ENV=$(VENV) uv pip install -q --compile-bytecode -r requirements.in -c constraints.txt -e .
	@# byte-code for the library and the demo too (editable install): every `drt` process, in tests
	@# and the demo, would otherwise re-compile what it imports when PYTHONDONTWRITEBYTECODE is set
	@$(PY) -m compileall -q -j 0 dr_toolkit drt_demo drt_servers >/dev/null
	@touch $(STAMP)

# confluent-kafka on a librdkafka with SASL/GSSAPI (Kerberos): built once from npm's librdkafka source and the
# PyPI sdist, cached in ~/.cache/dr-toolkit/librdkafka (a later run: one import, 0.07-0.24 s)
librdkafka: venv
	@PY=$(PY) bash scripts/build-librdkafka.sh

# the JAX-RS runtime pyspark's Hadoop WebHDFS client lacks (see dr_toolkit/spark/hadoop.py)
hadoop-shim: venv
	@PY=$(PY) bash scripts/build-hadoop-jaxrs-shim.sh

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/deptry .
	$(VENV)/bin/lint-imports  # the layers and no import cycles: [tool.importlinter] in pyproject.toml

typecheck: lint

# pytest side by side: 2 workers; each test module's server group (hbase, hdfs, kafka, spark, …: tests/conftest.py)
# runs on one worker, which alone starts those servers; the long groups are handed out first.
# One process, as before: make test PYTEST_JOBS=   (or PYTEST_ARGS="-n 0")
PYTEST_JOBS ?= -n 2 --dist loadgroup --no-loadscope-reorder
test: setup lint
	$(VENV)/bin/pytest $(PYTEST_JOBS) $(PYTEST_ARGS)

demo: setup
	$(VENV)/bin/drt demo $(DEMO_ARGS)

bench: setup
	@for b in benchmarks/*_bench.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# A Spark standalone cluster for development (master + 2 workers, bound to 127.0.0.1).
spark-cluster: venv
	$(PY) -m tests.support.spark_cluster start --dir .spark-cluster

spark-cluster-stop: venv
	$(PY) -m tests.support.spark_cluster stop --dir .spark-cluster

# Re-resolve the dependency set and pin it (run after editing requirements.in).
lock:
	rm -rf .venv-lock && uv venv -q .venv-lock -p python3.11
	VIRTUAL_ENV=.venv-lock uv pip install -q -r requirements.in
	VIRTUAL_ENV=.venv-lock uv pip freeze > constraints.txt && rm -rf .venv-lock

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache demo-data embedded-data
