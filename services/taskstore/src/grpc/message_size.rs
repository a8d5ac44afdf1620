//! Oversize messages are RESOURCE_EXHAUSTED, as in gRPC's own
//! implementations. tonic's codec reports a message over the size limit as
//! OUT_OF_RANGE; no handler of ours returns OUT_OF_RANGE, so this layer
//! rewrites that code on every response.

use tonic::codegen::http::{HeaderValue, Response};

const GRPC_STATUS: &str = "grpc-status";
const OUT_OF_RANGE: &str = "11";
const RESOURCE_EXHAUSTED: &str = "8";

/// A tower layer: `Server::builder().layer(OversizeIsResourceExhausted::layer())`.
#[derive(Debug, Clone, Copy)]
pub struct OversizeIsResourceExhausted;

impl OversizeIsResourceExhausted {
    pub fn layer<B>() -> tower::util::MapResponseLayer<fn(Response<B>) -> Response<B>> {
        tower::util::MapResponseLayer::new(rewrite::<B>)
    }
}

fn rewrite<B>(mut response: Response<B>) -> Response<B> {
    let headers = response.headers_mut();
    if headers
        .get(GRPC_STATUS)
        .is_some_and(|code| code == OUT_OF_RANGE)
    {
        headers.insert(GRPC_STATUS, HeaderValue::from_static(RESOURCE_EXHAUSTED));
    }
    response
}
