"""Option keys either side of the CRDs' sparkConf and Secret rules, for CEL and admission tests."""

from __future__ import annotations

from txntable.api.common import RESERVED_SPARK_CONF

#: sparkConf keys either side of the reserved-key rule (also sent to the real API server by
#: tests/controlplane/test_admission.py)
SPARK_CONF_KEYS = [
    *RESERVED_SPARK_CONF, "spark.kubernetes.authenticate.driver.serviceAccountName",
    "spark.sql.shuffle.partitions", "spark.executor.memoryOverhead", "spark.driver.maxResultSize",
    "spark.masterx", "spark.kubernetes.authenticate", "spark.executor.extraJavaOptions",
]  # fmt: skip


SECRET_KEYS = [
    "AWS_SECRET_ACCESS_KEY", "aws_access_key_id", "AWS_SESSION_TOKEN", "fs.s3a.secret.key",
    "fs.s3a.access.key", "spark.hadoop.fs.s3a.session.token", "azure_storage_account_key",
    "fs.azure.account.key.acct.dfs.core.windows.net", "google_service_account_key",
    "AZURE_STORAGE_SAS_TOKEN", "password", "client_secret", "key", "secret", "token",
    "spark.hadoop.fs.gs.auth.service.account.private.key", "fs.azure.account.key",
    "fs.azure.sas.fixed.token",
]  # fmt: skip
HARMLESS_KEYS = [
    "AWS_REGION", "AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP", "spark.sql.shuffle.partitions",
    "fs.s3a.endpoint", "fs.s3a.bucket.lake.endpoint", "keys", "AWS_CONDITIONAL_PUT",
    "fs.azure.account.keyprovider.acct.dfs.core.windows.net", "fs.azure.sas.token.provider.type",
    "fs.azure.account.auth.type",
]  # fmt: skip
