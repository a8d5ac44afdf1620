//! One worker conformance suite, run on the Rust, Python and TypeScript
//! workers (`docs/worker-conformance.md`): each case starts a real service
//! (PostgreSQL, RabbitMQ) and worker processes of the language under test,
//! and talks only to the service and to the processes.
//!
//! The cases are written once (`cases.rs`, `faults.rs`) and instantiated
//! per language below: `rust::a_result`, `python::a_result`, … A language
//! whose worker command is missing fails every case, naming the command and
//! how to build it (`worker/tests/conformance/build-workers`); none is
//! skipped.

#[path = "../common/mod.rs"]
mod common;

mod cases;
mod faults;
mod fleet;
mod setup;

/// The cases, as tests of one language.
macro_rules! conformance {
    ($module:ident, $language:expr) => {
        mod $module {
            use crate::fleet::Language;

            const LANGUAGE: Language = $language;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_result() {
                crate::cases::a_result(LANGUAGE).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_tool_error() {
                crate::cases::a_tool_error(LANGUAGE).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_retryable_failure_retried() {
                crate::cases::a_retryable_failure_retried(LANGUAGE).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_back_off_waits_and_spends_no_attempt() {
                crate::cases::a_back_off_waits_and_spends_no_attempt(LANGUAGE).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_poison_job() {
                crate::faults::a_poison_job(LANGUAGE).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn cancellation_within_a_second() {
                crate::cases::cancellation_within_a_second(LANGUAGE).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn progress_seen_by_a_watcher() {
                crate::cases::progress_seen_by_a_watcher(LANGUAGE).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_question_answered() {
                crate::cases::a_question_answered(LANGUAGE).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_stale_lease_fenced() {
                crate::faults::a_stale_lease_fenced(LANGUAGE).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_graceful_stop_gives_the_task_back() {
                crate::faults::a_graceful_stop_gives_the_task_back(LANGUAGE).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tools_appear() {
                crate::cases::tools_appear(LANGUAGE).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_misconfigured_worker_says_so() {
                crate::setup::a_misconfigured_worker_says_so(LANGUAGE).await;
            }
        }
    };
}

conformance!(rust, Language::Rust);
conformance!(python, Language::Python);
conformance!(typescript, Language::TypeScript);
