{{/* An image reference: repository@digest when a digest is set, else repository:tag. */}}
{{- define "loctree.imageRef" -}}
{{- if .digest -}}{{ .repository }}@{{ .digest }}{{- else -}}{{ .repository }}:{{ .tag }}{{- end -}}
{{- end -}}

{{/* The tree server's host name, as Envoy's outbound cluster names it. */}}
{{- define "loctree.treeHost" -}}
loctree-agent.{{ .Values.namespace.name }}.svc.{{ .Values.clusterDomain }}
{{- end -}}

{{/* Labels every object carries (uninstall selects on part-of). */}}
{{- define "loctree.partOf" -}}
app.kubernetes.io/part-of: loctree
{{- end -}}

{{/* Checks the values that have a fixed set of choices. */}}
{{- define "loctree.check" -}}
{{- if not (has .Values.mode (list "sidecar" "gateway")) -}}
{{- fail (printf "mode %q: want sidecar or gateway" .Values.mode) -}}
{{- end -}}
{{- if not (has .Values.steering (list "override-host" "persistent-session")) -}}
{{- fail (printf "steering %q: want override-host or persistent-session" .Values.steering) -}}
{{- end -}}
{{- if not (has .Values.source (list "kubernetes" "xds")) -}}
{{- fail (printf "source %q: want kubernetes or xds" .Values.source) -}}
{{- end -}}
{{- if not (regexMatch "^[A-Za-z0-9][-A-Za-z0-9_./]*$" (toString .Values.trafficScope)) -}}
{{- fail (printf "trafficScope %q: want a scope key (zone, region, subzone, node or a label key)" (toString .Values.trafficScope)) -}}
{{- end -}}
{{- if not (has .Values.wasm.failStrategy (list "FAIL_OPEN" "FAIL_CLOSE" "FAIL_RELOAD")) -}}
{{- fail (printf "wasm.failStrategy %q: want FAIL_OPEN, FAIL_CLOSE or FAIL_RELOAD" .Values.wasm.failStrategy) -}}
{{- end -}}
{{- end -}}
