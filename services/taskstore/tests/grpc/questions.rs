//! Hostile questions and answers: malformed keys and requests, answers
//! that are not objects or are too large, too many of them: each is
//! INVALID_ARGUMENT naming the field, and changes nothing.

use super::*;

#[tokio::test]
async fn hostile_questions_and_answers_are_refused_and_change_nothing() {
    let (mut store, channel, _) = server(SMALL_LIMITS).await;
    let id = store
        .create_task(dispatch_request())
        .await
        .expect("create")
        .into_inner()
        .task_id;
    let mut execution = pb::task_execution_client::TaskExecutionClient::new(channel);
    let lease = execution
        .claim_task(pb::ClaimTaskRequest {
            task_id: id.clone(),
            generation: 1,
            worker_id: "w".into(),
            tenant_id: String::new(),
            ..Default::default()
        })
        .await
        .expect("claim")
        .into_inner()
        .lease_token;
    let ask = |key: &str, request: &str| pb::AskQuestionRequest {
        task_id: id.clone(),
        lease_token: lease.clone(),
        tenant_id: String::new(),
        key: key.into(),
        request_json: request.into(),
    };
    let elicit = r#"{"method":"elicitation/create","params":{"message":"?"}}"#;
    let huge = format!(
        r#"{{"method":"elicitation/create","params":{{"message":"{}"}}}}"#,
        "x".repeat(70 * 1024)
    );
    for (request, what) in [
        (ask("", elicit), "empty key"),
        (ask(&"k".repeat(300), elicit), "huge key"),
        (ask("a\u{7}b", elicit), "control character in the key"),
        (ask("k", "not json"), "not JSON"),
        (ask("k", "[1]"), "not an object"),
        (
            ask("k", r#"{"method":"tools/call","params":{}}"#),
            "not an input request",
        ),
        (
            ask("k", r#"{"method":"elicitation/create","params":{}}"#),
            "no message",
        ),
        (
            ask("k", r#"{"method":"roots/list","id":1}"#),
            "an id in the request",
        ),
        (ask("k", &huge), "a huge request"),
    ] {
        let status = execution.ask_question(request).await.expect_err(what);
        assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
        assert!(!status.message().is_empty(), "{what}: says why");
    }
    let answer = |answers: Vec<(String, String)>| pb::AnswerInputRequestsRequest {
        task_id: id.clone(),
        session_id: None,
        answers_json: answers.into_iter().collect(),
    };
    let accept = r#"{"action":"accept"}"#.to_owned();
    let many: Vec<(String, String)> = (0..101)
        .map(|n| (format!("k{n}"), accept.clone()))
        .collect();
    for (request, what) in [
        (answer(vec![]), "no answers"),
        (answer(many), "too many answers"),
        (answer(vec![(String::new(), accept.clone())]), "empty key"),
        (
            answer(vec![("k".into(), "[1]".into())]),
            "an answer that is not an object",
        ),
        (answer(vec![("k".into(), "{".into())]), "not JSON"),
        (
            answer(vec![(
                "k".into(),
                format!(r#"{{"pad":"{}"}}"#, "x".repeat(2000)),
            )]),
            "an answer over the JSON limit",
        ),
    ] {
        let status = store.answer_input_requests(request).await.expect_err(what);
        assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
    }
    let task = store
        .get_task(pb::GetTaskRequest {
            task_id: id.clone(),
            session_id: None,
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(task.status(), pb::TaskStatus::Working, "nothing was asked");
    let listed = store
        .list_input_requests(pb::ListInputRequestsRequest {
            task_id: id.clone(),
            session_id: None,
        })
        .await
        .expect("list")
        .into_inner();
    assert!(listed.input_requests.is_empty());
    // A key reused for another request is refused with its kind.
    execution.ask_question(ask("k", elicit)).await.expect("ask");
    let reused = execution
        .ask_question(ask("k", r#"{"method":"roots/list"}"#))
        .await
        .expect_err("another request under the same key");
    assert_eq!(reused.code(), Code::FailedPrecondition);
    assert!(reused.message().contains("already used"), "{reused:?}");
}
