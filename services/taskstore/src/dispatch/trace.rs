//! The span of publishing a job: a child of the trace its task was created
//! in (stored with the task, so this holds after a restart and on any
//! replica), named and described as the OpenTelemetry conventions for
//! messaging say. Its own context is what the job carries to the worker.

use taskstore_proto::jobs::JobMessage;
use taskstore_telemetry::propagation::{set_parent, traceparent_of};

/// The span of publishing `job` to `destination` over `system`
/// (`rabbitmq`, or `in-process`).
pub(crate) fn publish_span(job: &JobMessage, system: &str, destination: &str) -> tracing::Span {
    let span = tracing::info_span!(
        "job publish",
        otel.name = %format_args!("{destination} publish"),
        otel.kind = "producer",
        messaging.system = %system,
        messaging.destination.name = %destination,
        messaging.operation.type = "send",
        messaging.operation.name = "publish",
        messaging.rabbitmq.destination.routing_key = %job.tool,
        mcp.task.id = %job.task_id,
        mcp.tool.name = %job.tool,
        task_id = %job.task_id,
    );
    if let Some(parent) = &job.trace_context {
        set_parent(&span, parent);
    }
    span
}

/// The trace context the job carries on: the publish span's, or, when this
/// service exports no traces, the task's as it was stored.
pub(crate) fn carried_context(span: &tracing::Span, job: &JobMessage) -> Option<String> {
    traceparent_of(span).or_else(|| job.trace_context.clone())
}
