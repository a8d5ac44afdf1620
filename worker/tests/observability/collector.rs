//! A small OTLP/gRPC trace receiver: what an OpenTelemetry collector would
//! be, keeping every span it is sent, with the resource it came from.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use tokio_util::sync::CancellationToken;

/// One received span, flattened.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub name: String,
    /// The OTLP `SpanKind` (2 server, 3 client, 4 producer, 5 consumer).
    pub kind: i32,
    pub attributes: HashMap<String, String>,
    /// The exporting process's resource attributes (`service.name`, …).
    pub resource: HashMap<String, String>,
}

impl ReceivedSpan {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

#[derive(Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn flatten(attributes: &[KeyValue]) -> HashMap<String, String> {
    attributes
        .iter()
        .filter_map(|kv| {
            let value = match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::StringValue(s) => s.clone(),
                any_value::Value::IntValue(i) => i.to_string(),
                any_value::Value::BoolValue(b) => b.to_string(),
                any_value::Value::DoubleValue(d) => d.to_string(),
                other => format!("{other:?}"),
            };
            Some((kv.key.clone(), value))
        })
        .collect()
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut received = Vec::new();
        for resource_spans in request.into_inner().resource_spans {
            let resource = resource_spans
                .resource
                .map(|r| flatten(&r.attributes))
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    received.push(ReceivedSpan {
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        name: span.name,
                        kind: span.kind,
                        attributes: flatten(&span.attributes),
                        resource: resource.clone(),
                    });
                }
            }
        }
        self.spans.lock().expect("lock").extend(received);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// A running receiver on an ephemeral port.
pub struct Collector {
    pub addr: SocketAddr,
    receiver: Receiver,
    stop: CancellationToken,
}

impl Collector {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the collector");
        let addr = listener.local_addr().expect("collector address");
        let receiver = Receiver::default();
        let stop = CancellationToken::new();
        let server = tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(receiver.clone()))
            .serve_with_incoming_shutdown(
                tonic::transport::server::TcpIncoming::from(listener),
                stop.clone().cancelled_owned(),
            );
        tokio::spawn(server);
        Self {
            addr,
            receiver,
            stop,
        }
    }

    /// The variables that point a process's OTLP exporter here.
    pub fn vars(&self) -> Vec<(String, String)> {
        [
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://{}", self.addr),
            ),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".to_owned()),
            // Export soon after each span ends, not every 5 s.
            ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.receiver.spans.lock().expect("lock").clone()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
