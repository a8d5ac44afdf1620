//! A service with the dashboard on (API keys, PostgreSQL, no workers) and a
//! browser-like client: one cookie, no redirects followed.

use std::net::SocketAddr;
use std::sync::Arc;

use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use reqwest::redirect::Policy;
use taskstore::auth::AuthMethod;
use taskstore::dashboard::DashboardSettings;
use taskstore::domain::{
    JsonObject, NewTask, RequestId, Role, Scope, Task, TaskId, TenantId, TtlRequest,
};
use taskstore::grpc::InputLimits;
use taskstore::settings::ServiceSettings;
use taskstore::startup::{Backends, Service};
use taskstore::store::keys::{KeyStore, PgKeys};
use taskstore::store::postgres::PgTaskStore;
use taskstore::store::{StoreConfig, TaskStore};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::common;

pub struct Board {
    pub addr: SocketAddr,
    pub keys: Arc<dyn KeyStore>,
    pub store: Arc<PgTaskStore>,
    _stop: DropGuard,
}

impl Board {
    pub async fn open() -> Self {
        Self::with(|_| {}).await
    }

    pub async fn with(adjust: impl FnOnce(&mut DashboardSettings)) -> Self {
        Self::configured(adjust, |settings| settings).await
    }

    /// As [`Board::with`], the service's settings adjusted by `service`.
    pub async fn configured(
        adjust: impl FnOnce(&mut DashboardSettings),
        service: impl FnOnce(ServiceSettings) -> ServiceSettings,
    ) -> Self {
        Self::on_pool(common::migrated_pool().await, adjust, service).await
    }

    /// Another replica of this dashboard's service, on the same database.
    pub async fn replica(&self) -> Self {
        Self::on_pool(self.store.pool().clone(), |_| {}, |settings| settings).await
    }

    async fn on_pool(
        pool: sqlx::PgPool,
        adjust: impl FnOnce(&mut DashboardSettings),
        service: impl FnOnce(ServiceSettings) -> ServiceSettings,
    ) -> Self {
        let config = StoreConfig::default();
        let store = Arc::new(
            PgTaskStore::open(pool.clone(), config.clone())
                .await
                .expect("open the store"),
        );
        let keys: Arc<dyn KeyStore> = Arc::new(PgKeys::new(pool));
        let backends = Backends::from_store(store.clone(), "postgres", "a test schema".into())
            .with_keys(keys.clone());
        let mut dashboard = DashboardSettings::on("127.0.0.1:0");
        dashboard.secure_cookie = false;
        adjust(&mut dashboard);
        let settings = ServiceSettings {
            auth: vec![AuthMethod::ApiKeys],
            dashboard: Some(dashboard),
            ..ServiceSettings::bare(config, InputLimits::default())
        };
        let service = Service::build(service(settings), backends)
            .await
            .expect("builds");
        let addr = service.dashboard_addr().expect("the dashboard is on");
        let stop = CancellationToken::new();
        let token = stop.clone();
        tokio::spawn(async move { service.run_until_stopped(token).await.expect("runs") });
        Self {
            addr,
            keys,
            store,
            _stop: stop.drop_guard(),
        }
    }

    pub async fn key(&self, tenant: &str, role: Role) -> String {
        common::issue_key(self.keys.as_ref(), tenant, role).await
    }

    /// A task of `tenant` that its caller runs (nothing dispatched).
    pub async fn task(&self, tenant: &str) -> Task {
        self.task_named(tenant, None).await
    }

    /// As [`Board::task`], with the id `id` when given.
    pub async fn task_named(&self, tenant: &str, id: Option<&str>) -> Task {
        let request = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"x":1}}}"#;
        self.store
            .create_task(
                &scope(tenant),
                NewTask {
                    idempotency_key: None,
                    task_id: id.map(|id| TaskId::parse(id).expect("id")),
                    ttl: TtlRequest::ServerDefault,
                    poll_interval: None,
                    request_id: RequestId::parse("1").expect("id"),
                    request: JsonObject::parse(request).expect("request"),
                    dispatch: None,
                    trace_context: None,
                },
            )
            .await
            .expect("create")
    }

    pub async fn status_of(&self, tenant: &str, id: &TaskId) -> String {
        let task = self.store.get_task(&scope(tenant), id).await.expect("get");
        task.status.as_str().to_owned()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// A browser that logged in with `key`.
    pub async fn browser(&self, key: &str) -> Browser {
        self.logged_in(&format!("api_key={key}")).await
    }

    /// A browser that logged in with `key`, a key of every tenant, acting
    /// in `tenant`.
    pub async fn browser_in(&self, key: &str, tenant: &str) -> Browser {
        self.logged_in(&format!("api_key={key}&tenant={tenant}"))
            .await
    }

    async fn logged_in(&self, form: &str) -> Browser {
        let browser = Browser::new(self);
        let response = browser.post("/login", form).await;
        assert_eq!(response.status(), 303, "login with a valid key");
        let cookie = response
            .headers()
            .get(SET_COOKIE)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split(';').next())
            .expect("a session cookie")
            .to_owned();
        Browser {
            cookie: Some(cookie),
            ..browser
        }
    }
}

pub fn scope(tenant: &str) -> Scope {
    Scope {
        tenant: TenantId::parse(tenant).expect("tenant"),
        session: None,
    }
}

#[derive(Clone)]
pub struct Browser {
    base: String,
    http: reqwest::Client,
    pub cookie: Option<String>,
}

impl Browser {
    /// A browser on `board` presenting `cookie` (a raw `name=value`).
    pub fn with_cookie_of(board: &Board, cookie: String) -> Self {
        Self {
            cookie: Some(cookie),
            ..Self::new(board)
        }
    }

    pub fn new(board: &Board) -> Self {
        Self {
            base: board.url(""),
            http: reqwest::Client::builder()
                .redirect(Policy::none())
                .build()
                .expect("client"),
            cookie: None,
        }
    }

    fn with_cookie(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.cookie {
            Some(cookie) => request.header(COOKIE, cookie),
            None => request,
        }
    }

    /// The status of a GET of `path`, or `None` when no answer came (the
    /// connection refused or reset).
    pub async fn try_get(&self, path: &str) -> Option<u16> {
        let client = reqwest::Client::builder()
            .redirect(Policy::none())
            .pool_max_idle_per_host(0)
            .build()
            .expect("client");
        let request = client.get(format!("{}{path}", self.base));
        let request = self.with_cookie(request);
        request.send().await.ok().map(|r| r.status().as_u16())
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.with_cookie(self.http.get(format!("{}{path}", self.base)))
            .send()
            .await
            .expect("GET")
    }

    /// A same-origin form post, as a browser sends it.
    pub async fn post(&self, path: &str, form: &str) -> reqwest::Response {
        self.post_with(path, form, &[("sec-fetch-site", "same-origin")])
            .await
    }

    pub async fn post_with(
        &self,
        path: &str,
        form: &str,
        headers: &[(&str, &str)],
    ) -> reqwest::Response {
        let mut request = self
            .with_cookie(self.http.post(format!("{}{path}", self.base)))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form.to_owned());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.expect("POST")
    }

    pub async fn text(&self, path: &str) -> (u16, String) {
        let response = self.get(path).await;
        let status = response.status().as_u16();
        (status, response.text().await.expect("body"))
    }
}

/// Where a redirect goes.
pub fn location(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(LOCATION)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_owned()
}
