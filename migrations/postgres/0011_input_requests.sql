-- Questions a task asks its caller (MCP input requests) and their answers,
-- each under a key its tool chose, unique over the task's life. They go
-- with their task: a deleted or swept task takes them along (the foreign
-- key), and a task id reused after expiry starts without them (its create
-- statement deletes the old ones).
--
-- A task whose attempt waited too long for an answer is parked: no lease,
-- no job, `parked_at` set; the answer that completes its questions
-- dispatches it again.
--
-- Expand only: binaries before this migration never read or write either,
-- and run their tasks as before (a task of theirs never asks).
CREATE TABLE task_input_requests (
    tenant_id    text COLLATE "C" NOT NULL,
    task_id      text COLLATE "C" NOT NULL,
    request_key  text NOT NULL,
    -- The MCP input request and the caller's answer, as their exact JSON text.
    request_json text NOT NULL,
    asked_at     timestamptz NOT NULL,
    answer_json  text,
    answered_at  timestamptz,
    PRIMARY KEY (tenant_id, task_id, request_key),
    FOREIGN KEY (tenant_id, task_id) REFERENCES tasks (tenant_id, task_id) ON DELETE CASCADE,
    CONSTRAINT task_input_requests_answered_with_time
        CHECK ((answer_json IS NULL) = (answered_at IS NULL))
);

ALTER TABLE tasks ADD COLUMN parked_at timestamptz;
