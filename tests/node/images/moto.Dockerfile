# The e2e tier's S3: moto's server (the same version the tests use), with conditional writes
# (If-None-Match), in a pod the runs reach by its Service. Not MinIO: its server is AGPL.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG MOTO_VERSION
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/moto \
 && /opt/moto/bin/pip install "moto[server]==${MOTO_VERSION}" \
 && /opt/moto/bin/pip uninstall -y pip setuptools
USER 65532:65532
WORKDIR /tmp
EXPOSE 5000
ENTRYPOINT ["/opt/moto/bin/moto_server", "--host", "0.0.0.0", "--port", "5000"]
