{{/* Labels on every object the chart makes (not on the pods: a chart upgrade alone does not
roll hns). */}}
{{- define "hns.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: hns
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* The image: repository:tag, or repository:tag@digest when a digest pins it. */}}
{{- define "hns.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}:{{ $tag }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{/* The user hns-apiserver authenticates as. */}}
{{- define "hns.identity" -}}
system:serviceaccount:{{ .Release.Namespace }}:hns-apiserver
{{- end -}}

{{/* Namespaces that never take part in a hierarchy: the values' list and hns's own. */}}
{{- define "hns.excludedNamespaces" -}}
{{- $all := concat .Values.excludedNamespaces (list .Release.Namespace) | uniq -}}
{{- toJson $all -}}
{{- end -}}

{{/* The webhooks' first match condition: hns's own writes are not sent back to it. */}}
{{- define "hns.notHnsItself" -}}
- name: not-hns-itself
  expression: request.userInfo.username != '{{ include "hns.identity" . }}'
{{- end -}}

{{/* Annotations for cert-manager's CA injector, when cert-manager issues the certificate. */}}
{{- define "hns.caInjection" -}}
{{- if eq .Values.certificates.source "cert-manager" }}
  annotations:
    cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/hns-serving-cert
{{- end }}
{{- end -}}
