{{/* The release's object names: the release name, or release-readsync. */}}
{{- define "readsync.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "readsync.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "readsync.labels" -}}
{{ include "readsync.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "readsync.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/*
The daemon's objects' name: this release's, or for a release that runs only
a backfill, backfill.daemon's.
*/}}
{{- define "readsync.daemonName" -}}
{{- if .Values.daemon.enabled -}}
{{ include "readsync.fullname" . }}
{{- else if .Values.backfill.daemon -}}
{{ .Values.backfill.daemon }}
{{- else -}}
{{ fail "backfill.daemon: with daemon.enabled=false, the name of the daemon's objects (its release's, such as readsync), whose ConfigMaps the backfill reads" }}
{{- end -}}
{{- end -}}

{{/*
What the daemon's and the backfill's pods share, as in deployments/k8s:
a non-root user on a read-only root filesystem, no service links, a grace
period above READSYNC_SHUTDOWN_GRACE.
*/}}
{{- define "readsync.podSpec" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
# Service links would add READSYNC_SERVICE_HOST and the like: variables with
# readsync's prefix that readsync never reads.
enableServiceLinks: false
# More than READSYNC_SHUTDOWN_GRACE: a running pass gets that long to
# finish, then what it fetched is written or spooled.
terminationGracePeriodSeconds: 60
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The container's settings and environment after READSYNC_SHARD. */}}
{{- define "readsync.container" -}}
image: {{ include "readsync.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
envFrom:
  - configMapRef:
      name: {{ include "readsync.daemonName" . }}-config
{{- end -}}

{{- define "readsync.env" -}}
- name: READSYNC_CLIENT_ID
  valueFrom:
    secretKeyRef:
      name: {{ .Values.secret.name }}
      key: {{ .Values.secret.keys.clientID }}
- name: READSYNC_CLIENT_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ .Values.secret.name }}
      key: {{ .Values.secret.keys.clientSecret }}
- name: READSYNC_CLICKHOUSE_DSN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.secret.name }}
      key: {{ .Values.secret.keys.clickhouseDSN }}
- name: READSYNC_SCHEDULES_FILE
  value: /etc/readsync/schedules.yaml
- name: READSYNC_SPOOL_DIR
  value: /var/lib/readsync/spool
# Below the spool volume's size, so that readsync's own cap applies first.
- name: READSYNC_SPOOL_MAX_BYTES
  value: 1GiB
- name: READSYNC_SHUTDOWN_GRACE
  value: 30s
- name: READSYNC_HTTP_ADDR
  value: ":9090"
{{- end -}}

{{/* The container's resources, given as the argument, and its security context. */}}
{{- define "readsync.containerTail" -}}
resources:
  {{- toYaml . | nindent 2 }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop:
      - ALL
{{- end -}}

{{/* Rolls the pods when the settings or the schedules change. */}}
{{- define "readsync.checksum" -}}
checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
{{- end -}}

{{/*
The monitors' job label: the Service's and pods' app.kubernetes.io/name,
readsync, whatever the release's name, which is the job the alerts of
files/readsync.rules.yaml read.
*/}}
{{- define "readsync.jobLabel" -}}
jobLabel: app.kubernetes.io/name
{{- end -}}

{{/* A monitor's scrape settings, from its values (metrics.*). */}}
{{- define "readsync.scrape" -}}
{{- with .interval }}
interval: {{ . }}
{{- end }}
{{- with .scrapeTimeout }}
scrapeTimeout: {{ . }}
{{- end }}
{{- with .relabelings }}
relabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .metricRelabelings }}
metricRelabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
Where each value of prometheusRule.alerts goes in its alert of
files/readsync.rules.yaml: "for" sets the alert's for; any other names the
text of the alert's expression that the value replaces, every occurrence
of it (a window in brackets, a number, a pattern). With the defaults of
values.yaml every replacement gives the rule file's text back, which the
chart's tests check, and each text must be in its expression, which they
check too.
*/}}
{{- define "readsync.alertKnobs" -}}
ReadsyncNoSuccessfulPass: {afterSeconds: "7200"}
ReadsyncPassesPartial: {window: "[3h]"}
ReadsyncNamesFailing: {window: "[1h]"}
ReadsyncNothingDelivered: {afterSeconds: "7200"}
ReadsyncClickHouseRefuses: {for: for}
ReadsyncSpoolGrowing: {window: "[30m]"}
ReadsyncSpoolRefusing: {window: "[10m]"}
ReadsyncUpstreamDown: {for: for}
ReadsyncUpstreamDegraded: {failedRatio: "0.3", window: "[15m]"}
ReadsyncShardCountsDisagree: {for: for}
ReadsyncShardsMissing: {for: for}
ReadsyncReconcileBehind: {lagSeconds: "1800", for: for}
ReadsyncNamesUnresolved: {afterSeconds: "3600"}
ReadsyncNamesNotRead: {for: for}
ReadsyncExpiryBehind: {marginSeconds: "2764800", for: for}
ReadsyncVerifyFailed: {jobPattern: ".*readsync-verify-[0-9]+"}
ReadsyncHistoryOutgrowsDisk: {budgetBytes: "107374182400", for: for}
{{- end }}

{{/*
The rule file's groups with prometheusRule.alerts applied (see
readsync.alertKnobs).
*/}}
{{- define "readsync.tunedRules" -}}
{{- $file := .Files.Get "files/readsync.rules.yaml" | fromYaml }}
{{- $knobs := include "readsync.alertKnobs" . | fromYaml }}
{{- range $g := $file.groups }}
{{- range $r := $g.rules }}
{{- $values := index $.Values.prometheusRule.alerts $r.alert | default dict }}
{{- range $name, $text := index $knobs $r.alert | default dict }}
{{- if not (hasKey $values $name) }}
{{- fail (printf "prometheusRule.alerts.%s.%s: no value (the chart's values.yaml has its default)" $r.alert $name) }}
{{- end }}
{{- $v := index $values $name }}
{{- if eq $name "for" }}
{{- $_ := set $r "for" (toString $v) }}
{{- else if hasPrefix "[" $text }}
{{- $_ := set $r "expr" (replace $text (printf "[%s]" $v) $r.expr) }}
{{- else if eq $name "jobPattern" }}
{{- $_ := set $r "expr" (replace $text ($v | replace "\\" "\\\\" | replace "\"" "\\\"") $r.expr) }}
{{- else if and (kindIs "float64" $v) (eq ($v | int64 | float64) $v) }}
{{- $_ := set $r "expr" (replace $text (toString ($v | int64)) $r.expr) }}
{{- else }}
{{- $_ := set $r "expr" (replace $text (toString $v) $r.expr) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- $file.groups | toYaml }}
{{- end }}
