//! Scraping a `/metrics` endpoint and reading samples out of the
//! Prometheus text format.

use std::collections::BTreeMap;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One scrape: `name{label="value",…}` (labels sorted) → value.
#[derive(Debug)]
pub struct Scrape(BTreeMap<String, f64>);

impl Scrape {
    /// The sample of `name` with exactly `labels`; `None` when absent.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.0.get(&key(name, labels)).copied()
    }

    /// Like [`Scrape::get`], with a missing sample a failure naming it.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels)
            .unwrap_or_else(|| panic!("no sample {}; scraped {self:#?}", key(name, labels)))
    }
}

fn key(name: &str, labels: &[(&str, &str)]) -> String {
    let mut labels = labels.to_vec();
    labels.sort_unstable();
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{name}{{{}}}", labels.join(","))
}

/// Parses the samples of a text exposition (our label values have no
/// commas, quotes or escapes, which keeps this small).
fn parse(text: &str) -> Scrape {
    let mut samples = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
        let value: f64 = value.parse().expect("a numeric value");
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let labels: Vec<(&str, &str)> = labels
            .split(',')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').expect("label=value");
                (k, v.trim_matches('"'))
            })
            .collect();
        samples.insert(key(name, &labels), value);
    }
    Scrape(samples)
}

/// `GET path` from `addr` (`HOST:PORT`): the status code and the body.
pub async fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to the metrics port");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send the request");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("read the response");
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(
        path != "/metrics"
            || head
                .to_ascii_lowercase()
                .contains("content-type: text/plain"),
        "{head}"
    );
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status code");
    (status, body.to_owned())
}

/// `GET /metrics` from `addr`, as Prometheus would.
pub async fn scrape(addr: &str) -> Scrape {
    let (status, body) = http_get(addr, "/metrics").await;
    assert_eq!(status, 200);
    parse(&body)
}
