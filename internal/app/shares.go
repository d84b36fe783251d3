package app

import (
	"fmt"
	"log/slog"

	"github.com/readsync/readsync/internal/config"

	"github.com/readsync/readsync/internal/kubeapi"
	"github.com/readsync/readsync/internal/metrics"
	"github.com/readsync/readsync/internal/shard"
)

// newShareSource is READSYNC_SHARD's source of shares: the fixed share of
// i/n, or for <pod>/statefulset the pod's StatefulSet read through the API
// server. m receives the share of every pass.
func newShareSource(build Build, cfg *config.Config, log *slog.Logger, m *metrics.Metrics) (shard.Source, error) {
	if cfg.Member == nil {
		s := cfg.ShardOf
		m.ObserveShare(s)
		return s, nil
	}
	api, err := kubeapi.New(cfg.KubernetesHost, cfg.KubernetesPort, cfg.ServiceAccountDir, "readsync/"+build.Version)
	if err != nil {
		return nil, fmt.Errorf("READSYNC_SHARD=%q: %w", cfg.Shard, err)
	}
	return shard.NewStatefulSet(*cfg.Member, api, log, m.ShardReadFailed), nil
}
