//! The OpenAPI documents are kept gzip-compressed and sent as they are to
//! clients that take gzip (client-go asks for it): the bytes must be one
//! gzip layer (the server's compression layer must not add another) over
//! exactly the JSON a client without gzip gets, under the same ETag, and
//! kubectl must still read them (`explain`, and `create --validate=true`,
//! which looks up the server's field validation in `/openapi/v3`).
//! Decompression here is Python's `gzip`, not the server's library.

use e2e::{eventually_async, HttpResponse, Server};
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

const PARTS_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: parts.gzip.example.com
spec:
  group: gzip.example.com
  scope: Namespaced
  names: {plural: parts, singular: part, kind: Part}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: What the part is made of.
            properties:
              material: {type: string, description: The part's material.}
              count: {type: integer}
"#;

/// `body` decompressed by Python's gzip module (one layer).
fn gunzip(body: &[u8]) -> Vec<u8> {
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import gzip,sys; sys.stdout.buffer.write(gzip.decompress(sys.stdin.buffer.read()))",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 is installed");
    let mut stdin = child.stdin.take().unwrap();
    let input = body.to_vec();
    // Larger than a pipe buffer: write while python reads.
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "not gzip: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

async fn get(s: &Server, path: &str, headers: &[(&str, &str)]) -> HttpResponse {
    s.http("GET", path, headers, b"")
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

fn vary(r: &HttpResponse) -> Vec<&str> {
    r.headers
        .iter()
        .filter(|(n, _)| n == "vary")
        .flat_map(|(_, v)| v.split(','))
        .map(str::trim)
        .collect()
}

/// One document both ways: the gzip bytes are one layer over the plain
/// JSON, one ETag, and a held ETag is 304 both ways. Returns the JSON.
async fn same_both_ways(s: &Server, path: &str, accept: &str) -> Vec<u8> {
    let plain = get(s, path, &[("Accept", accept)]).await;
    assert_eq!(plain.status, 200, "{path}: {}", plain.text());
    assert_eq!(plain.header("content-encoding"), None, "{path}");
    assert!(
        vary(&plain).contains(&"Accept-Encoding"),
        "{path}: {:?}",
        plain.headers
    );

    let gz = get(s, path, &[("Accept", accept), ("Accept-Encoding", "gzip")]).await;
    assert_eq!(gz.status, 200, "{path}");
    assert_eq!(gz.header("content-encoding"), Some("gzip"), "{path}");
    assert_eq!(gz.header("content-type"), plain.header("content-type"));
    assert!(
        vary(&gz).contains(&"Accept-Encoding"),
        "{path}: {:?}",
        gz.headers
    );
    assert!(gz.body.starts_with(&[0x1f, 0x8b]), "{path}: gzip magic");
    assert!(gz.body.len() < plain.body.len(), "{path}: compressed");
    // Exactly one layer: decompressed once, it is the plain body.
    let inflated = gunzip(&gz.body);
    assert!(
        inflated == plain.body,
        "{path}: gzip body differs from plain"
    );
    let etag = plain.header("etag").expect("ETag");
    assert_eq!(gz.header("etag"), Some(etag), "{path}");

    // A client that refuses gzip gets the plain body.
    let refused = get(
        s,
        path,
        &[("Accept", accept), ("Accept-Encoding", "gzip;q=0")],
    )
    .await;
    assert_eq!(refused.header("content-encoding"), None, "{path}");
    assert!(refused.body == plain.body, "{path}");

    for encoding in ["gzip", "identity"] {
        let held = get(
            s,
            path,
            &[
                ("Accept", accept),
                ("Accept-Encoding", encoding),
                ("If-None-Match", etag),
            ],
        )
        .await;
        assert_eq!(held.status, 304, "{path} {encoding}");
        assert!(held.body.is_empty(), "{path} {encoding}");
        assert_eq!(held.header("etag"), Some(etag), "{path} {encoding}");
    }
    plain.body
}

#[tokio::test]
async fn openapi_documents_are_sent_gzip_compressed() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(&["create", "-f", "-"], PARTS_CRD);
    let gv = "/openapi/v3/apis/gzip.example.com/v1";
    eventually_async(
        "the Part kind in /openapi/v3",
        Duration::from_secs(20),
        || async {
            let r = get(&s, gv, &[]).await;
            (r.status == 200).then_some(())
        },
    )
    .await;

    // The root names the group-version's document with its hash.
    let root: Value =
        serde_json::from_slice(&same_both_ways(&s, "/openapi/v3", "application/json").await)
            .unwrap();
    let url = root["paths"]["apis/gzip.example.com/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let doc: Value =
        serde_json::from_slice(&same_both_ways(&s, gv, "application/json").await).unwrap();
    assert!(
        doc["components"]["schemas"]["com.example.gzip.v1.Part"]["properties"]["spec"]
            ["properties"]["material"]
            .is_object(),
        "the Part definition in {gv}"
    );
    // With its hash, too (the immutable form clients cache).
    same_both_ways(&s, &url, "application/json").await;
    // A built-in group-version's.
    same_both_ways(&s, "/openapi/v3/apis/apps/v1", "application/json").await;

    // v2 in JSON and in protobuf.
    let v2: Value =
        serde_json::from_slice(&same_both_ways(&s, "/openapi/v2", "application/json").await)
            .unwrap();
    assert!(v2["definitions"]["com.example.gzip.v1.Part"].is_object());
    let pb = same_both_ways(&s, "/openapi/v2", V2_PROTOBUF).await;
    assert!(pb.starts_with(b"\x0a\x032.0"), "swagger: 2.0 first");

    // kubectl (client-go asks for gzip) reads them.
    let explained = s.kubectl_ok(&["explain", "parts.spec"]);
    assert!(explained.contains("material"), "{explained}");
    assert!(explained.contains("The part's material."), "{explained}");
    let part = r#"{"apiVersion": "gzip.example.com/v1", "kind": "Part",
        "metadata": {"name": "p1", "namespace": "default"},
        "spec": {"material": "steel", "count": 2}}"#;
    s.kubectl_stdin_ok(&["create", "--validate=true", "-f", "-"], part);
    let unknown = r#"{"apiVersion": "gzip.example.com/v1", "kind": "Part",
        "metadata": {"name": "p2", "namespace": "default"},
        "spec": {"material": "steel", "colour": "red"}}"#;
    let (_, err) = s.kubectl_stdin_err(&["create", "--validate=true", "-f", "-"], unknown);
    assert!(err.contains("colour"), "{err}");
    assert_eq!(
        s.get_json(&["parts", "-n", "default"])["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}
