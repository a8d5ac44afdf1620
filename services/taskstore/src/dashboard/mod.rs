//! The web dashboard (issue 26): a tenant's tasks, questions, tools and
//! workers, live, in the browser. Served by the binary on a port of its own
//! (`--dashboard-listen`), server-rendered HTML with one small vendored
//! script (`assets/`), working without JavaScript (links and forms).
//!
//! It is an edge like gRPC and `/mcp`: it parses each request at its border
//! (`params`), resolves the browser's session to a [`Caller`] through the
//! same key store (`viewer`), asks the same rights table (`domain::access`)
//! for the [`Operation`] each route amounts to, and calls the same store
//! traits. The tenant always comes from the credential, never from the URL.
//!
//! [`Caller`]: crate::domain::Caller
//! [`Operation`]: crate::domain::Operation

mod account;
mod actions;
mod assets;
mod body_gate;
mod dispatch_samples;
mod gate;
mod guard;
mod identify;
mod live;
mod pages;
mod params;
mod refused;
mod render;
mod routes;
mod session;
mod settings;
mod sign_in;
mod viewer;

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use crate::auth::oidc::{ClientSecret, OidcSettings};
pub use settings::DashboardSettings;

use self::session::SessionSealer;
use crate::auth::Authenticator;
use crate::auth::oidc::OidcClient;
use crate::domain::InputLimits;
use crate::edge::{Admissions, ConnectionLimits, serve_until_stopped};
use crate::store::TaskStore;
use crate::store::insights::TaskInsights;
use crate::store::keys::KeyStore;
use crate::store::operations::OperationsStore;

/// What the dashboard is built from.
pub struct DashboardParts {
    pub store: Arc<dyn TaskStore>,
    pub insights: Arc<dyn TaskInsights>,
    pub operations: Arc<dyn OperationsStore>,
    pub authenticator: Authenticator,
    pub admissions: Arc<Admissions>,
    pub limits: InputLimits,
    /// Where logouts are kept, for every replica to refuse them.
    pub keys: Arc<dyn KeyStore>,
}

impl std::fmt::Debug for DashboardParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DashboardParts")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// Everything a request needs, shared by all requests.
pub(crate) struct Board {
    pub store: Arc<dyn TaskStore>,
    pub insights: Arc<dyn TaskInsights>,
    pub operations: Arc<dyn OperationsStore>,
    pub authenticator: Authenticator,
    /// The same per-tenant admission as every edge: the create rate, and
    /// the streams kept open (the live updates).
    pub admissions: Arc<Admissions>,
    pub limits: InputLimits,
    /// The sessions ended by a logout (with the API keys).
    pub keys: Arc<dyn KeyStore>,
    pub sessions: SessionSealer,
    /// Seals the short-lived cookie of a single sign-on in progress (its
    /// own key: neither cookie opens as the other).
    pub sign_ins: SessionSealer,
    /// The issuer's client, when single sign-on is configured.
    pub oidc: Option<OidcClient>,
    pub settings: DashboardSettings,
    /// Ends the live streams when the dashboard stops.
    pub shutdown: CancellationToken,
    /// The last hour of each tool's dispatch, for its page's chart.
    pub dispatch_samples: Arc<dispatch_samples::DispatchSamples>,
}

/// The dashboard, built and ready to serve.
#[derive(Clone)]
pub struct Dashboard {
    board: Arc<Board>,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard")
            .field("settings", &self.board.settings)
            .finish_non_exhaustive()
    }
}

impl Dashboard {
    /// The dashboard of `parts`; refused when single sign-on is configured
    /// without an issuer to sign on with (`--auth jwt`).
    pub fn new(parts: DashboardParts, settings: DashboardSettings) -> Result<Self, String> {
        let sessions = SessionSealer::new(parts.operations.shared_key("dashboard-session"));
        let sign_ins = SessionSealer::new(parts.operations.shared_key("dashboard-sign-in"));
        let oidc = match (&settings.oidc, parts.authenticator.jwt()) {
            (None, _) => None,
            (Some(oidc), Some(jwt)) => Some(OidcClient::new(oidc.clone(), jwt.issuer())?),
            (Some(_), None) => {
                return Err(
                    "--dashboard-oidc-client-id needs --auth jwt (the issuer to log in with)"
                        .to_owned(),
                );
            }
        };
        Ok(Self {
            board: Arc::new(Board {
                store: parts.store,
                insights: parts.insights,
                operations: parts.operations,
                authenticator: parts.authenticator,
                admissions: parts.admissions,
                limits: parts.limits,
                keys: parts.keys,
                sessions,
                sign_ins,
                oidc,
                settings,
                shutdown: CancellationToken::new(),
                dispatch_samples: Arc::default(),
            }),
        })
    }

    /// Serves the dashboard on `listener` until `stop` fires; then its live
    /// streams end at once and requests in flight finish.
    pub async fn serve(
        self,
        listener: TcpListener,
        stop: CancellationToken,
    ) -> std::io::Result<()> {
        let settings = &self.board.settings;
        let limits = ConnectionLimits {
            header_read_timeout: settings.header_read_timeout,
            idle_timeout: settings.idle_timeout,
            max_connections: settings.max_connections,
        };
        let app = routes::router(self.board.clone());
        let shutdown = self.board.shutdown.clone();
        self.board
            .dispatch_samples
            .clone()
            .spawn(self.board.operations.clone(), shutdown.clone());
        serve_until_stopped("dashboard", listener, app, limits, stop, move || {
            shutdown.cancel();
        })
        .await;
        Ok(())
    }
}
