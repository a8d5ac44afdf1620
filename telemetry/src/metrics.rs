//! Prometheus metrics: the `metrics` facade's global recorder, rendered on
//! `/metrics` by a small HTTP server on a port of its own (so that the gRPC
//! port stays gRPC, and scrapes never queue behind RPCs). Metric names,
//! units and labels are chosen where they are recorded; histograms of
//! seconds share one set of buckets.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::routing::get;
use http::StatusCode;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Bucket bounds for every `*_seconds` histogram: 1 ms to 10 minutes.
const SECONDS_BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0,
    600.0,
];

/// How often histograms are compacted (the exporter asks for this when it
/// does not run its own listener).
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The process's recorder, once installed.
static INSTALLED: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the global recorder, or returns the one already installed (a
/// process that runs several services, as tests do, shares one). Before it,
/// metrics are no-ops.
pub fn install() -> Result<PrometheusHandle, String> {
    if let Some(handle) = INSTALLED.get() {
        return Ok(handle.clone());
    }
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), &SECONDS_BUCKETS)
        .map_err(|err| format!("invalid histogram buckets: {err}"))?
        .build_recorder();
    let handle = recorder.handle();
    // Two racing first calls: the loser's recorder is dropped unused.
    if INSTALLED.set(handle.clone()).is_ok() {
        metrics::set_global_recorder(recorder)
            .map_err(|err| format!("could not install the metrics recorder: {err}"))?;
        return Ok(handle);
    }
    INSTALLED
        .get()
        .cloned()
        .ok_or_else(|| "the metrics recorder vanished".to_owned())
}

/// Answers a readiness probe: whether the process should get work now.
pub type Readiness = Arc<dyn Fn() -> bool + Send + Sync>;

/// Serves, on `listener` until `shutdown` fires: `GET /metrics`; `GET
/// /livez` (200 while the process answers at all: its runtime is not
/// wedged); and, with `ready`, `GET /readyz` (200 when it holds, else 503),
/// for processes without a gRPC port to probe.
pub fn serve(
    listener: TcpListener,
    handle: PrometheusHandle,
    ready: Option<Readiness>,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    let upkeep = handle.clone();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(UPKEEP_EVERY) => upkeep.run_upkeep(),
            }
        }
    });
    let mut app = axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let handle = handle.clone();
                async move {
                    (
                        [(
                            http::header::CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8",
                        )],
                        handle.render(),
                    )
                }
            }),
        )
        .route("/livez", get(|| async { "ok\n" }));
    if let Some(ready) = ready {
        app = app.route(
            "/readyz",
            get(move || {
                let ready = ready();
                async move {
                    if ready {
                        (StatusCode::OK, "ready\n")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
                    }
                }
            }),
        );
    }
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
        if let Err(err) = served {
            tracing::error!(error = %err, "the metrics endpoint failed");
        }
    })
}
