//! The HTTP client the load runs on: hyper's pooled HTTP/1.1 client, one
//! connection per request in flight, `TCP_NODELAY`, no compression (the
//! server gzips only when asked).

use super::{Error, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// A 2xx reply read to its end.
pub struct Reply {
    pub body: Bytes,
}

/// The status of a reply, and its Retry-After.
pub struct Answer {
    pub status: u16,
    pub retry_after: Option<String>,
    /// The priority level API Priority and Fairness put the request in
    /// (`X-Kubernetes-PF-PriorityLevel-UID`).
    pub priority_level: Option<String>,
}

/// A client for one server address.
#[derive(Clone)]
pub struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    /// Every request impersonates this user (see [`Http::with_user`]).
    user: Option<std::sync::Arc<str>>,
}

impl Http {
    /// A client for `http://{addr}`.
    pub fn new(addr: &str) -> Http {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(usize::MAX)
            .build(connector);
        Http {
            client,
            base: format!("http://{addr}"),
            user: None,
        }
    }

    /// This client, its requests made as `user` (impersonated: the plain
    /// port's admin may), e.g. a user API Priority and Fairness does not
    /// exempt.
    pub fn with_user(mut self, user: &str) -> Http {
        self.user = Some(user.into());
        self
    }

    /// A client for `http://{addr}` speaking HTTP/2 (prior knowledge): its
    /// requests share one connection, as client-go's watches do.
    pub fn new_h2(addr: &str) -> Http {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .http2_only(true)
            .build(connector);
        Http {
            client,
            base: format!("http://{addr}"),
            user: None,
        }
    }

    /// The `host:port` this client talks to.
    pub fn addr(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    /// One request, its reply whatever the status (`user`: impersonated,
    /// as the plain port's admin may).
    async fn request(
        &self,
        method: Method,
        path: &str,
        accept: &str,
        body: Option<Bytes>,
        user: Option<&str>,
    ) -> Result<hyper::Response<Incoming>> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("accept", accept);
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        if let Some(user) = user {
            req = req.header("impersonate-user", user);
        }
        let req = req
            .body(Full::new(body.unwrap_or_default()))
            .map_err(|e| Error::Http(e.to_string()))?;
        self.client
            .request(req)
            .await
            .map_err(|e| Error::Http(e.to_string()))
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        accept: &str,
        body: Option<Bytes>,
    ) -> Result<Incoming> {
        let resp = self
            .request(method, path, accept, body, self.user.as_deref())
            .await?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp.into_body());
        }
        let body = resp
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        Err(Error::Status {
            status: status.as_u16(),
            body: String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned(),
        })
    }

    /// A request whose reply must be 2xx, read to its end.
    pub async fn call(&self, method: Method, path: &str, body: Option<Bytes>) -> Result<Reply> {
        self.call_as(method, path, "application/json", body).await
    }

    /// `call` with an Accept header of the caller's (e.g. aggregated
    /// discovery's).
    pub async fn call_as(
        &self,
        method: Method,
        path: &str,
        accept: &str,
        body: Option<Bytes>,
    ) -> Result<Reply> {
        let incoming = self.send(method, path, accept, body).await?;
        let body = incoming
            .collect()
            .await
            .map_err(|e| Error::Http(e.to_string()))?
            .to_bytes();
        Ok(Reply { body })
    }

    /// A POST of a JSON body as `user` (impersonated: the plain port's admin
    /// may), whatever the status: the status and the Retry-After header,
    /// the body read and dropped.
    pub async fn post_as_user(&self, path: &str, body: Bytes, user: &str) -> Result<Answer> {
        let resp = self
            .request(
                Method::POST,
                path,
                "application/json",
                Some(body),
                Some(user),
            )
            .await?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let priority_level = resp
            .headers()
            .get("x-kubernetes-pf-prioritylevel-uid")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        resp.into_body()
            .collect()
            .await
            .map_err(|e| Error::Http(e.to_string()))?;
        Ok(Answer {
            status,
            retry_after,
            priority_level,
        })
    }

    pub async fn get(&self, path: &str) -> Result<Reply> {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Bytes) -> Result<Reply> {
        self.call(Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: Bytes) -> Result<Reply> {
        self.call(Method::PUT, path, Some(body)).await
    }

    /// A GET whose body is streamed (a watch): returns once the headers of a
    /// 2xx reply are in.
    pub async fn stream(&self, path: &str) -> Result<Incoming> {
        self.stream_as(path, "application/json").await
    }

    /// `stream` asking for `accept` (a protobuf watch).
    pub async fn stream_as(&self, path: &str, accept: &str) -> Result<Incoming> {
        self.send(Method::GET, path, accept, None).await
    }
}

/// The string value of the first `"field":"..."` in `body` (a cheap scan for
/// hot paths that must not parse whole objects).
pub fn find_str_field<'a>(body: &'a [u8], field: &str) -> Option<&'a str> {
    let needle = format!("\"{field}\":\"");
    let at = find(body, needle.as_bytes())? + needle.len();
    let len = body[at..].iter().position(|&b| b == b'"')?;
    std::str::from_utf8(&body[at..at + len]).ok()
}

/// The position of `needle` in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_fields() {
        let body = br#"{"metadata":{"name":"a","resourceVersion":"42"},"data":{"seq":"7"}}"#;
        assert_eq!(find_str_field(body, "resourceVersion"), Some("42"));
        assert_eq!(find_str_field(body, "seq"), Some("7"));
        assert_eq!(find_str_field(body, "continue"), None);
        assert_eq!(find(b"aab", b"ab"), Some(1));
        assert_eq!(find(b"a", b"ab"), None);
    }
}
