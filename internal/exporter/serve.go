package exporter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/klauspost/compress/gzhttp"
	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves c's metrics, with the exporter process's own (its
// memory and CPU, process_*; the Go runtime's, go_*), at /metrics.
func Handler(c *Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError, // a failed snapshot still serves process_* and says why
		Registry:      reg,                      // promhttp_metric_handler_errors_total
		Timeout:       30 * time.Second,
		// Compressed below: promhttp's gzip at its default level was a
		// third of a scrape of 2,000 histograms.
		DisableCompression: true,
	})
	compress, err := gzhttp.NewWrapper(gzhttp.CompressionLevel(gzip.BestSpeed))
	if err != nil {
		panic(err) // constant options
	}
	mux.Handle("/metrics", compress(metrics))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html><head><title>fusescope exporter</title></head><body><h1>fusescope exporter</h1><p><a href="/metrics">Metrics</a></p></body></html>`)
	})
	return mux
}

// Listen opens addr for Serve, with an error that names the flag that
// gave it and says what to do when the port is taken.
func Listen(flag, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("%s %s: the address is in use (another exporter?): give another with %s HOST:PORT", flag, addr, flag)
		}
		return nil, fmt.Errorf("%s %s: %v: give HOST:PORT, such as 127.0.0.1:9640", flag, addr, unwrapOp(err))
	}
	return l, nil
}

// Serve serves h on l until ctx is done.
func Serve(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
		return nil
	case err := <-done:
		return err
	}
}

// unwrapOp drops net.OpError's "listen tcp ADDR:" prefix, which the
// sentence around it already says.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}
