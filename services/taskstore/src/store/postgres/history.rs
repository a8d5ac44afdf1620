//! The attempt history (`domain::execution::history`) in PostgreSQL's
//! statements: the `attempt_history` column (migration 0014) is rewritten
//! by the UPDATE that already changes the row, with these expressions, so
//! recording costs no statement and no round trip. They restate the domain's
//! rule: append and keep the newest `MAX_ATTEMPT_RECORDS` (20, counting the
//! dropped), close the open record, cut messages to `MAX_END_MESSAGE_CHARS`
//! (200); the tests below and the conformance suite check that they agree.

/// (The worker and the kind are cast to text: inside `jsonb_build_object`
/// a parameter's type could not be inferred, and the statement check
/// prepares each statement without its values.)
///
/// `$h` (the history, a jsonb expression, NULL when empty) with a record of
/// attempt `$attempt` run by `$worker` (SQL expressions) started now, the
/// oldest dropped and counted beyond 20 records.
macro_rules! history_started {
    ($h:literal, $attempt:literal, $worker:literal) => {
        concat!(
            "jsonb_build_object('dropped', COALESCE((",
            $h,
            ")->'dropped', '0')::bigint",
            " + CASE WHEN jsonb_array_length(COALESCE((",
            $h,
            ")->'records', '[]')) >= 20 THEN 1 ELSE 0 END,",
            " 'records', CASE WHEN jsonb_array_length(COALESCE((",
            $h,
            ")->'records', '[]')) >= 20 THEN ((",
            $h,
            ")->'records') - 0 ELSE COALESCE((",
            $h,
            ")->'records', '[]') END",
            " || jsonb_build_array(jsonb_build_object('attempt', ",
            $attempt,
            ", 'worker', (",
            $worker,
            ")::text, 'startedAt', now())))"
        )
    };
}
pub(super) use history_started;

/// `$h` with its open record (the last, when it has no `endedAt`) ended now
/// as `$kind` saying `$message` (SQL text expressions; a NULL message is
/// left out); unchanged when no attempt is open or there is no history.
macro_rules! history_ended {
    ($h:literal, $kind:literal, $message:literal) => {
        concat!(
            "CASE WHEN jsonb_typeof((",
            $h,
            ")->'records'->-1) = 'object' AND NOT ((",
            $h,
            ")->'records'->-1 ? 'endedAt')",
            " THEN jsonb_set(",
            $h,
            ", '{records,-1}', ((",
            $h,
            ")->'records'->-1) || jsonb_build_object('endedAt', now(), 'end',",
            " jsonb_strip_nulls(jsonb_build_object('kind', (",
            $kind,
            ")::text, 'message', left(",
            $message,
            ", 200)))))",
            " ELSE ",
            $h,
            " END"
        )
    };
}
pub(super) use history_ended;

#[cfg(test)]
mod tests {
    use crate::domain::{MAX_ATTEMPT_RECORDS, MAX_END_MESSAGE_CHARS};

    /// The SQL restates the domain's constants; this fails when one of them
    /// changes without the other. (The conformance suite checks the
    /// behaviour on a database: `attempts::the_newest_attempts_are_kept`.)
    #[test]
    fn the_statements_use_the_domains_cap_and_message_length() {
        let started = history_started!("h", "1", "'w'");
        assert_eq!(
            started
                .matches(&format!(">= {MAX_ATTEMPT_RECORDS} "))
                .count(),
            2,
            "{started}"
        );
        let ended = history_ended!("h", "'k'", "m");
        assert!(
            ended.contains(&format!("left(m, {MAX_END_MESSAGE_CHARS})")),
            "{ended}"
        );
    }
}
