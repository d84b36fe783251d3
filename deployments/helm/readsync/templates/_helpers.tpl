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
{{ required "image.repository is required: the registry and name of the image make image built and you pushed, such as --set image.repository=registry.example.com/readsync (see docs/kubernetes.md)" .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
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
files/readsync.rules.yaml. expr is the text of the alert's expression the
value replaces, every occurrence of it (a window in brackets, a number, a
pattern); a knob without expr sets the alert's for. words are the phrases
of its summary and description that name the default, each replaced by
the value (a duration, seconds as one, a ratio as a percentage) when the
value changes the rule. With the defaults of values.yaml the rule file
comes back unchanged, which the chart's tests check, as they check that
each value changes its alert.
*/}}
{{- define "readsync.alertKnobs" -}}
ReadsyncNoSuccessfulPass:
  afterSeconds: {expr: "7200", words: ["two hours"]}
ReadsyncPassesPartial:
  window: {expr: "[3h]", words: ["three hours"]}
ReadsyncNamesFailing:
  window: {expr: "[1h]", words: ["the last hour"], as: "the last %s"}
ReadsyncNothingDelivered:
  afterSeconds: {expr: "7200", words: ["two hours"]}
ReadsyncClickHouseRefuses:
  for: {}
ReadsyncSpoolGrowing:
  window: {expr: "[30m]"}
ReadsyncSpoolRefusing:
  window: {expr: "[10m]", words: ["ten minutes"]}
ReadsyncUpstreamDown:
  for: {words: ["half an hour"]}
ReadsyncUpstreamDegraded:
  failedRatio: {expr: "0.3", words: ["a third", "30%"]}
  window: {expr: "[15m]", words: ["fifteen minutes"]}
ReadsyncShardCountsDisagree:
  for: {words: ["half an hour"]}
ReadsyncShardsMissing:
  for: {words: ["half an hour"]}
ReadsyncReconcileBehind:
  lagSeconds: {expr: "1800", words: ["half an hour"]}
  for: {}
ReadsyncNamesUnresolved:
  afterSeconds: {expr: "3600", words: ["an hour"]}
ReadsyncNamesNotRead:
  for: {}
ReadsyncExpiryBehind:
  marginSeconds: {expr: "2764800", words: ["a month and a day"]}
  for: {}
ReadsyncVerifyFailed:
  jobPattern: {expr: ".*readsync-verify-[0-9]+"}
ReadsyncHistoryOutgrowsDisk:
  budgetBytes: {expr: "107374182400"}
  for: {}
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
{{- range $name, $k := index $knobs $r.alert | default dict }}
{{- if not (hasKey $values $name) }}
{{- fail (printf "prometheusRule.alerts.%s.%s: no value (the chart's values.yaml has its default)" $r.alert $name) }}
{{- end }}
{{- $v := index $values $name }}
{{- $human := toString $v }}
{{- $changed := false }}
{{- if eq $name "for" }}
{{- $changed = ne (toString $v) (toString $r.for) }}
{{- $_ := set $r "for" (toString $v) }}
{{- else }}
{{- $text := $k.expr | default (printf "the %s of %s" $name $r.alert) }}
{{- $new := toString $v }}
{{- if hasPrefix "[" $text }}
{{- $new = printf "[%s]" $v }}
{{- else if eq $name "jobPattern" }}
{{- $new = $v | replace "\\" "\\\\" | replace "\"" "\\\"" }}
{{- else if and (kindIs "float64" $v) (eq ($v | int64 | float64) $v) }}
{{- $new = toString ($v | int64) }}
{{- end }}
{{- if hasSuffix "Seconds" $name }}
{{- $human = duration ($v | int64) | trimSuffix "0s" | trimSuffix "0m" }}
{{- else if eq $name "failedRatio" }}
{{- $human = printf "%v%%" (mulf $v 100) }}
{{- end }}
{{- if not (contains $text $r.expr) }}
{{- fail (printf "prometheusRule.alerts.%s.%s: the rule file's expression no longer holds %q, which the value replaces (templates/_helpers.tpl)" $r.alert $name $text) }}
{{- end }}
{{- $changed = ne $new $text }}
{{- $_ := set $r "expr" (replace $text $new $r.expr) }}
{{- end }}
{{- if $changed }}
{{- $as := $k.as | default "%s" }}
{{- range $phrase := $k.words | default list }}
{{- range $field := list "summary" "description" }}
{{- $_ := set $r.annotations $field (replace $phrase (printf $as $human) (index $r.annotations $field)) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- $file.groups | toYaml }}
{{- end }}
