//! Flag values with a shape of their own: limits that may be off, and the
//! address to listen on.

use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use crate::durations::parse_duration;

/// Where to listen: `HOST:PORT`, checked for shape here and resolved at
/// startup (a name such as `localhost` may stand for several addresses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenAddress(String);

impl ListenAddress {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether only this machine can connect: a loopback IP address or
    /// `localhost`.
    pub fn is_loopback(&self) -> bool {
        if let Ok(addr) = self.0.parse::<SocketAddr>() {
            return addr.ip().is_loopback();
        }
        self.0
            .rsplit_once(':')
            .is_some_and(|(host, _)| host.eq_ignore_ascii_case("localhost"))
    }
}

impl FromStr for ListenAddress {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let shape = "write it as HOST:PORT, e.g. 127.0.0.1:50051, [::1]:50051 or localhost:50051";
        if raw.parse::<SocketAddr>().is_ok() {
            return Ok(Self(raw.to_owned()));
        }
        let Some((host, port)) = raw.rsplit_once(':') else {
            return Err(format!("{raw:?} has no port; {shape}"));
        };
        if port.parse::<u16>().is_err() {
            return Err(format!("{raw:?}: {port:?} is not a port number; {shape}"));
        }
        if host.is_empty() || host.contains(|c: char| c.is_whitespace() || c == ':' || c == '/') {
            return Err(format!("{raw:?}: {host:?} is not a host; {shape}"));
        }
        Ok(Self(raw.to_owned()))
    }
}

impl std::fmt::Display for ListenAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A secret read from a file (`--database-url-file`, for Kubernetes
/// Secrets mounted as files): its content without the trailing newline.
/// Never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretFile(String);

impl SecretFile {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretFile(<redacted>)")
    }
}

/// Reads a secret file (a clap value parser: the flag's value is a path).
pub fn read_secret_file(path: &str) -> Result<SecretFile, String> {
    let text = std::fs::read_to_string(path).map_err(|err| format!("cannot read {path}: {err}"))?;
    let secret = text.trim_end_matches(['\n', '\r']);
    if secret.trim().is_empty() {
        return Err(format!("{path} is empty"));
    }
    Ok(SecretFile(secret.to_owned()))
}

/// A value or no limit (`unlimited`, `none` or `off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit<T>(pub Option<T>);

impl FromStr for Limit<Duration> {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        if is_unlimited(raw) {
            Ok(Limit(None))
        } else {
            parse_duration(raw).map(|d| Limit(Some(d)))
        }
    }
}

impl FromStr for Limit<f64> {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        if is_unlimited(raw) {
            return Ok(Limit(None));
        }
        match raw.parse::<f64>() {
            Ok(n) if n.is_finite() && n > 0.0 => Ok(Limit(Some(n))),
            _ => Err(format!("{raw:?} is not a positive number")),
        }
    }
}

impl FromStr for Limit<u64> {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        if is_unlimited(raw) {
            Ok(Limit(None))
        } else {
            raw.parse()
                .map(|n| Limit(Some(n)))
                .map_err(|err| format!("{raw:?}: {err}"))
        }
    }
}

fn is_unlimited(raw: &str) -> bool {
    matches!(raw, "unlimited" | "none" | "off")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        for good in [
            "127.0.0.1:50051",
            "[::1]:0",
            "localhost:50051",
            "taskstore.svc:1",
        ] {
            assert!(good.parse::<ListenAddress>().is_ok(), "{good}");
        }
        for bad in [
            "localhost",
            "127.0.0.1",
            ":50051",
            "host:port",
            "a b:1",
            "http://x:1",
        ] {
            let err = bad.parse::<ListenAddress>().expect_err(bad);
            assert!(err.contains("HOST:PORT"), "{bad}: {err}");
        }
    }

    #[test]
    fn limits_parse() {
        assert_eq!("unlimited".parse::<Limit<u64>>(), Ok(Limit(None)));
        assert_eq!("10".parse::<Limit<u64>>(), Ok(Limit(Some(10))));
        assert!("ten".parse::<Limit<u64>>().is_err());
        assert_eq!("off".parse::<Limit<Duration>>(), Ok(Limit(None)));
        assert_eq!(
            "90s".parse::<Limit<Duration>>(),
            Ok(Limit(Some(Duration::from_secs(90))))
        );
    }
}

#[cfg(test)]
mod listen_tests {
    use super::*;

    #[test]
    fn loopback_addresses_are_told_apart() {
        for (raw, loopback) in [
            ("127.0.0.1:50051", true),
            ("127.0.0.2:1", true),
            ("[::1]:0", true),
            ("localhost:50051", true),
            ("0.0.0.0:50051", false),
            ("[::]:50051", false),
            ("10.1.2.3:50051", false),
            ("example.com:50051", false),
        ] {
            let address: ListenAddress = raw.parse().expect("address");
            assert_eq!(address.is_loopback(), loopback, "{raw}");
        }
    }
}
