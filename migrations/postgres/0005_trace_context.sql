-- The trace a task was created in (a W3C traceparent), so that its dispatch
-- joins that trace whichever replica publishes it, even after a restart.
-- NULL: the task was created outside a trace.
ALTER TABLE tasks ADD COLUMN trace_context text;
