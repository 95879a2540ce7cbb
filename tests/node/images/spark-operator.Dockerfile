# The Kubeflow Spark Operator on our Spark image, as upstream's Dockerfile puts it on
# docker.io/library/spark: the operator runs spark-submit in its pod, so it needs the same Spark
# as the runs. The binary is built from its Go module (tools/spark-operator).
ARG SPARK_IMAGE
FROM ${SPARK_IMAGE}
COPY spark-operator /usr/bin/spark-operator
USER 185:185
ENTRYPOINT ["/usr/bin/tini", "-s", "--", "/usr/bin/spark-operator"]
