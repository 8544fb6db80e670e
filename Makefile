# Two entry points: `make demo` and `make test`. Each builds its own virtualenv (.venv)
# and installs what it needs, system packages included (kcat, ZooKeeper, a JRE for Spark).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SYSSTAMP := $(VENV)/.system-packages

export SPARK_LOCAL_IP := 127.0.0.1
export PYSPARK_PYTHON := $(abspath $(BIN)/python)
export PYSPARK_DRIVER_PYTHON := $(abspath $(BIN)/python)

.PHONY: all venv system-packages demo demo-cluster test lint typecheck unit bench fuzz soak chaos clean

all: test

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python $(SYSSTAMP)
	$(BIN)/python -m pip install -q -e '.[dev,spark]'
	touch $@

# Debian packages the real-component tests use. Installed once per machine when missing: a ZooKeeper,
# kcat (librdkafka with SASL/GSSAPI), an MIT Kerberos KDC (libkrb5-dev builds the gssapi binding),
# Chromium and its driver for the console's browser tests. Node.js and npm come with the machine
# (Debian's npm conflicts with the nodejs package installed there).
DEBIAN_PACKAGES := kcat zookeeper default-jre-headless prometheus krb5-kdc krb5-admin-server krb5-user \
	libkrb5-dev libsasl2-modules-gssapi-mit chromium chromium-driver
$(SYSSTAMP): | $(BIN)/python
	@if ! command -v kcat >/dev/null || [ ! -x /usr/share/zookeeper/bin/zkServer.sh ] || ! command -v java >/dev/null \
		|| ! command -v prometheus >/dev/null || ! command -v krb5kdc >/dev/null || ! command -v chromedriver >/dev/null \
		|| ! command -v krb5-config >/dev/null ; then \
		echo "installing Debian packages: $(DEBIAN_PACKAGES)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(DEBIAN_PACKAGES) >/dev/null; \
	fi
	touch $@

# KafkaJS (pinned) for the OAUTHBEARER re-authentication tests, in .venv/node/node_modules; those
# tests skip with the reason when it is missing.
KAFKAJS_VERSION := 2.2.4
NODESTAMP := $(VENV)/.node-packages-$(KAFKAJS_VERSION)
$(NODESTAMP): | $(BIN)/python $(SYSSTAMP)
	@if command -v npm >/dev/null; then \
		npm install --silent --no-audit --no-fund --prefix $(VENV)/node kafkajs@$(KAFKAJS_VERSION) && touch $@; \
	else echo "npm not found: the KafkaJS tests will be skipped"; fi

venv: $(STAMP) $(SYSSTAMP) $(NODESTAMP)

demo: venv
	$(BIN)/odradek demo

# The demo on ZooKeeper, 3 brokers (RF=3, min.insync.replicas=2) and a Spark standalone master and
# worker from the pyspark package, killing partition leaders, the driver and an executor on the way.
demo-cluster: venv
	$(BIN)/odradek demo-cluster

lint: venv
	$(BIN)/ruff check src tests bench chaos
	$(BIN)/ruff format --check src tests bench chaos

typecheck: venv
	$(BIN)/mypy

# The suite runs on TEST_WORKERS pytest-xdist workers, one test module per group, longest first
# (tests/conftest.py; docs/development.md says how it is organised). TEST_WORKERS=0 runs it serially.
TEST_WORKERS ?= 4
test: venv lint typecheck
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --durations=25 tests

unit: venv
	$(BIN)/python -m pytest -q -n 2 tests/unit

bench: venv
	$(BIN)/python bench/run_all.py

# 1,000,000 mutated client frames against a broker process (the suite runs 100,000), then every
# semantic mutation of the recorded requests (the suite sends a seeded 1,000); FUZZ_SEED to repeat a run.
FUZZ_FRAMES ?= 1000000
FUZZ_SEED ?= $(shell date +%s)
fuzz: venv
	ODRADEK_FUZZ_FRAMES=$(FUZZ_FRAMES) ODRADEK_FUZZ_SEED=$(FUZZ_SEED) \
		$(BIN)/python -m pytest -q -s -p no:cacheprovider tests/integration/test_fuzz_client_traffic.py tests/integration/test_fuzz_sasl.py \
		tests/integration/test_sasl_gssapi.py -k mutated
	ODRADEK_SEMANTIC_REQUESTS=0 ODRADEK_SEMANTIC_ARRAY=3000 ODRADEK_FUZZ_SEED=$(FUZZ_SEED) \
		$(BIN)/python -m pytest -q -s -p no:cacheprovider tests/integration/test_fuzz_semantic.py

# The suite's leader-kill loop at soak length: 50 kill -9 of partition leaders under an idempotent producer.
soak: venv
	ODRADEK_FAILOVER_KILLS=50 $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/integration/test_failover_loop.py

# A fault campaign (chaos/): 5 brokers and ZooKeeper behind the fault-injecting proxy, CHAOS_MINUTES of
# faults; CHAOS_SEED repeats a schedule. Writes report.txt, report.json and timeline.png to CHAOS_REPORT
# and fails on any anomaly the checker finds.
CHAOS_MINUTES ?= 10
CHAOS_SEED ?= $(shell date +%s)
CHAOS_REPORT ?= chaos-report
chaos: venv
	@command -v faketime >/dev/null || { echo "installing Debian's faketime (libfaketime) for the clock-skew fault"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get install -y -qq faketime >/dev/null || echo "faketime not installed: the campaign runs without clock faults"; }
	$(BIN)/python -m chaos --minutes $(CHAOS_MINUTES) --seed $(CHAOS_SEED) --brokers 5 --report-dir $(CHAOS_REPORT)

clean:
	rm -rf $(VENV) build dist src/*.egg-info demo-output chaos-report
