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
}
