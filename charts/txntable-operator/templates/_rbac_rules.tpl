{{/*
Rules of the controller, one block per scope of operator/txntable/handlers/permissions.py.
tests/unit/deploy/test_chart.py checks every rendered rule against that list (no more, no less).
*/}}

{{/* Scope TABLES: its own resources, events, and what the enabled launch backends call. */}}
{{- define "txntable.rules.tables" -}}
- apiGroups: ["txntable.io"]
  resources: ["txntables", "compactionpolicies", "checkpointpolicies"]
  verbs: ["list", "watch", "patch"]
- apiGroups: ["txntable.io"]
  resources: ["txntables/status", "compactionpolicies/status", "checkpointpolicies/status"]
  verbs: ["patch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- $backends := .Values.rbac.backends }}
{{- if $backends }}
# children carry blockOwnerDeletion owner references to their TxnTable
- apiGroups: ["txntable.io"]
  resources: ["txntables/finalizers"]
  verbs: ["update"]
# the result line of a run is read from its driver pod's log; a run in flight whose pods
# cannot start (image, scheduling) says so: its pods are listed by the run's label
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
{{- end }}
{{- if has "sparkapplication" $backends }}
- apiGroups: ["sparkoperator.k8s.io"]
  resources: ["sparkapplications"]
  verbs: ["create", "delete", "get", "list"]
{{- end }}
{{- if has "job" $backends }}
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["create", "delete", "get", "list"]
{{- end }}
{{- end }}

{{/* Scope SECRETS: read the Secrets TxnTables reference, optionally only the named ones. */}}
{{- define "txntable.rules.secrets" -}}
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- with .Values.rbac.secrets.names }}
  resourceNames: {{ toJson . }}
{{- end }}
{{- end }}

{{/* Scope PEERING: Kopf's namespaced peering objects (namespaced installs). */}}
{{- define "txntable.rules.peering" -}}
- apiGroups: ["kopf.dev"]
  resources: ["kopfpeerings"]
  verbs: ["list", "watch", "patch"]
{{- end }}

{{/* Scope CLUSTER_WIDE (cluster-wide installs only; a namespaced one needs nothing
cluster-scoped). */}}
{{- define "txntable.rules.cluster" -}}
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["list", "watch"]
{{- if not .Values.config.shards }}
- apiGroups: ["kopf.dev"]
  resources: ["clusterkopfpeerings"]
  verbs: ["list", "watch", "patch"]
{{- end }}
{{- end }}

{{/* Scope LEASES: the shards' Leases in the release namespace (config.shards > 0). */}}
{{- define "txntable.rules.leases" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["list", "create", "update", "delete"]
{{- end }}

{{/* What Spark drivers do with their ServiceAccount (launch/permissions.py SPARK_DRIVER). */}}
{{- define "txntable.rules.sparkDriver" -}}
- apiGroups: [""]
  resources: ["pods", "services", "configmaps", "persistentvolumeclaims"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
{{- end }}
