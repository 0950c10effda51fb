package serve

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vdpp/vdpp/serve/job"
)

// rateWindow is the window of the samples-per-second gauge.
const rateWindow = 10 * time.Second

// metricSet are the server's Prometheus metrics, on a registry of their own (so several
// servers can live in one test process).
type metricSet struct {
	reg         *prometheus.Registry
	stepLatency *prometheus.HistogramVec
	batchSize   prometheus.Histogram
	submitted   prometheus.Counter
	rejected    prometheus.Counter
	failed      prometheus.Counter
	expired     prometheus.Counter
	samples     prometheus.Counter
	workerLost  prometheus.Counter
	restarts    prometheus.Counter
	// preparing is the prepares in flight; prepareSeconds how long each took.
	preparing      prometheus.Gauge
	prepareSeconds prometheus.Histogram
	// storeQuarantined and storeRecovered count what start-up set aside or rebuilt.
	storeQuarantined prometheus.Counter
	storeRecovered   prometheus.Counter

	mu    sync.Mutex
	times []time.Time // completions within rateWindow
	now   func() time.Time
}

// newMetrics registers the metrics that do not need a coordinator.
func newMetrics() *metricSet {
	m := &metricSet{reg: prometheus.NewRegistry(), now: time.Now}
	m.stepLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "vdpp_step_latency_seconds", Help: "Duration of one denoiser step (one call for a whole batch), by pipeline stage.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"stage"})
	m.batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "vdpp_batch_size", Help: "Samples per dispatched batch.", Buckets: prometheus.LinearBuckets(1, 1, 16),
	})
	m.submitted = prometheus.NewCounter(prometheus.CounterOpts{Name: "vdpp_jobs_submitted_total", Help: "Jobs accepted (202)."})
	m.rejected = prometheus.NewCounter(prometheus.CounterOpts{Name: "vdpp_jobs_rejected_total", Help: "Submissions refused because the queue was full (429)."})
	m.failed = prometheus.NewCounter(prometheus.CounterOpts{Name: "vdpp_jobs_failed_total", Help: "Jobs that ended in failure."})
	m.expired = prometheus.NewCounter(prometheus.CounterOpts{Name: "vdpp_jobs_expired_total", Help: "Finished jobs deleted (record and files) by the retention policy (--keep-jobs)."})
	m.samples = prometheus.NewCounter(prometheus.CounterOpts{Name: "vdpp_samples_completed_total", Help: "Samples (videos) completed."})
	m.workerLost = prometheus.NewCounter(prometheus.CounterOpts{Name: "vdpp_worker_lost_total", Help: "Worker connections lost (death, hang or replacement)."})
	m.restarts = prometheus.NewCounter(prometheus.CounterOpts{Name: "vdpp_worker_restarts_total", Help: "Worker processes restarted."})
	m.storeQuarantined = prometheus.NewCounter(prometheus.CounterOpts{Name: "vdpp_store_quarantined_total", Help: "Index files, job records and job folders the store could not read at start-up and moved to DATA_DIR/quarantine (never deleted)."})
	m.storeRecovered = prometheus.NewCounter(prometheus.CounterOpts{Name: "vdpp_store_recovered_total", Help: "Job records rebuilt from their folder's record.json at start-up (an index lost or behind)."})
	m.preparing = prometheus.NewGauge(prometheus.GaugeOpts{Name: "vdpp_prepares_in_flight", Help: "Jobs whose initial sample (image decode and resize, conditioning) is being built (at most --max-prepares)."})
	m.prepareSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "vdpp_prepare_seconds", Help: "Duration of one job's prepare (image decode and resize, conditioning, initial noise).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	})
	m.reg.MustRegister(m.stepLatency, m.batchSize, m.submitted, m.rejected, m.failed, m.expired, m.samples, m.workerLost, m.restarts,
		m.storeQuarantined, m.storeRecovered, m.preparing, m.prepareSeconds)
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vdpp_samples_per_second", Help: "Samples completed per second over the last 10 s.",
	}, m.rate))
	return m
}

// attach registers the gauges read from the coordinator.
func (m *metricSet) attach(c *coordinator) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vdpp_queue_depth", Help: "Jobs waiting for a slot.",
	}, func() float64 { _, q := c.Counts(); return float64(q) }))
	for _, s := range []job.State{job.StateQueued, job.StateRunning, job.StateSucceeded, job.StateFailed, job.StateCancelled} {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "vdpp_jobs", Help: "Jobs the server holds, by state (expired jobs are no longer counted).", ConstLabels: prometheus.Labels{"state": string(s)},
		}, func() float64 { n, _ := c.Counts(); return float64(n[s]) }))
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vdpp_workers_ready", Help: "Worker ranks connected.",
	}, func() float64 { j, _ := c.Ready(); return float64(j) }))
}

func (m *metricSet) completed(t time.Time) {
	m.samples.Inc()
	m.mu.Lock()
	m.times = append(m.times, t)
	m.trim(t)
	m.mu.Unlock()
}

func (m *metricSet) trim(now time.Time) {
	i := 0
	for i < len(m.times) && now.Sub(m.times[i]) > rateWindow {
		i++
	}
	m.times = append(m.times[:0], m.times[i:]...)
}

func (m *metricSet) rate() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.trim(m.now())
	return float64(len(m.times)) / rateWindow.Seconds()
}

// Handler serves the metrics in the Prometheus text format.
func (m *metricSet) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
