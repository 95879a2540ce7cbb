#!/bin/bash
# Entrypoint of the txntable Spark image (/opt/entrypoint.sh, under tini).
#
# Spark on Kubernetes starts its pods with a role as the first argument and the details in the
# environment: `driver ARGS` (the Spark Operator's cluster mode: run spark-submit in client
# mode inside the driver pod) and `executor` (SPARK_EXECUTOR_*, SPARK_DRIVER_URL, ... and JVM
# options in SPARK_JAVA_OPT_<n>, applied in order of n). Anything else is executed as given;
# the spark-submit Job of the Job backend sets its own command and never comes here.
set -euo pipefail

: "${SPARK_HOME:=/opt/spark}"
: "${JAVA_HOME:=/opt/java}"

classpath="${SPARK_HOME}/jars/*"
if [[ -n "${SPARK_EXTRA_CLASSPATH:-}" ]]; then classpath="${classpath}:${SPARK_EXTRA_CLASSPATH}"; fi
if [[ -n "${HADOOP_CONF_DIR:-}" ]]; then classpath="${HADOOP_CONF_DIR}:${classpath}"; fi

role="${1:-}"
case "${role}" in
  driver)
    shift
    exec "${SPARK_HOME}/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS}" \
      --deploy-mode client \
      "$@"
    ;;
  executor)
    shift
    java_opts=()
    # SPARK_JAVA_OPT_0=..., SPARK_JAVA_OPT_1=...: numeric order, values kept whole
    while IFS= read -r -d '' name; do
      java_opts+=("${!name}")
    done < <(compgen -e | grep '^SPARK_JAVA_OPT_[0-9]*$' | sort -t_ -k4 -n | tr '\n' '\0')
    exec "${JAVA_HOME}/bin/java" \
      "${java_opts[@]}" \
      "-Xms${SPARK_EXECUTOR_MEMORY}" "-Xmx${SPARK_EXECUTOR_MEMORY}" \
      -cp "${classpath}" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL}" \
      --executor-id "${SPARK_EXECUTOR_ID}" \
      --cores "${SPARK_EXECUTOR_CORES}" \
      --app-id "${SPARK_APPLICATION_ID}" \
      --hostname "${SPARK_EXECUTOR_POD_IP}" \
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID}" \
      --podName "${SPARK_EXECUTOR_POD_NAME}"
    ;;
  "")
    exec "${SPARK_HOME}/bin/spark-submit" --version
    ;;
  *)
    exec "$@"
    ;;
esac
