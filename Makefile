# txntable: the two quickstart commands are `make demo` and `make test`.
# Every target sets up what it needs (virtual environment, Python packages, Debian packages).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml 2>/dev/null | sha1sum | cut -c1-12)
PYTEST_ARGS ?=
SRC    := $(wildcard operator tests bench)

.PHONY: setup testdeps deltaspark demo test lint typecheck layers unit bench bench-ab soak \
	bench-shards \
	soak-deltaspark clean sysdeps controlplane cluster nodesysdeps node images node-up e2e

$(STAMP): pyproject.toml | sysdeps
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# Azurite, Microsoft's Azure Storage emulator, for the Azure commit tests (npm package)
AZURITE := $(VENV)/azurite/node_modules/.bin/azurite-blob
# (only the tests need it: make demo does not install npm or Azurite)
$(AZURITE): | sysdeps
	@SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	command -v npm >/dev/null 2>&1 || { $$SUDO apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends npm; }
	npm install --silent --no-audit --no-fund --prefix $(VENV)/azurite azurite@3.35.0

setup: $(STAMP)
testdeps: setup $(AZURITE) deltaspark

# delta-spark, Delta Lake's reference implementation (test oracle, co-writer, benchmark peer):
# PySpark 4.2 + the matching delta-spark jars in their own venv, fetched once with pip and Maven
# into ~/.cache/txntable/delta-spark-<delta>-spark-<spark>/ (tests/deltaspark/env.py).
# `python -m tests.deltaspark.env --print` prints its paths for anything else that wants them.
deltaspark: setup
	$(PY) -m tests.deltaspark.env

# Debian packages the tests and Spark need (root on these machines; sudo elsewhere):
# Java for Spark, Maven for the delta-spark jars, Prometheus and promtool for the alert-rule and
# scrape tests.
sysdeps:
	@SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	pkgs=""; \
	command -v java >/dev/null 2>&1 || pkgs="$$pkgs openjdk-17-jre-headless"; \
	command -v mvn >/dev/null 2>&1 || pkgs="$$pkgs maven"; \
	$(PYTHON) -c 'import ensurepip, venv' >/dev/null 2>&1 || pkgs="$$pkgs python3-venv"; \
	{ command -v promtool && command -v prometheus; } >/dev/null 2>&1 || pkgs="$$pkgs prometheus"; \
	if [ -n "$$pkgs" ]; then \
		$$SUDO apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $$pkgs; \
	fi

lint: setup
	$(VENV)/bin/ruff check $(SRC)
	$(VENV)/bin/ruff format --check $(SRC)

typecheck: setup
	$(VENV)/bin/mypy

layers: setup
	$(VENV)/bin/lint-imports

# The suite runs in TEST_WORKERS pytest-xdist processes; the tests that share a JVM or an API
# server (tests/xdist_scheduling.py) stay together in one of them. TEST_WORKERS=0
# runs it in this process alone.
TEST_WORKERS ?= 2
test: testdeps controlplane lint typecheck layers
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

# The real Kubernetes control plane of tests/controlplane: upstream kube-apiserver and etcd,
# built with Go from the pinned tools module (tools/controlplane/go.mod) once per machine into
# ~/.cache/txntable/controlplane-<k8s>-etcd-<etcd>-<go.mod/go.sum hash>/bin (about 15 minutes
# cold on 2 cores, nothing when cached); the same for the oldest release the chart claims
# (tools/controlplane-oldest, v1.29.15), where the admission cases run too.
# docs/testing-control-plane.md.
controlplane: setup
	$(PY) -m tests.controlplane.binaries

# Start that control plane by hand for debugging; prints a kubeconfig. CLUSTER_ARGS=--chart
# also installs the chart as the tests do. Ctrl-C stops it.
CLUSTER_ARGS ?=
cluster: controlplane
	$(PY) -m tests.controlplane.cluster $(CLUSTER_ARGS)

# The real node of the e2e tier (docs/testing-real-node.md): kubelet, kube-controller-manager,
# kube-scheduler, kube-proxy and kubectl from the API server's Kubernetes release, containerd 2.x
# with Debian's runc, CNI plugins, CoreDNS, BuildKit, Helm and the Spark Operator, each built with
# Go from its pinned tools module (tools/<name>/go.mod) once per machine into
# ~/.cache/txntable/<name>-<version>-<hash>/bin; the pause program from the Kubernetes module's C
# source. Needs root (containers, mounts, networking).
nodesysdeps: sysdeps
	@SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	pkgs=""; \
	command -v runc >/dev/null 2>&1 || pkgs="$$pkgs runc"; \
	command -v mmdebstrap >/dev/null 2>&1 || pkgs="$$pkgs mmdebstrap"; \
	command -v nft >/dev/null 2>&1 || pkgs="$$pkgs nftables"; \
	command -v conntrack >/dev/null 2>&1 || pkgs="$$pkgs conntrack"; \
	command -v gcc >/dev/null 2>&1 || pkgs="$$pkgs gcc"; \
	test -f /usr/lib/x86_64-linux-gnu/libc.a || pkgs="$$pkgs libc6-dev"; \
	if [ -n "$$pkgs" ]; then \
		$$SUDO apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $$pkgs; \
	fi

node: setup controlplane nodesysdeps
	$(PY) -m tests.node.binaries

# The images of the e2e tier, built by BuildKit from the Dockerfile as it is (controller and
# spark, on a Python base made from Debian's packages), plus pause, CoreDNS, moto's S3 server and
# the Spark Operator, as OCI archives in ~/.cache/txntable/images.
images: node
	$(PY) -m tests.node.images

# Start the single-node cluster by hand (prints a kubeconfig; Ctrl-C stops everything).
node-up: images
	$(PY) -m tests.node.cluster

# The e2e tier on the real node: the chart by helm, runs as real pods (docs/testing-real-node.md).
e2e: testdeps images
	$(PY) -m pytest tests/e2e --e2e $(PYTEST_ARGS)

unit: testdeps
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

demo: setup
	$(VENV)/bin/txntable demo

bench: setup deltaspark
	$(PY) -m bench.run

# One controller replica with thousands of TxnTables on the control plane's kube-apiserver +
# etcd, its requests counted from the audit log (bench/scale_apiserver.py, issue 30; figures in
# docs/benchmarks.md). SCALE_ARGS e.g. "--cases 300,1000 --interval 30".
SCALE_ARGS ?= --cases 1000,5000,10000
bench-scale: setup controlplane
	$(PY) -m bench.scale_apiserver $(SCALE_ARGS)

# Three sharded replicas, one SIGKILLed: takeover, observation and who wrote what, from the
# audit log (bench/shards_apiserver.py, issue 30.3). SHARDS_ARGS e.g. "--tables 3000".
bench-shards: setup controlplane
	$(PY) -m bench.shards_apiserver $(SHARDS_ARGS)

# The same benchmarks on two checkouts, interleaved (bench/ab.py, docs/benchmarks.md "Comparing
# two commits"): make bench-ab A=../other-checkout [B=.] [AB_ARGS="--rounds 6 bench.scale:full"].
# Each checkout needs its own .venv (make setup there).
B ?= .
AB_ARGS ?=
bench-ab: setup
	@test -n "$(A)" || { echo "usage: make bench-ab A=<checkout> [B=<checkout>] [AB_ARGS=...]"; exit 2; }
	$(PY) -m bench.ab $(A) $(B) $(AB_ARGS)

# Seeded torture runs (writers of both engines, SIGKILLed maintenance, aged logs, clock skew);
# SOAK_ARGS e.g. "--seeds 1,2,3,4,5 --steps 120"; then the delta-spark races below.
# Figures: docs/reliability.md.
SOAK_ARGS ?= --seeds 1,2,3 --steps 80
soak: setup deltaspark
	$(PY) -m tests.soak $(SOAK_ARGS)
	$(PY) -m tests.deltaspark.race $(DS_SOAK_ARGS)
	$(PY) -m tests.deltaspark.race $(DS_CLEANUP_SOAK_ARGS)

# Races of delta-spark's writers (INSERT, DELETE, UPDATE, MERGE, a streaming query) against our
# OPTIMIZE/checkpoint/VACUUM and, as the reference, against delta-spark's own; one round per seed
# and maintainer, each held to Delta's conflict rules. make test runs one round of ours only
# (tests/integration/test_deltaspark_races.py); the reference rounds run here. Figures:
# docs/reliability.md.
# The second set is issue 33's harder race, ours alone: delta-spark checkpointing (and cleaning
# up) every 3 commits, our log cleanup in each pass, writers sharing partitions and giving up
# what they lose.
DS_SOAK_ARGS ?= --seeds 1,2,3,4,5,6,7,8 --ops 4
DS_CLEANUP_SOAK_ARGS ?= --seeds 1,2,3,4,5,6,7,8,9,10 --ops 4 --checkpoint-interval 3 \
	--cleanup --shared-partitions --no-retry --maintainers ours
soak-deltaspark: setup deltaspark
	$(PY) -m tests.deltaspark.race $(DS_SOAK_ARGS)
	$(PY) -m tests.deltaspark.race $(DS_CLEANUP_SOAK_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
