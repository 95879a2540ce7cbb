# syntax=docker/dockerfile:1
#
# Two images from one file (docs/install.md, "Build the images"):
#   docker build --target controller -t ghcr.io/txntable/txntable:0.1.0 .
#   docker build --target spark      -t ghcr.io/txntable/txntable-spark:0.1.0 .
#
# controller: `python -m txntable` (Kopf); no Java, no Spark, uid 10001.
# spark:      driver and executors of maintenance runs: Java 17, PySpark, this package; the
#             job programs at /opt/txntable/jobs/<kind>.py, spark-submit at
#             /opt/spark/bin/spark-submit, uid 185 (launch/manifests.py and ADR 0003).
# Both start from the same pinned Python base (tag and digest; override with
# --build-arg PYTHON_IMAGE=...). Wheels are built in `build-*` stages; the final stages get a
# finished virtual environment and keep no pip, setuptools or compilers.
#
# Another base works when it is what this file relies on, as the official image is: Debian
# bookworm (apt-get, the JRE package, groupadd/useradd), a `python` that is CPython 3.11 with
# venv, pip and setuptools importable and uninstallable by pip (not marked externally managed,
# PEP 668), and CA certificates. `make images` (tests/node/images.py, no registry reachable)
# builds with such a base made from Debian's own packages by mmdebstrap: Debian's Python 3.11,
# pip and setuptools from Debian's wheels under /usr/local, no documentation or locales, the
# machine's CA certificates (so the RUN steps reach PyPI through its TLS proxy). The images
# then differ from release builds only in the patch release of Python 3.11 and in that CA file.
# Extras (pyproject.toml): both images install `s3` (boto3) and `azure` (azure-storage-blob,
# azure-identity): object-store tables are unreachable without them; only the Spark image
# installs `spark` (pyspark); neither installs `demo`.

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d
# The Spark version the runs use; tests/unit/deploy/test_dockerfile.py keeps it equal to the pyspark
# the test suite runs against.
ARG PYSPARK_VERSION=4.3.0

# ---- wheel of this package ----------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS wheel
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN python -m pip wheel --no-deps --wheel-dir /wheels .

# ---- controller's virtual environment: the package with S3 and Azure, without Spark ---------
FROM ${PYTHON_IMAGE} AS build-controller
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
COPY --from=wheel /wheels /wheels
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install "$(ls /wheels/txntable-*.whl)[s3,azure]" \
 && /opt/venv/bin/pip uninstall -y pip setuptools

# ---- Spark's virtual environment: the package with S3, Azure and PySpark (jars, scripts) ----
FROM ${PYTHON_IMAGE} AS build-spark
ARG PYSPARK_VERSION
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
COPY --from=wheel /wheels /wheels
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install "$(ls /wheels/txntable-*.whl)[s3,azure,spark]" \
      "pyspark==${PYSPARK_VERSION}" \
 && /opt/venv/bin/pip uninstall -y pip setuptools

# ---- the controller image -------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS controller
LABEL org.opencontainers.image.title="txntable controller" \
      org.opencontainers.image.source="https://github.com/txntable/txntable" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 txntable \
 && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
      --shell /usr/sbin/nologin txntable \
 && python -m pip uninstall -y pip setuptools wheel
COPY --from=build-controller /opt/venv /opt/venv
# ARROW_DEFAULT_MEMORY_POOL=system: peak memory of checkpoints and log replay about 20% lower
# at the same speed than pyarrow's default allocator (docs/benchmarks.md, checkpoint section).
ENV PATH=/opt/venv/bin:$PATH \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    ARROW_DEFAULT_MEMORY_POOL=system
WORKDIR /tmp
USER 10001:10001
# /metrics and /healthz (TXNTABLE_METRICS_PORT, TXNTABLE_HEALTH_PORT)
EXPOSE 8080 8081
ENTRYPOINT ["python", "-m", "txntable"]

# ---- the Spark run image --------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS spark
LABEL org.opencontainers.image.title="txntable Spark runs" \
      org.opencontainers.image.source="https://github.com/txntable/txntable" \
      org.opencontainers.image.licenses="Apache-2.0"
# Java from Debian (the JRE only); tini reaps the Python workers' children; procps for Spark's
# scripts. /usr/share/man/man1 is missing on slim images and the JRE's postinst needs it.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless tini procps \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /opt/java \
 && groupadd --system --gid 185 spark \
 && useradd --system --uid 185 --gid 185 --home-dir /tmp --no-create-home \
      --shell /usr/sbin/nologin spark \
 && python -m pip uninstall -y pip setuptools wheel
COPY --from=build-spark /opt/venv /opt/venv
# SPARK_HOME is PySpark's own distribution: bin/spark-submit, jars/ (with spark-kubernetes);
# conf/ is where Spark on Kubernetes mounts the run's configuration. No Hadoop object-store
# connector (hadoop-aws, hadoop-azure) on purpose: Spark tasks open S3 and Azure tables with the
# engine's storage and the run's storage options (docs/adr/0008-log-replay-in-tasks.md; held by
# tests/unit/deploy/test_dockerfile.py)
RUN ln -s /opt/venv/lib/python3.11/site-packages/pyspark /opt/spark \
 && mkdir -p /opt/spark/conf /opt/txntable/jobs
COPY docker/spark-entrypoint.sh /opt/entrypoint.sh
# /opt/txntable/jobs/<kind>.py, the mainApplicationFile of runs, for every RunKind
COPY docker/job.py /opt/txntable/jobs/optimize.py
COPY docker/job.py /opt/txntable/jobs/checkpoint.py
COPY docker/job.py /opt/txntable/jobs/vacuum.py
ENV PATH=/opt/venv/bin:/opt/spark/bin:$PATH \
    JAVA_HOME=/opt/java \
    SPARK_HOME=/opt/spark \
    PYSPARK_PYTHON=/opt/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/venv/bin/python \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    ARROW_DEFAULT_MEMORY_POOL=system
# runs mount an emptyDir on /tmp (the root filesystem is read-only)
WORKDIR /tmp
USER 185:185
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/entrypoint.sh"]
