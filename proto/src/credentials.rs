//! The caller's credentials on every call: `authorization: Bearer <token>`,
//! added by an interceptor, and read from a flag, an environment variable
//! or a file (Kubernetes mounts Secrets as files).

use std::path::Path;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;

/// Adds the bearer token, when there is one, to every request. Its `Debug`
/// never shows the token.
#[derive(Clone, Default)]
pub struct BearerToken(Option<MetadataValue<Ascii>>);

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "BearerToken(<set>)"
        } else {
            "BearerToken(<none>)"
        })
    }
}

/// Why a token could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("the token must be printable ASCII without spaces")]
    Malformed,
    #[error("cannot read the token file {path}: {reason}")]
    File { path: String, reason: String },
    #[error("the token file {0} is empty")]
    Empty(String),
    #[error("the tenant must be printable ASCII without spaces")]
    MalformedTenant,
}

impl BearerToken {
    /// No credentials (a service run with `--auth none`).
    pub fn none() -> Self {
        Self(None)
    }

    pub fn new(token: &str) -> Result<Self, TokenError> {
        if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(TokenError::Malformed);
        }
        let mut value: MetadataValue<Ascii> = format!("Bearer {token}")
            .parse()
            .map_err(|_| TokenError::Malformed)?;
        // Kept out of HTTP/2 header compression tables and debug output.
        value.set_sensitive(true);
        Ok(Self(Some(value)))
    }

    /// The token given directly, else the one in `file` (its content,
    /// trimmed), else none.
    pub fn from_sources(token: Option<&str>, file: Option<&Path>) -> Result<Self, TokenError> {
        if let Some(token) = token {
            return Self::new(token);
        }
        let Some(path) = file else {
            return Ok(Self::none());
        };
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|err| TokenError::File {
            path: shown.clone(),
            reason: err.to_string(),
        })?;
        let token = text.trim();
        if token.is_empty() {
            return Err(TokenError::Empty(shown));
        }
        Self::new(token)
    }
}

/// The names a program gives its token settings, so that an error names
/// the one the user set: the flag when it was typed, else its variable.
#[derive(Debug, Clone, Copy)]
pub struct TokenSettings {
    pub flag: &'static str,
    pub env: &'static str,
    pub file_flag: &'static str,
    pub file_env: &'static str,
}

impl TokenSettings {
    /// The token from `token` (its flag or variable) or `file`, as they
    /// were parsed. A typed flag wins over a variable; two of the same
    /// kind are an error naming both.
    pub fn resolve(&self, token: Option<&str>, file: Option<&Path>) -> Result<BearerToken, String> {
        let typed = |flag: &str| typed_on_command_line(flag);
        let (token, file) = match (token, file) {
            (Some(token), Some(file)) => match (typed(self.flag), typed(self.file_flag)) {
                (true, false) => (Some(token), None),
                (false, true) => (None, Some(file)),
                (true, true) => {
                    return Err(format!(
                        "{} and {} both give a token: use one",
                        self.flag, self.file_flag
                    ));
                }
                (false, false) => {
                    return Err(format!(
                        "{} and {} are both set: unset one",
                        self.env, self.file_env
                    ));
                }
            },
            other => other,
        };
        BearerToken::from_sources(token, file).map_err(|err| {
            let setting = if token.is_some() {
                self.name(self.flag, self.env)
            } else {
                self.name(self.file_flag, self.file_env)
            };
            format!("{setting}: {err}")
        })
    }

    fn name(&self, flag: &str, env: &str) -> String {
        if typed_on_command_line(flag) {
            flag.to_owned()
        } else {
            env.to_owned()
        }
    }
}

/// Whether `flag` (`--name`) was typed, as `--name VALUE` or `--name=VALUE`.
fn typed_on_command_line(flag: &str) -> bool {
    std::env::args_os().skip(1).any(|arg| {
        arg.to_str().is_some_and(|arg| {
            arg == flag
                || arg
                    .strip_prefix(flag)
                    .is_some_and(|rest| rest.starts_with('='))
        })
    })
}

impl Interceptor for BearerToken {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// What a client presents on every call: its bearer token and, for
/// credentials that reach every tenant, the tenant it acts in
/// ([`crate::TENANT_METADATA`]).
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    token: BearerToken,
    tenant: Option<MetadataValue<Ascii>>,
}

impl Credentials {
    /// `token`, acting in `tenant` when one is given. The service checks
    /// the tenant id's rules; here it only has to be printable ASCII.
    pub fn new(token: BearerToken, tenant: Option<&str>) -> Result<Self, TokenError> {
        let tenant = tenant
            .map(|tenant| {
                if tenant.is_empty() || !tenant.bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(TokenError::MalformedTenant);
                }
                tenant.parse().map_err(|_| TokenError::MalformedTenant)
            })
            .transpose()?;
        Ok(Self { token, tenant })
    }
}

impl From<BearerToken> for Credentials {
    fn from(token: BearerToken) -> Self {
        Self {
            token,
            tenant: None,
        }
    }
}

impl Interceptor for Credentials {
    fn call(&mut self, request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let mut request = self.token.call(request)?;
        if let Some(tenant) = &self.tenant {
            request
                .metadata_mut()
                .insert(crate::TENANT_METADATA, tenant.clone());
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_come_from_the_flag_before_the_file_and_never_show() {
        let dir = std::env::temp_dir().join(format!("token-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("token");
        std::fs::write(&file, "tsk_fromfile\n").expect("write");
        let mut from_file = BearerToken::from_sources(None, Some(&file)).expect("file");
        let request = from_file
            .call(tonic::Request::new(()))
            .expect("intercepted");
        assert_eq!(
            request
                .metadata()
                .get("authorization")
                .map(|v| v.to_str().ok()),
            Some(Some("Bearer tsk_fromfile"))
        );
        let flag = BearerToken::from_sources(Some("tsk_flag"), Some(&file)).expect("flag");
        assert_eq!(format!("{flag:?}"), "BearerToken(<set>)");
        assert!(!format!("{from_file:?}").contains("fromfile"));
        std::fs::write(&file, "  \n").expect("write");
        assert!(matches!(
            BearerToken::from_sources(None, Some(&file)),
            Err(TokenError::Empty(_))
        ));
        assert!(matches!(
            BearerToken::new("two words"),
            Err(TokenError::Malformed)
        ));
        let mut none = BearerToken::none();
        let request = none.call(tonic::Request::new(())).expect("intercepted");
        assert!(request.metadata().get("authorization").is_none());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn credentials_name_their_tenant_on_every_call() {
        let mut credentials =
            Credentials::new(BearerToken::new("tsk_a").expect("token"), Some("acme")).expect("ok");
        let request = credentials
            .call(tonic::Request::new(()))
            .expect("intercepted");
        let tenant = request.metadata().get(crate::TENANT_METADATA);
        assert_eq!(tenant.map(|v| v.to_str().ok()), Some(Some("acme")));
        assert!(request.metadata().get("authorization").is_some());
        let mut plain = Credentials::from(BearerToken::none());
        let request = plain.call(tonic::Request::new(())).expect("intercepted");
        assert!(request.metadata().get(crate::TENANT_METADATA).is_none());
        for bad in ["", "two words", "caf\u{e9}"] {
            assert!(matches!(
                Credentials::new(BearerToken::none(), Some(bad)),
                Err(TokenError::MalformedTenant)
            ));
        }
    }
}
