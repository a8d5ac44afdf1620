//! Every parser at the edge, fed arbitrary input: it never panics, accepts
//! exactly what its rule says, and what it accepts round-trips. Cursors
//! and keys cannot be forged or altered. (proptest: 512 cases per property;
//! `PROPTEST_CASES` raises it.)

use proptest::prelude::*;
use taskstore::auth::AuthFailure;
use taskstore::auth::api_keys::{self, ApiKeys};
use taskstore::domain::{
    CursorCodec, CursorPosition, JsonObject, Reach, RequestId, Role, Scope, SessionId, TaskFilter,
    TaskId, TenantId, TraceContext, Ttl,
};
use taskstore::durations::parse_duration;
use taskstore::store::keys::{KeyStore, MemoryKeys};
use taskstore_proto::credentials::BearerToken;
use taskstore_proto::endpoint::parse_endpoint;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(512),
        ..ProptestConfig::default()
    }
}

/// Strings a hostile caller might send: any Unicode, control characters,
/// near-miss shapes and very long ones.
fn hostile() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ -~]{0,140}",
        "[\\x00-\\x1f\\x7f ]{0,8}",
        "tsk_[a-z2-7]{10,14}_[A-Za-z0-9_-]{40,46}",
        "[0-9]{0,20}(ms|s|m|h|d|x)?",
        "00-[0-9a-f]{32}-[0-9a-f]{16}-0[0-9]",
        ".{0,600}",
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn task_ids_follow_their_rule(raw in hostile()) {
        let expected = !raw.is_empty() && raw.len() <= TaskId::MAX_LEN && raw.bytes().all(|b| b.is_ascii_graphic());
        match TaskId::parse(&raw) {
            Ok(id) => {
                prop_assert!(expected);
                prop_assert_eq!(id.as_str(), raw.as_str());
            }
            Err(_) => prop_assert!(!expected),
        }
    }

    #[test]
    fn session_ids_follow_their_rule(raw in hostile(), limit in 1usize..300) {
        let expected = !raw.is_empty() && raw.len() <= limit && !raw.chars().any(char::is_control);
        prop_assert_eq!(SessionId::parse(&raw, limit).is_ok(), expected);
    }

    #[test]
    fn tenants_roles_and_reaches_never_panic(raw in prop_oneof![hostile(), Just("*".to_owned())]) {
        let tenant = TenantId::parse(&raw);
        prop_assert_eq!(tenant.is_ok(), TaskId::parse(&raw).is_ok() && raw != "*");
        match Reach::parse(&raw) {
            Ok(Reach::AllTenants) => prop_assert_eq!(raw.as_str(), "*"),
            Ok(Reach::Tenant(t)) => prop_assert_eq!(t.as_str(), raw.as_str()),
            Err(_) => prop_assert!(tenant.is_err() && raw != "*"),
        }
        if let Ok(role) = Role::parse(&raw) {
            prop_assert_eq!(role.as_str(), raw.as_str());
        }
    }

    #[test]
    fn json_payloads_are_objects_or_refused(raw in hostile()) {
        if let Ok(object) = JsonObject::parse(raw.clone()) {
            let value: serde_json::Value = serde_json::from_str(object.as_str()).expect("accepted JSON parses");
            prop_assert!(value.is_object());
        }
        let _ = RequestId::parse(raw);
    }

    #[test]
    fn json_objects_round_trip(map in proptest::collection::btree_map("[a-z]{1,8}", any::<i64>(), 0..8)) {
        let text = serde_json::to_string(&map).expect("json");
        let object = JsonObject::parse(text.clone()).expect("an object is accepted");
        prop_assert_eq!(object.as_str(), text.as_str());
    }

    #[test]
    fn durations_ttls_and_trace_contexts_never_panic(raw in hostile(), millis in any::<u64>()) {
        let _ = parse_duration(&raw);
        if let Ok(ttl) = Ttl::from_millis(millis) {
            prop_assert_eq!(ttl.as_millis(), millis);
        }
        if let Some(trace) = TraceContext::parse(&raw) {
            prop_assert_eq!(trace.as_str(), raw.as_str());
            prop_assert!(raw.len() <= 256);
        }
    }

    #[test]
    fn endpoints_and_tokens_never_panic(raw in hostile()) {
        let _ = parse_endpoint(&raw);
        if BearerToken::new(&raw).is_ok() {
            prop_assert!(!raw.is_empty() && raw.bytes().all(|b| b.is_ascii_graphic()));
        }
    }

    #[test]
    fn cursors_cannot_be_forged_or_altered(
        raw in hostile(),
        flip_at in any::<prop::sample::Index>(),
        seconds in 0i64..4_000_000_000,
    ) {
        let codec = CursorCodec::new([7; 32]);
        let scope = Scope::tenant_wide();
        let filter = TaskFilter::default();
        prop_assert!(codec.decode(&scope, &filter, &raw).is_err(), "a forged cursor was accepted");
        let position = CursorPosition {
            created_at: chrono::DateTime::from_timestamp(seconds, 0).expect("time"),
            task_id: TaskId::parse("t-1").expect("id"),
        };
        let cursor = codec.encode(&scope, &filter, &position);
        prop_assert_eq!(codec.decode(&scope, &filter, &cursor).ok(), Some(position));
        let mut altered: Vec<char> = cursor.chars().collect();
        let at = flip_at.index(altered.len());
        altered[at] = if altered[at] == 'A' { 'B' } else { 'A' };
        let altered: String = altered.into_iter().collect();
        prop_assert!(codec.decode(&scope, &filter, &altered).is_err(), "an altered cursor was accepted");
        let other_tenant = Scope { tenant: TenantId::parse("other").expect("tenant"), session: None };
        prop_assert!(codec.decode(&other_tenant, &filter, &cursor).is_err(), "another tenant's cursor was accepted");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..config() })]

    #[test]
    fn no_token_but_an_issued_key_authenticates(raw in hostile()) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        runtime.block_on(async {
            let keys = std::sync::Arc::new(MemoryKeys::default());
            let issued = api_keys::issue(Reach::AllTenants, Role::Admin, "").expect("issue");
            keys.insert_key(&issued.stored).await.expect("insert");
            let checker = ApiKeys::new(keys);
            prop_assert!(checker.authenticate(&issued.key).await.is_ok());
            if raw != issued.key {
                let refused = checker.authenticate(&raw).await.err();
                prop_assert!(matches!(refused, Some(AuthFailure::Invalid(_))), "{:?}", refused);
            }
            Ok(())
        })?;
    }
}
