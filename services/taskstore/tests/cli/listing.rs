//! `list`: paging through the printed cursor or command, filters, and
//! columns that line up.

use crate::commands::{create_echo, quiet_service, task_id};
use crate::harness::client;

/// 250 tasks, a page of 100 at a time, followed through the printed cursor
/// (JSON) and through the printed command (text).
#[tokio::test]
async fn list_pages_through_250_tasks_both_ways() {
    let service = quiet_service().await;
    let store = taskstore::grpc::GrpcTaskStore::connect(&service.endpoint)
        .await
        .expect("connect");
    let mut created = Vec::new();
    for n in 0..250 {
        let task = taskstore::store::TaskStore::create_task(
            &store,
            &taskstore::domain::Scope::tenant_wide(),
            taskstore::domain::NewTask {
                idempotency_key: None,
                task_id: Some(taskstore::domain::TaskId::parse(&format!("t{n:03}")).expect("id")),
                ttl: Default::default(),
                poll_interval: None,
                request_id: taskstore::domain::RequestId::parse("1").expect("id"),
                request: taskstore::domain::JsonObject::parse(
                    r#"{"method":"tools/call","params":{"name":"echo"}}"#,
                )
                .expect("request"),
                dispatch: None,
                trace_context: None,
            },
        )
        .await
        .expect("create");
        created.push(task.task_id.to_string());
    }

    // JSON: follow nextCursor.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut args = vec!["list", "--json"];
        if let Some(cursor) = &cursor {
            args.extend(["--cursor", cursor]);
        }
        let page = client(&service, &args).json();
        pages += 1;
        let tasks = page["tasks"].as_array().expect("tasks");
        assert!(tasks.len() <= 100);
        seen.extend(
            tasks
                .iter()
                .map(|t| t["taskId"].as_str().expect("id").to_owned()),
        );
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, created, "every task once, oldest first");

    // Text: run the command the last line prints.
    let mut seen = Vec::new();
    let mut args = vec!["list".to_owned()];
    loop {
        let borrowed: Vec<&str> = args.iter().map(String::as_str).collect();
        let page = client(&service, &borrowed);
        assert!(page.status.success(), "{}", page.stderr);
        let mut lines: Vec<&str> = page.stdout.lines().collect();
        assert!(lines[0].starts_with("TASK ID"), "a header: {}", lines[0]);
        let next = match lines.last() {
            Some(last) if last.starts_with("more tasks: ") => {
                let command = last.trim_start_matches("more tasks: ").to_owned();
                lines.pop();
                Some(command)
            }
            _ => None,
        };
        seen.extend(
            lines[1..]
                .iter()
                .map(|l| l.split_whitespace().next().expect("id").to_owned()),
        );
        match next {
            Some(command) => {
                let words: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
                assert_eq!(&words[..2], ["taskstore", "list"], "{command}");
                args = words[1..].to_vec();
            }
            None => break,
        }
    }
    assert_eq!(seen, created);

    let everything = client(&service, &["list", "--all"]);
    assert_eq!(
        everything.stdout.lines().count(),
        251,
        "a header and 250 rows"
    );
    assert!(!everything.stdout.contains("more tasks"));
}

#[tokio::test]
async fn list_filters_by_status_and_tool_in_aligned_columns() {
    let service = quiet_service().await;
    let echo = task_id(&create_echo(&service, &["--json"]));
    let long_id = "a-rather-long-caller-chosen-task-id-0123456789";
    let sleep = client(
        &service,
        &["create", "--tool", "sleep", "--task-id", long_id, "--json"],
    );
    assert!(sleep.status.success(), "{}", sleep.stderr);
    let no_tool = task_id(&client(
        &service,
        &["create", "--request", r#"{"method":"ping"}"#, "--json"],
    ));
    client(
        &service,
        &[
            "update",
            &echo,
            "--status",
            "input_required",
            "--message",
            "which?",
        ],
    );
    client(&service, &["cancel", &no_tool]);

    let table = client(&service, &["list"]);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", table.stdout);
    let header = lines[0];
    for column in ["TASK ID", "STATUS", "TOOL", "CREATED", "MESSAGE"] {
        assert!(header.contains(column), "{header}");
    }
    let at = |column: &str| header.find(column).expect("column");
    for line in &lines[1..] {
        // Each column starts where its header does (values are padded).
        for column in ["STATUS", "TOOL", "CREATED"] {
            let start = at(column);
            assert!(
                line.as_bytes()[start - 1] == b' ' && line.as_bytes()[start] != b' ',
                "{column} misaligned in {line:?} under {header:?}"
            );
        }
    }
    assert!(
        table.stdout.contains(&format!("{long_id}  working")),
        "{}",
        table.stdout
    );
    let row = |id: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(id))
            .expect("row")
            .to_string()
    };
    assert!(row(&echo).contains(" echo ") && row(&echo).ends_with("which?"));
    assert!(row(&no_tool).contains(" - "), "no tool: {}", row(&no_tool));

    let ids = |args: &[&str]| -> Vec<String> {
        let mut args = args.to_vec();
        args.push("--json");
        client(&service, &args).json()["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .map(|t| t["taskId"].as_str().expect("id").to_owned())
            .collect()
    };
    assert_eq!(ids(&["list", "--tool", "sleep"]), [long_id]);
    assert_eq!(ids(&["list", "--status", "cancelled"]), [no_tool.as_str()]);
    assert_eq!(
        ids(&["list", "--status", "working,input_required"]),
        [echo.clone(), long_id.to_owned()]
    );
    assert_eq!(
        ids(&["list", "--status", "working", "--status", "cancelled"]).len(),
        2
    );
    assert!(ids(&["list", "--tool", "hash"]).is_empty());

    // A cursor is bound to its listing: reused with other filters it is
    // refused, and the message says what to pass.
    let page = client(&service, &["list", "--page-size", "1", "--json"]).json();
    let cursor = page["nextCursor"].as_str().expect("a next page");
    let refused = client(
        &service,
        &["list", "--status", "working", "--cursor", cursor],
    );
    assert_eq!(refused.code(), 2);
    assert!(refused.stderr.contains("cursor is malformed, was altered, or belongs to another listing: pass the cursor that `taskstore list` printed"), "{}", refused.stderr);
    let garbage = client(&service, &["list", "--cursor", "not-a-cursor"]);
    assert_eq!(garbage.code(), 2);
    assert_eq!(garbage.stderr.lines().count(), 1, "{}", garbage.stderr);
}
