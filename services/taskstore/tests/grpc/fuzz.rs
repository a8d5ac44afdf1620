//! Random and mutated protobuf bytes, sent to every RPC of a running
//! server: each call gets a well-formed gRPC status (or a valid answer when
//! the mutation happens to be a valid request), never a panic, never an
//! unexplained INTERNAL, and the server keeps serving. Bytes that do not
//! parse as the request message are INTERNAL "failed to decode Protobuf
//! message", as gRPC's status-code guide prescribes for unparseable requests.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use prost::Message as _;
use taskstore::grpc::{InputLimits, pb};
use taskstore::store::StoreConfig;
use taskstore::store::memory::MemoryTaskStore;
use tonic::Code;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;

use crate::common;

/// Mutated cases per RPC.
const CASES_PER_RPC: usize = 250;

/// Passes bytes through untouched, so that any bytes can be sent.
#[derive(Debug, Clone, Copy, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = Raw;
    type Decoder = Raw;

    fn encoder(&mut self) -> Self::Encoder {
        Raw
    }

    fn decoder(&mut self) -> Self::Decoder {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Bytes;
    type Error = tonic::Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Self::Error> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Bytes;
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Self::Error> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// xorshift64*: reproducible from the seed printed on failure.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % (n.max(1) as u64)) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// One way of breaking a valid message.
fn mutate(rng: &mut Rng, valid: &[u8]) -> Vec<u8> {
    let mut bytes = valid.to_vec();
    match rng.below(8) {
        0 => {
            for _ in 0..=rng.below(8) {
                if !bytes.is_empty() {
                    let at = rng.below(bytes.len());
                    bytes[at] ^= 1 << rng.below(8);
                }
            }
        }
        1 => bytes.truncate(rng.below(bytes.len() + 1)),
        2 => {
            let at = rng.below(bytes.len() + 1);
            let len = 1 + rng.below(16);
            let noise = rng.bytes(len);
            bytes.splice(at..at, noise);
        }
        3 => {
            let len = rng.below(300);
            bytes = rng.bytes(len);
        }
        // A field claiming a huge length.
        4 => bytes.extend_from_slice(&[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]),
        // The message twice: valid protobuf, fields merged.
        5 => bytes.extend_from_slice(valid),
        // An unknown field of every wire type.
        6 => bytes.extend_from_slice(&[
            0xf8, 0x07, 0x01, 0xfd, 0x07, 1, 2, 3, 4, 0xfa, 0x07, 0x02, b'h', b'i',
        ]),
        // A 10-byte varint that overflows.
        _ => bytes.extend_from_slice(&[
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ]),
    }
    bytes
}

/// Every RPC's path and a valid request for it.
fn valid_requests() -> Vec<(&'static str, bool, Vec<u8>)> {
    let id = || "fuzzed-task".to_owned();
    let create = pb::CreateTaskRequest {
        idempotency_key: Some("fuzzed-key".into()),
        no_expiry: false,
        poll_interval: None,
        task_id: Some(id()),
        session_id: Some("s".into()),
        ttl: Some(prost_types::Duration {
            seconds: 60,
            nanos: 0,
        }),
        request_id_json: "1".into(),
        request_json: r#"{"method":"tools/call","params":{"name":"echo"}}"#.into(),
        dispatch: Some(pb::Dispatch {
            priority: Some(3),
            start_at: None,
            start_after: Some(prost_types::Duration {
                seconds: 5,
                nanos: 0,
            }),
            tool: Some("echo".into()),
            max_attempts: Some(2),
        }),
    };
    let store = "/mcp.tasks.v1.TaskStore/";
    let execution = "/mcp.tasks.v1.TaskExecution/";
    let list = pb::ListTasksRequest {
        cursor: Some("abc".into()),
        page_size: Some(5),
        session_id: Some("s".into()),
        statuses: vec![1, 2],
        tool: Some("echo".into()),
    };
    vec![
        (leak(store, "CreateTask"), false, create.encode_to_vec()),
        (
            leak(store, "GetTask"),
            false,
            pb::GetTaskRequest {
                task_id: id(),
                session_id: None,
            }
            .encode_to_vec(),
        ),
        (
            leak(store, "UpdateTaskStatus"),
            false,
            pb::UpdateTaskStatusRequest {
                task_id: id(),
                status: 2,
                status_message: Some("m".into()),
                session_id: None,
                lease_token: Some("l".into()),
            }
            .encode_to_vec(),
        ),
        (
            leak(store, "StoreTaskResult"),
            false,
            pb::StoreTaskResultRequest {
                task_id: id(),
                status: 3,
                result_json: "{}".into(),
                session_id: None,
                status_message: None,
                lease_token: None,
            }
            .encode_to_vec(),
        ),
        (
            leak(store, "GetTaskResult"),
            false,
            pb::GetTaskResultRequest {
                task_id: id(),
                session_id: None,
                wait: false,
            }
            .encode_to_vec(),
        ),
        (leak(store, "ListTasks"), false, list.encode_to_vec()),
        (
            leak(store, "WatchTask"),
            true,
            pb::WatchTaskRequest {
                lease_token: None,
                task_id: id(),
                session_id: None,
            }
            .encode_to_vec(),
        ),
        (
            leak(store, "HoldTask"),
            false,
            pb::HoldTaskRequest {
                task_id: id(),
                session_id: Some("s".into()),
                holder: "fuzz".into(),
                lease_token: "token".into(),
            }
            .encode_to_vec(),
        ),
        (
            leak(store, "WatchTasks"),
            true,
            pb::WatchTasksRequest {
                session_id: Some("s".into()),
            }
            .encode_to_vec(),
        ),
        (
            leak(store, "CancelTask"),
            false,
            pb::CancelTaskRequest {
                task_id: id(),
                session_id: None,
            }
            .encode_to_vec(),
        ),
        (
            leak(store, "DeleteTask"),
            false,
            pb::DeleteTaskRequest {
                task_id: id(),
                session_id: None,
            }
            .encode_to_vec(),
        ),
        (
            leak(store, "CleanupExpired"),
            false,
            pb::CleanupExpiredRequest {}.encode_to_vec(),
        ),
        (
            leak(store, "ListTools"),
            false,
            pb::ListToolsRequest {}.encode_to_vec(),
        ),
        (
            leak(store, "ListInputRequests"),
            false,
            pb::ListInputRequestsRequest {
                task_id: id(),
                session_id: Some("s".into()),
            }
            .encode_to_vec(),
        ),
        (
            leak(store, "AnswerInputRequests"),
            false,
            pb::AnswerInputRequestsRequest {
                task_id: id(),
                session_id: Some("s".into()),
                answers_json: [("k".to_owned(), r#"{"action":"accept"}"#.to_owned())].into(),
            }
            .encode_to_vec(),
        ),
        (
            leak(execution, "AskQuestion"),
            false,
            pb::AskQuestionRequest {
                task_id: id(),
                lease_token: "l".into(),
                tenant_id: String::new(),
                key: "k".into(),
                request_json: r#"{"method":"elicitation/create","params":{"message":"?"}}"#.into(),
            }
            .encode_to_vec(),
        ),
        (
            leak(execution, "ClaimTask"),
            false,
            pb::ClaimTaskRequest {
                task_id: id(),
                generation: 1,
                worker_id: "w".into(),
                tenant_id: String::new(),
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            leak(execution, "RenewLease"),
            false,
            pb::RenewLeaseRequest {
                task_id: id(),
                lease_token: "l".into(),
                tenant_id: String::new(),
            }
            .encode_to_vec(),
        ),
        (
            leak(execution, "ReleaseTask"),
            false,
            pb::ReleaseTaskRequest {
                // Mutations reach a back-off's time too.
                back_off_until: Some(prost_types::Timestamp {
                    seconds: 1_900_000_000,
                    nanos: 0,
                }),
                task_id: id(),
                lease_token: "l".into(),
                reason: 4,
                message: "m".into(),
                tenant_id: String::new(),
            }
            .encode_to_vec(),
        ),
        (
            leak(execution, "Heartbeat"),
            false,
            pb::HeartbeatRequest {
                consuming: None,
                worker_id: "w".into(),
                tools: vec!["echo".into()],
                slots: 1,
                busy: 0,
                stopping: false,
                // Mutations reach every field of a declared retry policy,
                // concurrency limit, rate and fairness key.
                descriptions: vec![pb::ToolDescription {
                    concurrency: Some(pb::ConcurrencyLimit {
                        max: 3,
                        key: "tenant,arguments.customer.id".into(),
                    }),
                    rate: Some(pb::RateLimit {
                        starts: 20,
                        per: Some(prost_types::Duration {
                            seconds: 1,
                            nanos: 0,
                        }),
                        key: "tenant".into(),
                    }),
                    fairness_key: "arguments.customer.id".into(),
                    name: "echo".into(),
                    title: String::new(),
                    description: String::new(),
                    input_schema_json: String::new(),
                    task_support: 0,
                    retry: Some(pb::RetryPolicy {
                        max_attempts: Some(4),
                        backoff_base: Some(prost_types::Duration {
                            seconds: 1,
                            nanos: 0,
                        }),
                        backoff_max: Some(prost_types::Duration {
                            seconds: 60,
                            nanos: 0,
                        }),
                        retry_errors: Some(true),
                        retry_lost_workers: Some(false),
                    }),
                }],
            }
            .encode_to_vec(),
        ),
        (
            "/mcp.tasks.v1.Operations/GetStatus",
            false,
            pb::GetStatusRequest {}.encode_to_vec(),
        ),
    ]
}

fn leak(service: &str, method: &str) -> &'static str {
    Box::leak(format!("{service}{method}").into_boxed_str())
}

/// Whether a status is one a hostile request may get.
fn acceptable(status: &tonic::Status) -> bool {
    match status.code() {
        Code::Internal => {
            status
                .message()
                .starts_with("failed to decode Protobuf message")
                || status.message() == "Unexpected EOF decoding stream."
        }
        Code::Unknown | Code::DataLoss | Code::Unimplemented => false,
        _ => true,
    }
}

#[tokio::test]
async fn random_and_mutated_protobuf_gets_a_status_on_every_rpc() {
    let seed = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let mut bytes = [0u8; 8];
            getrandom::getrandom(&mut bytes).expect("randomness");
            u64::from_le_bytes(bytes) | 1
        });
    let mut rng = Rng(seed);
    let store = Arc::new(MemoryTaskStore::new(StoreConfig::default()).expect("store"));
    let limits = InputLimits {
        max_message_bytes: 64 * 1024,
        ..InputLimits::default()
    };
    let (addr, _shutdown, _handle) = common::spawn_server(store, limits).await;
    let channel = common::grpc_channel(addr).await;
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    let mut cases = 0;
    for (path, streaming, valid) in valid_requests() {
        for case in 0..CASES_PER_RPC {
            let body = if case == 0 {
                valid.clone()
            } else {
                mutate(&mut rng, &valid)
            };
            grpc.ready().await.expect("the server is still there");
            let route = PathAndQuery::from_static(path);
            let request = tonic::Request::new(Bytes::from(body.clone()));
            let outcome = if streaming {
                match grpc.server_streaming(request, route, Raw).await {
                    Ok(response) => {
                        let mut stream = response.into_inner();
                        match tokio::time::timeout(Duration::from_millis(200), stream.message())
                            .await
                        {
                            Ok(Err(status)) => Err(status),
                            _ => Ok(()),
                        }
                    }
                    Err(status) => Err(status),
                }
            } else {
                grpc.unary(request, route, Raw).await.map(|_| ())
            };
            if let Err(status) = outcome {
                assert!(
                    acceptable(&status),
                    "seed {seed}: {path} with {body:02x?}: {status:?}"
                );
            }
            cases += 1;
        }
    }
    // Still serving, and still right.
    let mut client = pb::task_store_client::TaskStoreClient::new(channel);
    let created = client
        .create_task(crate::create_request())
        .await
        .expect("a valid request after the storm")
        .into_inner();
    assert!(!created.task_id.is_empty());
    eprintln!(
        "fuzz: {cases} cases over {} RPCs, seed {seed}",
        valid_requests().len()
    );
    assert_eq!(cases, CASES_PER_RPC * valid_requests().len());
}
