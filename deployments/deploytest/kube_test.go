package deploytest

import (
	"testing"
)

func TestExpandVars(t *testing.T) {
	env := map[string]string{"POD_NAME": "readsync-2", "N": "3", "EMPTY": ""}
	tests := []struct{ in, want string }{
		{"$(POD_NAME)/3", "readsync-2/3"},
		{"$(POD_NAME)/$(N)", "readsync-2/3"},
		{"$(UNDEFINED)/3", "$(UNDEFINED)/3"},
		{"$$(POD_NAME)", "$(POD_NAME)"},
		{"a$$b", "a$b"},
		{"$(EMPTY)x", "x"},
		{"cost: 5$", "cost: 5$"},
		{"$x", "$x"},
		{"$(POD_NAME", "$(POD_NAME"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := ExpandVars(tt.in, env); got != tt.want {
			t.Errorf("ExpandVars(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got, err := ExpandSubPath("$(N)", env); got != "3" || err != nil {
		t.Errorf("ExpandSubPath($(N)) = %q, %v", got, err)
	}
	if _, err := ExpandSubPath("$(JOB_COMPLETION_INDEX)", env); err == nil {
		t.Errorf("ExpandSubPath of an undefined variable: no error")
	}
}

// serviceMonitor is a ServiceMonitor with an endpoint's interval and one
// more field.
func serviceMonitor(interval, field string) string {
	return "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: x\nspec:\n" +
		"  selector:\n    matchLabels:\n      a: b\n  endpoints:\n    - port: http\n      interval: " + interval + "\n      " + field + "\n"
}

// The decoder must reject what the API server's strict validation rejects,
// or the manifest tests would pass manifests a cluster refuses.
func TestDecodeObjectIsStrict(t *testing.T) {
	tests := []struct {
		name, doc string
		ok        bool
	}{
		{"valid", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  A: b\n", true},
		{"comments only", "# nothing\n", true},
		{"unknown field", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndatas:\n  A: b\n", false},
		{"wrong case", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: x\nspec:\n  Replicas: 3\n", false},
		{"nested wrong case", "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  ports:\n    - name: http\n      port: 1\n      targetport: http\n", false},
		{"duplicate key", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  name: y\n", false},
		{"unknown kind", "apiVersion: v1\nkind: Deployment\nmetadata:\n  name: x\n", false},
		{"wrong type", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: x\nspec:\n  replicas: three\n", false},
		{"PodMonitor", "apiVersion: monitoring.coreos.com/v1\nkind: PodMonitor\nmetadata:\n  name: x\nspec:\n  selector: {}\n  podMetricsEndpoints:\n    - port: http\n", true},
		{"PodMonitor, unknown field", "apiVersion: monitoring.coreos.com/v1\nkind: PodMonitor\nmetadata:\n  name: x\nspec:\n  selector: {}\n  podMetricsEndpoints:\n    - port: http\n      paht: /metrics\n", false},
		{"PrometheusRule, unknown field", "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: x\nspec:\n  groups:\n    - name: g\n      rules:\n        - alert: A\n          expr: up == 0\n          four: 5m\n", false},
		{"custom resource", serviceMonitor("30s", "path: /metrics"), true},
		{"custom resource, unknown field", serviceMonitor("30s", "paths: /metrics"), false},
		// What only the CRD's schema says: a duration's pattern, an enum.
		{"custom resource, bad duration", serviceMonitor("30 s", "path: /metrics"), false},
		{"custom resource, value not in enum", serviceMonitor("30s", "scheme: ftp"), false},
	}
	for _, tt := range tests {
		_, err := DecodeObject([]byte(tt.doc))
		if (err == nil) != tt.ok {
			t.Errorf("%s: error %v, want ok %t", tt.name, err, tt.ok)
		}
	}
}
