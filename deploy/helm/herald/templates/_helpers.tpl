{{/* Names and labels shared by every template. */}}
{{- define "herald.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "herald.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "herald.labels" -}}
app.kubernetes.io/name: {{ include "herald.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "herald.selectorLabels" -}}
app.kubernetes.io/name: {{ include "herald.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "herald.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "herald.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "herald.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "herald.secretName" -}}
{{- default (printf "%s-secrets" (include "herald.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* The environment of every Herald container: ConfigMap, Secret, and the pod's own name. */}}
{{- define "herald.env" -}}
envFrom:
  - configMapRef:
      name: {{ include "herald.fullname" . }}-config
  {{- if or .Values.secrets.existingSecret .Values.secrets.values }}
  - secretRef:
      name: {{ include "herald.secretName" . }}
  {{- end }}
env:
  - name: HERALD_POD
    valueFrom:
      fieldRef:
        fieldPath: metadata.name
{{- end -}}
