"""``GET /metrics``: the daemon's counters in the Prometheus text format (``prometheus_client``).

Requests by route and status, latency histograms per route, sentences and tokens
translated, the engine's batch sizes, queue depth, steps, failed batches and rows that
joined running batches (read from its public
:meth:`~edge_translator.core.engine.Engine.stats` at scrape time), the process's
resident memory, and the connections: open ones, those refused over the cap per client,
those dropped for a request that arrived too slowly, and how often the global cap filled
(the server reports them through the :class:`~.connections.Events` methods here). Each
:class:`Metrics` has its own registry, so several daemons (tests) can live in one process.
"""

from __future__ import annotations

from ..core.engine import Engine

#: Latency buckets (seconds): a cached sentence answers in a millisecond, a page in seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Metrics:
    """The daemon's Prometheus registry."""

    def __init__(self, engine: Engine):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

        self.registry = CollectorRegistry()
        self.requests = Counter("edge_translator_requests", "HTTP requests answered, by route and status",
                                ["route", "status"], registry=self.registry)
        self.latency = Histogram("edge_translator_request_seconds", "Time to answer a request, by route",
                                 ["route"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.sentences = Counter("edge_translator_sentences", "Sentences translated (cache hits included)",
                                 registry=self.registry)
        self.tokens = Counter("edge_translator_output_tokens", "Output tokens produced", registry=self.registry)
        self.characters = Counter("edge_translator_characters", "Characters of source text translated",
                                  registry=self.registry)
        self.refused = Counter("edge_translator_connections_refused",
                               "Connections closed as they were accepted, by reason (per_client: over "
                               "--connections-per-client)", ["reason"], registry=self.registry)
        self.dropped = Counter("edge_translator_connections_dropped",
                               "Connections dropped while a request was arriving, by reason (header_timeout, "
                               "body_too_slow)", ["reason"], registry=self.registry)
        self.limit_reached = Counter("edge_translator_connection_limit_reached",
                                     "Times every --connections slot was taken (new connections then wait in "
                                     "the listen backlog)", registry=self.registry)
        self.open_connections = Gauge("edge_translator_open_connections", "Client connections open now",
                                      registry=self.registry)
        self.refused.labels("per_client")  # each reason shows from the start, at 0
        for reason in ("header_timeout", "body_too_slow"):
            self.dropped.labels(reason)
        ProcessCollector(registry=self.registry)  # process_resident_memory_bytes and friends
        self.registry.register(_EngineCollector(engine))

    def observe(self, route: str, status: int, seconds: float) -> None:
        """Count one answered request."""
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    # -- what the server reports (see connections.Events) -----------------------------------
    def connection_refused(self, reason: str) -> None:
        self.refused.labels(reason).inc()

    def connection_dropped(self, reason: str) -> None:
        self.dropped.labels(reason).inc()

    def connection_limit_reached(self) -> None:
        self.limit_reached.inc()

    def watch_connections(self, count) -> None:
        """Read the open connections from ``count()`` at scrape time."""
        self.open_connections.set_function(count)

    def render(self) -> tuple[str, bytes]:
        """``(content type, body)`` of a scrape."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return CONTENT_TYPE_LATEST, generate_latest(self.registry)


class _EngineCollector:
    """The engine's own counters, read when Prometheus scrapes."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        stats = self.engine.stats()
        yield GaugeMetricFamily("edge_translator_queue_depth", "Sentences waiting to start", value=stats.queued)
        yield GaugeMetricFamily("edge_translator_decoding_rows", "Sentences decoding now", value=stats.decoding)
        yield CounterMetricFamily("edge_translator_decoder_steps", "Decoder steps run", value=stats.steps)
        yield CounterMetricFamily("edge_translator_failed_batches",
                                  "Batches ONNX Runtime failed on (their submissions failed, the engine went on)",
                                  value=stats.failed_batches)
        yield CounterMetricFamily("edge_translator_admitted_rows",
                                  "Sentences that joined a batch already decoding (continuous batching)",
                                  value=stats.admitted)
        yield CounterMetricFamily("edge_translator_gathers",
                                  "Times the idle engine waited a few milliseconds for other callers' sentences",
                                  value=stats.gathered)
        buckets, total, count = [], 0, 0
        for edge in (1, 2, 4, 8, 16, 32, 64, 128):
            count = sum(n for size, n in stats.batch_sizes.items() if size <= edge)
            buckets.append((str(edge), count))
        count = sum(stats.batch_sizes.values())
        total = sum(size * n for size, n in stats.batch_sizes.items())
        buckets.append(("+Inf", count))
        yield HistogramMetricFamily("edge_translator_batch_size", "Sentences in each batch when it started",
                                    buckets=buckets, sum_value=total)
