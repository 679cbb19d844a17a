{{/* Names, labels and the few values several templates need. */}}

{{- define "browserplane.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* <release>-browserplane, or the release name alone when it already says browserplane. */}}
{{- define "browserplane.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "browserplane.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "browserplane.selectorLabels" -}}
app.kubernetes.io/name: {{ include "browserplane.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Call with (dict "root" $ "component" "api"). */}}
{{- define "browserplane.labels" -}}
{{ include "browserplane.selectorLabels" . }}
helm.sh/chart: {{ include "browserplane.chart" .root }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: browserplane
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The labels the operator puts on every browser pod: COMPONENT_LABELS in
operator/src/k8s/browser-pod.ts (test/k8s/chart.test.ts holds the two together). Not the
release's labels: the operator, not Helm, creates these pods.
*/}}
{{- define "browserplane.browserPodSelectorLabels" -}}
app.kubernetes.io/name: browserplane-browser
app.kubernetes.io/component: browser
{{- end -}}

{{/* The agent's port in a browser pod (AGENT_PORT in operator/src/k8s/browser-pod.ts): CDP, controls, /health. */}}
{{- define "browserplane.browserAgentPort" -}}
9222
{{- end -}}

{{- define "browserplane.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "browserplane.browserImage" -}}
{{- printf "%s:%s" .Values.browsers.image.repository (default .Chart.AppVersion .Values.browsers.image.tag) -}}
{{- end -}}

{{- define "browserplane.runnerImage" -}}
{{- printf "%s:%s" .Values.apps.runner.image.repository (default .Chart.AppVersion .Values.apps.runner.image.tag) -}}
{{- end -}}

{{/*
The labels the API puts on every app build and run Job and its pod: APP_JOB_LABELS in
api/src/modules/apps/app-jobs.ts (test/k8s/chart.test.ts holds the two together).
*/}}
{{- define "browserplane.appPodSelectorLabels" -}}
app.kubernetes.io/name: browserplane-app
{{- end -}}

{{- define "browserplane.apiServiceAccountName" -}}
{{- if .Values.api.serviceAccount.create -}}
{{- default (printf "%s-api" (include "browserplane.fullname" .)) .Values.api.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.api.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "browserplane.operatorServiceAccountName" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{- default (printf "%s-operator" (include "browserplane.fullname" .)) .Values.operator.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.operator.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Lease the operator replicas elect a leader on ("browserplane-operator" for a release named browserplane). */}}
{{- define "browserplane.operatorLease" -}}
{{- printf "%s-operator" (include "browserplane.fullname" .) -}}
{{- end -}}

{{/* The Secret with encryption-key and api-key. */}}
{{- define "browserplane.secretName" -}}
{{- default (include "browserplane.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{- define "browserplane.postgresqlName" -}}
{{- printf "%s-postgresql" (include "browserplane.fullname" .) -}}
{{- end -}}

{{/* Where DATABASE_URL comes from: (secret name, key). Fails on zero or several sources. */}}
{{- define "browserplane.databaseSecretName" -}}
{{- $sources := 0 -}}
{{- if .Values.database.url }}{{ $sources = add1 $sources }}{{ end -}}
{{- if .Values.database.existingSecret }}{{ $sources = add1 $sources }}{{ end -}}
{{- if .Values.postgresql.enabled }}{{ $sources = add1 $sources }}{{ end -}}
{{- if ne (int $sources) 1 -}}
{{- fail "set exactly one of database.url, database.existingSecret or postgresql.enabled=true" -}}
{{- end -}}
{{- if .Values.database.existingSecret -}}
{{- .Values.database.existingSecret -}}
{{- else if .Values.postgresql.enabled -}}
{{- include "browserplane.postgresqlName" . -}}
{{- else -}}
{{- include "browserplane.fullname" . -}}
{{- end -}}
{{- end -}}

{{- define "browserplane.databaseSecretKey" -}}
{{- if .Values.database.existingSecret -}}
{{- .Values.database.existingSecretKey -}}
{{- else -}}
database-url
{{- end -}}
{{- end -}}

{{/*
A Secret value kept across upgrades: the value given, else the one already in the
cluster (lookup answers nothing under helm template/lint), else a fresh one.
Call with (dict "root" $ "secret" NAME "key" KEY "given" VALUE "generate" FRESH).
*/}}
{{- define "browserplane.keptSecretValue" -}}
{{- if .given -}}
{{- .given -}}
{{- else -}}
{{- $existing := lookup "v1" "Secret" .root.Release.Namespace .secret -}}
{{- if and $existing (hasKey ($existing.data | default dict) .key) -}}
{{- index $existing.data .key | b64dec -}}
{{- else -}}
{{- .generate -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Environment both the API and the operator read. */}}
{{- define "browserplane.commonEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "browserplane.databaseSecretName" . }}
      key: {{ include "browserplane.databaseSecretKey" . }}
- name: DATABASE_POOL_MAX
  value: {{ .Values.database.poolMax | quote }}
- name: BROWSERPLANE_ENCRYPTION_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "browserplane.secretName" . }}
      key: encryption-key
- name: BROWSERPLANE_RUNTIME
  value: kubernetes
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end -}}

{{/* api.publicUrl, else the Ingress's first host (https with TLS), else nothing. */}}
{{- define "browserplane.publicUrl" -}}
{{- if .Values.api.publicUrl -}}
{{- .Values.api.publicUrl -}}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts -}}
{{- printf "%s://%s" (ternary "https" "http" (gt (len .Values.ingress.tls) 0)) (first .Values.ingress.hosts) -}}
{{- end -}}
{{- end -}}

{{/* The database's CA (database.caSecret), where DATABASE_URL's sslrootcert names it. */}}
{{- define "browserplane.databaseCaMount" -}}
{{- if .Values.database.caSecret }}
- name: database-ca
  mountPath: /etc/browserplane/database-ca
  readOnly: true
{{- end }}
{{- end -}}

{{- define "browserplane.databaseCaVolume" -}}
{{- if .Values.database.caSecret }}
- name: database-ca
  secret:
    secretName: {{ .Values.database.caSecret }}
{{- end }}
{{- end -}}
