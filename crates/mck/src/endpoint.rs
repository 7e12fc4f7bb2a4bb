//! The HTTP endpoint of `--metrics-addr`: Prometheus metrics, and the probes a
//! deployment needs. `/ready` answers 200 once the source connected to every cluster
//! of the metadata (503 with the reason until then, and again while a cluster is being
//! connected or waits to be tried again: `mck_clusters_waiting`, which the source sets
//! first when its start-up connected what it could); `/live` answers 200 while the
//! process serves; `/metrics` serves the metrics. Any other path answers 404 naming
//! these three.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::PrometheusHandle;

/// What `/ready` looks at: the number of clusters read and waiting, when known.
pub type Clusters = Arc<dyn Fn() -> (Option<f64>, Option<f64>) + Send + Sync>;

/// Whether the run is ready, and why not.
fn readiness(clusters: &Clusters) -> Result<String, String> {
    match clusters() {
        (_, None) => Err("starting: not connected to the clusters yet".into()),
        (_, Some(w)) if w > 0.0 => Err(format!(
            "{w} cluster(s) of the metadata not read yet (connecting, or waiting to be tried again)"
        )),
        (read, Some(_)) => Ok(format!("ready: {} cluster(s) read", read.unwrap_or(0.0))),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body + "\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn answer(path: &str, metrics: &PrometheusHandle, clusters: &Clusters) -> Response<Full<Bytes>> {
    match path {
        "/live" | "/livez" | "/healthz" => text(StatusCode::OK, "live".into()),
        "/ready" | "/readyz" => match readiness(clusters) {
            Ok(why) => text(StatusCode::OK, why),
            Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, why),
        },
        "/metrics" => {
            let mut r = text(StatusCode::OK, metrics.render());
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            r
        }
        other => text(
            StatusCode::NOT_FOUND,
            format!("no {other} here: the paths are /metrics, /ready and /live\n"),
        ),
    }
}

/// Binds `addr` now (so a taken address is an error at start) and serves it from a
/// task. Must run inside a Tokio runtime.
pub fn serve(
    addr: SocketAddr,
    metrics: PrometheusHandle,
    clusters: Clusters,
) -> Result<(), String> {
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| format!("--metrics-addr {addr}: {e}"))?;
    let listener = tokio::net::TcpListener::from_std(listener)
        .map_err(|e| format!("--metrics-addr {addr}: {e}"))?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (metrics, clusters) = (metrics.clone(), clusters.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let r = answer(req.uri().path(), &metrics, &clusters);
                    async move { Ok::<_, Infallible>(r) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(())
}
