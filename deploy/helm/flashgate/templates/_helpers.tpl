{{- define "flashgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "flashgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "flashgate.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "flashgate.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "flashgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "flashgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* selector labels of one component: include "flashgate.selector" (list . "issuer") */}}
{{- define "flashgate.selector" -}}
app.kubernetes.io/name: {{ include "flashgate.name" (index . 0) }}
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* repository@digest when a digest pins the image, else repository:tag (default appVersion) */}}
{{- define "flashgate.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "flashgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{ .Values.serviceAccount.name | default (include "flashgate.fullname" .) }}
{{- else -}}
{{ .Values.serviceAccount.name | default "default" }}
{{- end -}}
{{- end -}}

{{/* The admin token's Secret and key: a Secret of yours, the chart's (adminToken.value), or the key
ring's Secret, where the install hook generates it once (never rendered by Helm). */}}
{{- define "flashgate.adminTokenRef" -}}
{{- if .Values.adminToken.existingSecret -}}
name: {{ .Values.adminToken.existingSecret }}
key: {{ .Values.adminToken.existingSecretKey }}
{{- else if .Values.adminToken.value -}}
name: {{ include "flashgate.secretName" . }}
key: FLASHGATE_ADMIN_TOKEN
{{- else if not .Values.keys.existingSecret -}}
name: {{ include "flashgate.keysSecret" . }}
key: FLASHGATE_ADMIN_TOKEN
{{- else -}}
{{- fail "adminToken: with keys.existingSecret set, name the admin token too (adminToken.existingSecret or adminToken.value): the chart generates one only in the key ring's Secret it creates" -}}
{{- end -}}
{{- end -}}

{{/* true when the install hook generates the admin token */}}
{{- define "flashgate.generatesAdminToken" -}}
{{- if and (not .Values.adminToken.existingSecret) (not .Values.adminToken.value) (not .Values.keys.existingSecret) -}}true{{- end -}}
{{- end -}}

{{/* The Secret the chart writes REDIS_URL, the DSN and the admin token to. */}}
{{- define "flashgate.secretName" -}}
{{ include "flashgate.fullname" . }}
{{- end -}}

{{- define "flashgate.keysSecret" -}}
{{ .Values.keys.existingSecret | default (printf "%s-keys" (include "flashgate.fullname" .)) }}
{{- end -}}

{{- define "flashgate.journalEnabled" -}}
{{- if and .Values.journal.enabled (or .Values.postgresql.dsn .Values.postgresql.existingSecret) -}}true{{- end -}}
{{- end -}}

{{/* env entries every process shares: REDIS_URL from a Secret */}}
{{- define "flashgate.redisEnv" -}}
- name: REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.existingSecret | default (include "flashgate.secretName" .) }}
      key: {{ if .Values.redis.existingSecret }}{{ .Values.redis.existingSecretKey }}{{ else }}REDIS_URL{{ end }}
{{- end -}}

{{- define "flashgate.dsnEnv" -}}
- name: FLASHGATE_JOURNAL_DSN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.postgresql.existingSecret | default (include "flashgate.secretName" .) }}
      key: {{ if .Values.postgresql.existingSecret }}{{ .Values.postgresql.existingSecretKey }}{{ else }}FLASHGATE_JOURNAL_DSN{{ end }}
{{- end -}}

{{/* extra env: a map of name → value (sorted by name), then a list of env entries as Kubernetes
writes them (valueFrom allowed): include "flashgate.extraEnv" (list .Values.issuer.env .Values.issuer.extraEnv) */}}
{{- define "flashgate.extraEnv" -}}
{{- range $k, $v := index . 0 }}
- name: {{ $k }}
  value: {{ $v | toString | quote }}
{{- end }}
{{- with index . 1 }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "flashgate.podSecurity" -}}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}

{{- define "flashgate.egress" -}}
{{- if .Values.networkPolicy.egress.enabled }}
egress:
  - ports:   # DNS
      - {protocol: UDP, port: 53}
      - {protocol: TCP, port: 53}
  - ports:
      {{- range .Values.networkPolicy.egress.ports }}
      - {protocol: TCP, port: {{ . }}}
      {{- end }}
{{- end }}
{{- end }}

{{- define "flashgate.keysRBAC" -}}
{{- $ctx := index . 0 -}}{{- $suffix := index . 1 -}}{{- $create := index . 2 -}}{{- $hook := index . 3 -}}
{{- $name := printf "%s-%s" (include "flashgate.fullname" $ctx) $suffix -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $name }}
  labels:
    {{- include "flashgate.labels" $ctx | nindent 4 }}
    app.kubernetes.io/component: keys
  {{- with $hook }}
  annotations:
    {{- toYaml . | nindent 4 }}
    helm.sh/hook-weight: "-10"
  {{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}
  labels:
    {{- include "flashgate.labels" $ctx | nindent 4 }}
    app.kubernetes.io/component: keys
  {{- with $hook }}
  annotations:
    {{- toYaml . | nindent 4 }}
    helm.sh/hook-weight: "-10"
  {{- end }}
rules:
  - apiGroups: [""]
    resources: [secrets]
    resourceNames: [{{ include "flashgate.keysSecret" $ctx | quote }}]
    verbs: [get, update]
  {{- if $create }}
  - apiGroups: [""]
    resources: [secrets]
    verbs: [create]
  {{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "flashgate.labels" $ctx | nindent 4 }}
    app.kubernetes.io/component: keys
  {{- with $hook }}
  annotations:
    {{- toYaml . | nindent 4 }}
    helm.sh/hook-weight: "-9"
  {{- end }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ $name }}
    namespace: {{ $ctx.Release.Namespace }}
{{- end -}}

{{- define "flashgate.keysPod" -}}
{{- $ctx := index . 0 -}}
serviceAccountName: {{ include "flashgate.fullname" $ctx }}-{{ index . 1 }}
restartPolicy: OnFailure
{{- include "flashgate.podSecurity" $ctx | nindent 0 }}
{{- with $ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
containers:
  - name: keys
    image: {{ include "flashgate.image" $ctx }}
    imagePullPolicy: {{ $ctx.Values.image.pullPolicy }}
    args:
      - keys
      - {{ index . 2 }}
      - -kubernetes-secret
      - {{ include "flashgate.keysSecret" $ctx }}
      - -kubernetes-secret-key
      - {{ $ctx.Values.keys.secretKey }}
      {{- if eq (index . 2) "rotate" }}
      - -max-token-lifetime
      - {{ $ctx.Values.keys.rotation.maxTokenLifetime }}
      - -min-key-age
      - {{ $ctx.Values.keys.rotation.minKeyAge }}
      {{- else }}
      - -lottery-key-key
      - FLASHGATE_LOTTERY_KEY
      {{- if include "flashgate.generatesAdminToken" $ctx }}
      - -admin-token-key
      - FLASHGATE_ADMIN_TOKEN
      {{- end }}
      {{- end }}
    resources:
      {{- toYaml $ctx.Values.keys.jobResources | nindent 6 }}
    securityContext:
      {{- toYaml $ctx.Values.securityContext | nindent 6 }}
{{- end -}}
