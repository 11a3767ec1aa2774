//! Content negotiation: which representation a response is written in
//! (`Accept`), which format a request body is in (`Content-Type`), and whether
//! the client takes gzip (`Accept-Encoding`).
//!
//! The rules are kube-apiserver's:
//!
//! * `Accept` is a list of media ranges with parameters. They are tried best
//!   first (by `q`, then specific before wildcard, then in the order given);
//!   the first range that one of the served media types satisfies wins, and
//!   the served types are tried in their own order (JSON before YAML), so
//!   `*/*` and `application/*` give JSON. A missing or empty header gives
//!   JSON. Nothing acceptable is a 406 listing the served types.
//! * The parameters `as`, `g` and `v` ask for another representation of the
//!   result: `as=Table`, `as=PartialObjectMetadata` or
//!   `as=PartialObjectMetadataList`, always with `g=meta.k8s.io` and `v=v1` or
//!   `v=v1beta1`. A range asking for anything else is skipped (so a client can
//!   fall back to a later range). `stream=watch` is accepted for JSON,
//!   `pretty=1` asks for indented output, other parameters are ignored.
//! * Protobuf (`application/vnd.kubernetes.protobuf`) is served for the
//!   objects of built-in kinds and for `PartialObjectMetadata(List)` of any
//!   kind; never for a `Table` (kube's Table has no protobuf form) nor for
//!   custom resources, whose ranges are skipped, so `protobuf, json` gives
//!   JSON there and protobuf alone is a 406 listing JSON and YAML, as kube
//!   answers. The caller says which applies ([`Serves`]). Protobuf request
//!   bodies of built-in kinds are accepted (`BodyFormat::Protobuf`).
//! * CBOR (`application/cbor`, kube's `CBORServingAndStorage`) is served for
//!   every kind, custom resources included, and every representation
//!   (Table and PartialObjectMetadata too, as kube's meta codecs carry
//!   CBOR). A watch asked in `application/cbor` is answered as a CBOR
//!   sequence, `application/cbor-seq`; `application/cbor-seq` itself is not
//!   a type one can ask for (kube negotiates it away with a 406 although
//!   it lists it). Request bodies may be `application/cbor`, and
//!   server-side apply takes `application/apply-patch+cbor`; there is no
//!   CBOR JSON patch, merge patch or strategic merge patch.
//! * Every representation is answered with the plain media type of its
//!   encoding (`application/json` for a Table too), as kube-apiserver does.
//!
//! Two departures from kube-apiserver, both towards RFC 9110: a range with
//! `q=0` is skipped (kube-apiserver only uses `q` to order the ranges and
//! still serves a `q=0` range), and media types are compared
//! case-insensitively. A `q=0` range does not veto a wildcard range that
//! matches the same type (`application/json;q=0, */*` gives JSON).

// Fallible functions here answer with the `Status` the client is sent.
#![allow(clippy::result_large_err)]

use crate::status::Status;

/// Media types responses of built-in kinds are served in, in order of
/// preference.
pub const SUPPORTED: &[&str] = &[JSON, YAML, PROTOBUF, CBOR];
/// Media types responses of custom resources are served in.
pub const SUPPORTED_CUSTOM: &[&str] = &[JSON, YAML, CBOR];
/// Media types watch streams of built-in kinds are served in.
pub const SUPPORTED_STREAM: &[&str] = &[
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf;stream=watch",
    CBOR_SEQ,
];
/// Media types watch streams of custom resources are served in.
pub const SUPPORTED_CUSTOM_STREAM: &[&str] = &["application/json;stream=watch", CBOR_SEQ];
/// Media types accepted for the body of a create or update.
pub const SUPPORTED_BODY: &[&str] = &[JSON, YAML, PROTOBUF, CBOR];
/// Media types accepted for the body of a patch of a built-in resource.
pub const SUPPORTED_PATCH: &[&str] = &[
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    APPLY_YAML,
    APPLY_CBOR,
];
/// Media types accepted for the body of a patch of a custom resource
/// (strategic merge needs Go struct tags, which custom resources lack).
pub const SUPPORTED_CUSTOM_RESOURCE_PATCH: &[&str] =
    &[JSON_PATCH, MERGE_PATCH, APPLY_YAML, APPLY_CBOR];

pub const JSON: &str = "application/json";
pub const YAML: &str = "application/yaml";
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
pub const JSON_PATCH: &str = "application/json-patch+json";
pub const MERGE_PATCH: &str = "application/merge-patch+json";
pub const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";
pub const APPLY_YAML: &str = "application/apply-patch+yaml";
pub const CBOR: &str = "application/cbor";
/// A CBOR sequence (RFC 8742): the `Content-Type` of a CBOR watch.
pub const CBOR_SEQ: &str = "application/cbor-seq";
pub const APPLY_CBOR: &str = "application/apply-patch+cbor";

/// The group of the alternate representations.
pub const META_GROUP: &str = "meta.k8s.io";

/// The encoding of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    Json,
    Yaml,
    /// `application/vnd.kubernetes.protobuf`: the `k8s\0` envelope; a watch
    /// is a stream of length-prefixed `WatchEvent` envelopes.
    Protobuf,
    /// `application/cbor`: one self-described CBOR item; a watch is a CBOR
    /// sequence of `WatchEvent`s (`application/cbor-seq`).
    Cbor,
}

impl Format {
    pub fn media_type(self) -> &'static str {
        match self {
            Format::Json => JSON,
            Format::Yaml => YAML,
            Format::Protobuf => PROTOBUF,
            Format::Cbor => CBOR,
        }
    }

    /// Protobuf or CBOR: the formats whose errors are written in them too
    /// (a YAML request gets a JSON Status).
    pub fn is_binary(self) -> bool {
        matches!(self, Format::Protobuf | Format::Cbor)
    }
}

/// Which encodings a resource's responses may use: kube serves protobuf for
/// built-in kinds only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serves {
    /// A built-in kind: JSON, YAML and protobuf.
    BuiltIn,
    /// A custom resource (or any kind without a protobuf message): JSON and
    /// YAML; protobuf only for `PartialObjectMetadata(List)`.
    JsonOnly,
}

impl Serves {
    fn offers(self) -> &'static [Format] {
        // Protobuf is offered to every resource: `accept_params` refuses it
        // for the objects of a custom resource, not for their metadata.
        &[Format::Json, Format::Yaml, Format::Protobuf, Format::Cbor]
    }

    fn supported(self) -> &'static [&'static str] {
        match self {
            Serves::BuiltIn => SUPPORTED,
            Serves::JsonOnly => SUPPORTED_CUSTOM,
        }
    }

    fn supported_stream(self) -> &'static [&'static str] {
        match self {
            Serves::BuiltIn => SUPPORTED_STREAM,
            Serves::JsonOnly => SUPPORTED_CUSTOM_STREAM,
        }
    }
}

/// What a response carries: the objects themselves or one of the
/// `meta.k8s.io` representations of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    Object,
    Table,
    PartialObjectMetadata,
    PartialObjectMetadataList,
}

impl Target {
    /// The `kind` of the representation (`None` for the objects themselves).
    pub fn kind(self) -> Option<&'static str> {
        match self {
            Target::Object => None,
            Target::Table => Some("Table"),
            Target::PartialObjectMetadata => Some("PartialObjectMetadata"),
            Target::PartialObjectMetadataList => Some("PartialObjectMetadataList"),
        }
    }
}

/// The version of `meta.k8s.io` a representation was asked in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MetaVersion {
    #[default]
    V1,
    V1beta1,
}

impl MetaVersion {
    /// `apiVersion` of the representation, e.g. `meta.k8s.io/v1`.
    pub fn api_version(self) -> &'static str {
        match self {
            MetaVersion::V1 => "meta.k8s.io/v1",
            MetaVersion::V1beta1 => "meta.k8s.io/v1beta1",
        }
    }
}

/// The outcome of negotiating a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    pub format: Format,
    pub target: Target,
    /// Version of `meta.k8s.io` for `target` other than `Object`.
    pub meta_version: MetaVersion,
    /// The chosen media range carried `pretty=1`. Pretty printing is also
    /// asked by the `pretty` query parameter and some user agents (see
    /// `query::pretty`); the response is indented if either says so (JSON
    /// only).
    pub pretty: bool,
}

impl Negotiated {
    /// The `Content-Type` of the response. kube-apiserver answers with the
    /// plain media type of the encoding whatever the representation, and a
    /// JSON watch stream with plain `application/json` too.
    pub fn content_type(&self) -> &'static str {
        self.format.media_type()
    }

    /// The `Content-Type` of a watch stream: kube adds `;stream=watch` to
    /// every media type but JSON's.
    pub fn stream_content_type(&self) -> &'static str {
        match self.format {
            Format::Protobuf => "application/vnd.kubernetes.protobuf;stream=watch",
            Format::Cbor => CBOR_SEQ,
            other => other.media_type(),
        }
    }

    /// `apiVersion` of the representation (`None` for `Target::Object`).
    pub fn target_api_version(&self) -> Option<&'static str> {
        match self.target {
            Target::Object => None,
            _ => Some(self.meta_version.api_version()),
        }
    }
}

/// Negotiates the response of a get (`list == false`) or a list
/// (`list == true`) from the `Accept` header.
///
/// On a list, `as=PartialObjectMetadata` gives a `PartialObjectMetadataList`
/// (as the API concepts page documents). On a get,
/// `as=PartialObjectMetadataList` is a 406, as kube-apiserver answers it.
pub fn negotiate(accept: Option<&str>, list: bool, serves: Serves) -> Result<Negotiated, Status> {
    let choice = choose(accept, serves.offers(), serves)
        .ok_or_else(|| Status::not_acceptable(serves.supported()))?;
    let target =
        match (choice.target, list) {
            (Target::PartialObjectMetadata, true) => Target::PartialObjectMetadataList,
            (Target::PartialObjectMetadataList, false) => return Err(Status::failure(
                406,
                crate::status::reason::NOT_ACCEPTABLE,
                "you requested PartialObjectMetadataList, but the requested object is not a list",
            )),
            (target, _) => target,
        };
    Ok(Negotiated {
        format: choice.format,
        target,
        meta_version: choice.meta_version,
        pretty: choice.pretty,
    })
}

/// Negotiates the response of a watch. kube-apiserver negotiates twice: the
/// representation as for any response (406 listing [`SUPPORTED`]), then the
/// stream encoding among the encodings that can stream, JSON, protobuf and
/// CBOR (406 listing [`SUPPORTED_STREAM`]; YAML cannot stream). Each event then
/// carries one object, so `as=PartialObjectMetadata` gives one per event;
/// `as=Table` gives a Table per event; `as=PartialObjectMetadataList`
/// cannot apply to one object and, as in kube-apiserver, the objects are
/// sent unchanged. When the two negotiations disagree so that protobuf would
/// carry what it cannot (a Table, a custom resource), the stream is JSON if
/// the client takes it, else a 406. A watch is never pretty-printed.
pub fn negotiate_watch(accept: Option<&str>, serves: Serves) -> Result<Negotiated, Status> {
    let representation = choose(accept, serves.offers(), serves)
        .ok_or_else(|| Status::not_acceptable(serves.supported()))?;
    let not_acceptable = || Status::not_acceptable(serves.supported_stream());
    let mut stream = choose(
        accept,
        &[Format::Json, Format::Protobuf, Format::Cbor],
        serves,
    )
    .ok_or_else(not_acceptable)?;
    let target = match representation.target {
        Target::PartialObjectMetadataList => Target::Object,
        other => other,
    };
    if stream.format == Format::Protobuf && !protobuf_serves(target, serves) {
        stream = choose(accept, &[Format::Json], serves).ok_or_else(not_acceptable)?;
    }
    Ok(Negotiated {
        format: stream.format,
        target,
        meta_version: representation.meta_version,
        pretty: false,
    })
}

/// The format of a request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BodyFormat {
    Json,
    Yaml,
    /// `application/vnd.kubernetes.protobuf`: the `k8s\0` envelope around a
    /// protobuf message (built-in kinds only).
    Protobuf,
    /// `application/cbor`: one CBOR item (any kind).
    Cbor,
    JsonPatch,
    MergePatch,
    StrategicMergePatch,
    ApplyYaml,
    /// `application/apply-patch+cbor`: an apply configuration in CBOR.
    ApplyCbor,
}

impl BodyFormat {
    pub fn media_type(self) -> &'static str {
        match self {
            BodyFormat::Json => JSON,
            BodyFormat::Yaml => YAML,
            BodyFormat::Protobuf => PROTOBUF,
            BodyFormat::Cbor => CBOR,
            BodyFormat::JsonPatch => JSON_PATCH,
            BodyFormat::MergePatch => MERGE_PATCH,
            BodyFormat::StrategicMergePatch => STRATEGIC_MERGE_PATCH,
            BodyFormat::ApplyYaml => APPLY_YAML,
            BodyFormat::ApplyCbor => APPLY_CBOR,
        }
    }

    pub fn is_patch(self) -> bool {
        !matches!(
            self,
            BodyFormat::Json | BodyFormat::Yaml | BodyFormat::Protobuf | BodyFormat::Cbor
        )
    }

    /// Server-side apply (`application/apply-patch+yaml` or `+cbor`).
    pub fn is_apply(self) -> bool {
        matches!(self, BodyFormat::ApplyYaml | BodyFormat::ApplyCbor)
    }
}

/// The format of the body of a create or update (`patch == false`) or of a
/// patch of a built-in resource (`patch == true`), from `Content-Type`.
///
/// Create and update: a missing or empty `Content-Type` means JSON;
/// parameters such as `charset` are allowed but must be well formed.
/// Patch: the type decides the kind of patch and is required; anything after
/// the first `;` is ignored. Anything else is a 415 listing what is accepted.
pub fn request_body(content_type: Option<&str>, patch: bool) -> Result<BodyFormat, Status> {
    if patch {
        patch_body(content_type, SUPPORTED_PATCH)
    } else {
        write_body(content_type)
    }
}

/// [`request_body`] for a patch of a custom resource: strategic merge patch
/// is a 415 there.
pub fn custom_resource_patch_body(content_type: Option<&str>) -> Result<BodyFormat, Status> {
    patch_body(content_type, SUPPORTED_CUSTOM_RESOURCE_PATCH)
}

fn write_body(content_type: Option<&str>) -> Result<BodyFormat, Status> {
    let raw = content_type.map(str::trim).unwrap_or("");
    if raw.is_empty() {
        return Ok(BodyFormat::Json);
    }
    match parse_media_type(raw).as_deref() {
        Some(JSON) => Ok(BodyFormat::Json),
        Some(YAML) => Ok(BodyFormat::Yaml),
        Some(PROTOBUF) => Ok(BodyFormat::Protobuf),
        Some(CBOR) => Ok(BodyFormat::Cbor),
        _ => Err(Status::unsupported_media_type(raw, SUPPORTED_BODY)),
    }
}

fn patch_body(content_type: Option<&str>, supported: &[&str]) -> Result<BodyFormat, Status> {
    let raw = content_type.unwrap_or("");
    let base = raw
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let format = match base.as_str() {
        JSON_PATCH => BodyFormat::JsonPatch,
        MERGE_PATCH => BodyFormat::MergePatch,
        STRATEGIC_MERGE_PATCH => BodyFormat::StrategicMergePatch,
        APPLY_YAML => BodyFormat::ApplyYaml,
        APPLY_CBOR => BodyFormat::ApplyCbor,
        _ => return Err(Status::unsupported_media_type(raw.trim(), supported)),
    };
    if supported.contains(&format.media_type()) {
        Ok(format)
    } else {
        Err(Status::unsupported_media_type(raw.trim(), supported))
    }
}

/// Whether the response may be gzip-compressed: `Accept-Encoding` lists
/// `gzip` (parameters allowed, but not `q=0`). kube-apiserver compresses only
/// bodies over 128 KiB and never watch streams; that is for the caller.
pub fn accepts_gzip(accept_encoding: Option<&str>) -> bool {
    accept_encoding.unwrap_or("").split(',').any(|coding| {
        let mut parts = coding.split(';');
        let name = parts.next().unwrap_or("").trim();
        if !name.eq_ignore_ascii_case("gzip") {
            return false;
        }
        !parts.any(|p| {
            let mut kv = p.splitn(2, '=');
            let key = kv.next().unwrap_or("").trim();
            let value = kv.next().unwrap_or("").trim();
            key.eq_ignore_ascii_case("q") && value.parse::<f32>().is_ok_and(|q| q <= 0.0)
        })
    })
}

// ---------------------------------------------------------------------------
// Accept parsing and matching.

/// One media range of an `Accept` header.
#[derive(Debug)]
struct Range<'a> {
    main: String,
    sub: String,
    q: f32,
    params: Vec<(&'a str, &'a str)>,
}

impl Range<'_> {
    fn specificity(&self) -> u8 {
        u8::from(self.main != "*") + u8::from(self.sub != "*")
    }
}

/// Parses an `Accept` header the way kube-apiserver's parser does: ranges
/// without a `/` (other than `*`) or with two are dropped, parameters without
/// exactly one `=` are dropped, whitespace around names and values is
/// trimmed, and a `q` that does not parse counts as 0.
fn parse_accept(header: &str) -> Vec<Range<'_>> {
    let mut ranges = Vec::new();
    for part in header.split(',') {
        let mut pieces = part.split(';');
        let media = pieces.next().unwrap_or("").trim();
        let (main, sub) = match media.split_once('/') {
            Some((main, sub)) => {
                if sub.contains('/') {
                    continue;
                }
                (main.trim(), sub.trim())
            }
            None if media == "*" => ("*", "*"),
            None => continue,
        };
        let mut range = Range {
            main: main.to_ascii_lowercase(),
            sub: sub.to_ascii_lowercase(),
            q: 1.0,
            params: Vec::new(),
        };
        for param in pieces {
            let mut kv = param.split('=');
            let (Some(key), Some(value), None) = (kv.next(), kv.next(), kv.next()) else {
                continue;
            };
            let key = key.trim();
            let value = value.trim();
            if key == "q" {
                range.q = value
                    .parse::<f32>()
                    .ok()
                    .filter(|q| q.is_finite())
                    .unwrap_or(0.0);
            } else {
                range.params.push((key, value));
            }
        }
        ranges.push(range);
    }
    // Best first: by q, then specific before wildcard; the sort is stable so
    // ties keep the order of the header.
    ranges.sort_by(|a, b| {
        b.q.total_cmp(&a.q)
            .then_with(|| b.specificity().cmp(&a.specificity()))
    });
    ranges
}

#[derive(Debug, Clone, Copy)]
struct Choice {
    format: Format,
    target: Target,
    meta_version: MetaVersion,
    pretty: bool,
}

/// The first (range, served format) pair that fits, among `offers` in order.
fn choose(accept: Option<&str>, offers: &[Format], serves: Serves) -> Option<Choice> {
    let header = accept.unwrap_or("").trim();
    if header.is_empty() {
        return offers.first().map(|format| Choice {
            format: *format,
            target: Target::Object,
            meta_version: MetaVersion::V1,
            pretty: false,
        });
    }
    for range in parse_accept(header) {
        if range.q <= 0.0 {
            continue;
        }
        for format in offers {
            let (main, sub) = format
                .media_type()
                .split_once('/')
                .unwrap_or(("application", "json"));
            let type_matches = (range.main == main && (range.sub == sub || range.sub == "*"))
                || (range.main == "*" && range.sub == "*");
            if !type_matches {
                continue;
            }
            if let Some(choice) = accept_params(&range.params, *format, serves) {
                return Some(choice);
            }
        }
    }
    None
}

/// Interprets the parameters of a range for a served format; `None` when the
/// format cannot satisfy them.
fn accept_params(params: &[(&str, &str)], format: Format, serves: Serves) -> Option<Choice> {
    let mut convert: Option<(&str, &str, &str)> = None;
    let mut pretty = false;
    for (key, value) in params {
        match *key {
            "as" => convert.get_or_insert(("", "", "")).0 = value,
            "g" => convert.get_or_insert(("", "", "")).1 = value,
            "v" => convert.get_or_insert(("", "", "")).2 = value,
            "stream" if !value.is_empty() && (*value != "watch" || format == Format::Yaml) => {
                return None
            }
            "sv" if !value.is_empty() && *value != "v1" => return None,
            "pretty" => pretty = *value == "1",
            _ => {}
        }
    }
    let (target, meta_version) = match convert {
        None => (Target::Object, MetaVersion::V1),
        Some((kind, group, version)) => {
            if group != META_GROUP {
                return None;
            }
            let meta_version = match version {
                "v1" => MetaVersion::V1,
                "v1beta1" => MetaVersion::V1beta1,
                _ => return None,
            };
            let target = match kind {
                "Table" => Target::Table,
                "PartialObjectMetadata" => Target::PartialObjectMetadata,
                "PartialObjectMetadataList" => Target::PartialObjectMetadataList,
                _ => return None,
            };
            (target, meta_version)
        }
    };
    if format == Format::Protobuf && !protobuf_serves(target, serves) {
        return None;
    }
    Some(Choice {
        format,
        target,
        meta_version,
        pretty,
    })
}

/// Whether protobuf can carry `target` of a resource that `serves`.
fn protobuf_serves(target: Target, serves: Serves) -> bool {
    match target {
        Target::Object => serves == Serves::BuiltIn,
        // kube's Table cannot be written as protobuf.
        Target::Table => false,
        Target::PartialObjectMetadata | Target::PartialObjectMetadataList => true,
    }
}

// ---------------------------------------------------------------------------
// Content-Type parsing (Go's mime.ParseMediaType, as far as it matters here).

fn is_token_char(c: char) -> bool {
    c.is_ascii() && c > ' ' && c != '\u{7f}' && !"()<>@,;:\\\"/[]?=".contains(c)
}

fn consume_token(s: &str) -> (&str, &str) {
    let end = s.find(|c: char| !is_token_char(c)).unwrap_or(s.len());
    s.split_at(end)
}

/// Consumes a token or a quoted string; `None` when neither is there.
fn consume_value(s: &str) -> Option<&str> {
    if let Some(rest) = s.strip_prefix('"') {
        let mut escaped = false;
        for (i, c) in rest.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => return rest.get(i + 1..),
                '\r' | '\n' => return None,
                _ => {}
            }
        }
        None
    } else {
        let (token, rest) = consume_token(s);
        if token.is_empty() {
            None
        } else {
            Some(rest)
        }
    }
}

/// The lower-cased `type/subtype` of a `Content-Type`, or `None` when the
/// value is malformed (bad type, bad or duplicate parameter), as Go's
/// `mime.ParseMediaType` would refuse it.
fn parse_media_type(value: &str) -> Option<String> {
    let (base, mut rest) = match value.find(';') {
        Some(i) => value.split_at(i),
        None => (value, ""),
    };
    let media = base.trim().to_ascii_lowercase();
    let (main, after) = consume_token(&media);
    if main.is_empty() {
        return None;
    }
    if !after.is_empty() {
        let sub_and_rest = after.strip_prefix('/')?;
        let (sub, trailing) = consume_token(sub_and_rest);
        if sub.is_empty() || !trailing.is_empty() {
            return None;
        }
    }
    let mut seen: Vec<String> = Vec::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let after_semicolon = rest.strip_prefix(';')?.trim_start();
        let (key, after_key) = consume_token(after_semicolon);
        if key.is_empty() {
            if after_semicolon.trim().is_empty() {
                break; // a trailing ';' is tolerated
            }
            return None;
        }
        let after_eq = after_key.trim_start().strip_prefix('=')?.trim_start();
        rest = consume_value(after_eq)?;
        let key = key.to_ascii_lowercase();
        if seen.contains(&key) {
            return None;
        }
        seen.push(key);
    }
    Some(media)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn neg(accept: &str, list: bool) -> Negotiated {
        negotiate(Some(accept), list, Serves::BuiltIn).unwrap_or_else(|s| panic!("{accept}: {s}"))
    }

    fn obj(format: Format) -> Negotiated {
        Negotiated {
            format,
            target: Target::Object,
            meta_version: MetaVersion::V1,
            pretty: false,
        }
    }

    #[test]
    fn missing_or_empty_accept_is_json() {
        assert_eq!(
            negotiate(None, false, Serves::BuiltIn).unwrap(),
            obj(Format::Json)
        );
        assert_eq!(
            negotiate(Some(""), true, Serves::BuiltIn).unwrap(),
            obj(Format::Json)
        );
        assert_eq!(
            negotiate(Some("  "), true, Serves::BuiltIn).unwrap(),
            obj(Format::Json)
        );
    }

    #[test]
    fn plain_types_and_wildcards() {
        assert_eq!(neg("application/json", false), obj(Format::Json));
        assert_eq!(neg("application/yaml", false), obj(Format::Yaml));
        assert_eq!(neg("*/*", false), obj(Format::Json));
        assert_eq!(neg("*", false), obj(Format::Json));
        assert_eq!(neg("application/*", false), obj(Format::Json));
        assert_eq!(neg("Application/YAML", false), obj(Format::Yaml));
        assert_eq!(
            neg("application/json; charset=utf-8", false),
            obj(Format::Json)
        );
        assert_eq!(neg("text/html, */*;q=0.8", false), obj(Format::Json));
    }

    #[test]
    fn cbor_for_every_kind_and_representation() {
        for serves in [Serves::BuiltIn, Serves::JsonOnly] {
            let n = negotiate(Some("application/cbor"), false, serves).unwrap();
            assert_eq!((n.format, n.target), (Format::Cbor, Target::Object));
            assert_eq!(n.content_type(), "application/cbor");
            let n = negotiate(
                Some("application/cbor;as=Table;g=meta.k8s.io;v=v1"),
                true,
                serves,
            )
            .unwrap();
            assert_eq!((n.format, n.target), (Format::Cbor, Target::Table));
            let n = negotiate(
                Some("application/cbor;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
                true,
                serves,
            )
            .unwrap();
            assert_eq!(
                (n.format, n.target),
                (Format::Cbor, Target::PartialObjectMetadataList)
            );
            // A CBOR watch is a CBOR sequence.
            let n = negotiate_watch(Some("application/cbor"), serves).unwrap();
            assert_eq!(n.format, Format::Cbor);
            assert_eq!(n.stream_content_type(), "application/cbor-seq");
        }
        // Protobuf first where it serves, CBOR where it does not.
        let both = "application/vnd.kubernetes.protobuf, application/cbor";
        assert_eq!(
            negotiate(Some(both), false, Serves::BuiltIn)
                .unwrap()
                .format,
            Format::Protobuf
        );
        assert_eq!(
            negotiate(Some(both), false, Serves::JsonOnly)
                .unwrap()
                .format,
            Format::Cbor
        );
        // The 406 lists CBOR; `application/cbor-seq` is not a response type.
        let e = negotiate(Some("text/plain"), false, Serves::JsonOnly).unwrap_err();
        assert_eq!(
            e.message,
            "only the following media types are accepted: application/json, application/yaml, application/cbor"
        );
        let e = negotiate_watch(Some("application/cbor-seq"), Serves::JsonOnly).unwrap_err();
        assert_eq!(e.code, 406);
        let e = negotiate_watch(Some("application/yaml"), Serves::JsonOnly).unwrap_err();
        assert_eq!(
            e.message,
            "only the following media types are accepted: application/json;stream=watch, application/cbor-seq"
        );
        // Bodies: objects in CBOR, applies in CBOR, no other CBOR patch.
        assert_eq!(
            request_body(Some("application/cbor"), false).unwrap(),
            BodyFormat::Cbor
        );
        let apply = request_body(Some("application/apply-patch+cbor"), true).unwrap();
        assert_eq!(apply, BodyFormat::ApplyCbor);
        assert!(apply.is_apply() && apply.is_patch());
        assert_eq!(
            custom_resource_patch_body(Some("application/apply-patch+cbor")).unwrap(),
            BodyFormat::ApplyCbor
        );
        assert_eq!(
            request_body(Some("application/cbor"), true)
                .unwrap_err()
                .code,
            415
        );
    }

    #[test]
    fn protobuf_for_built_in_kinds() {
        let pb = |accept: &str, list: bool| negotiate(Some(accept), list, Serves::BuiltIn);
        assert_eq!(
            pb("application/vnd.kubernetes.protobuf", false).unwrap(),
            obj(Format::Protobuf)
        );
        // What client-go sends when configured for protobuf.
        let n = pb(
            "application/vnd.kubernetes.protobuf, application/json",
            true,
        )
        .unwrap();
        assert_eq!(n, obj(Format::Protobuf));
        assert_eq!(n.content_type(), "application/vnd.kubernetes.protobuf");
        assert_eq!(
            n.stream_content_type(),
            "application/vnd.kubernetes.protobuf;stream=watch"
        );
        assert_eq!(
            pb(
                "application/json;q=0.9, application/vnd.kubernetes.protobuf",
                false
            )
            .unwrap(),
            obj(Format::Protobuf)
        );
        assert_eq!(
            pb(
                "application/vnd.kubernetes.protobuf;q=0.5, application/json",
                false
            )
            .unwrap(),
            obj(Format::Json)
        );
        // Wildcards still mean JSON.
        assert_eq!(pb("*/*", false).unwrap(), obj(Format::Json));
        // A Table has no protobuf form: the range is skipped.
        assert_eq!(
            pb(
                "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1, application/yaml",
                true
            )
            .unwrap(),
            obj(Format::Yaml)
        );
        let n = pb(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
            true,
        )
        .unwrap();
        assert_eq!(
            (n.format, n.target),
            (Format::Protobuf, Target::PartialObjectMetadataList)
        );
        let e = pb("text/plain", false).unwrap_err();
        assert_eq!(
            e.message,
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf, application/cbor"
        );
    }

    #[test]
    fn protobuf_is_skipped_for_custom_resources() {
        let cr = |accept: &str, list: bool| negotiate(Some(accept), list, Serves::JsonOnly);
        assert_eq!(
            cr(
                "application/vnd.kubernetes.protobuf, application/json",
                true
            )
            .unwrap(),
            obj(Format::Json)
        );
        let e = cr("application/vnd.kubernetes.protobuf", false).unwrap_err();
        assert_eq!(e.code, 406);
        assert_eq!(e.reason, "NotAcceptable");
        assert_eq!(
            e.message,
            "only the following media types are accepted: application/json, application/yaml, application/cbor"
        );
        // Their metadata is a built-in kind.
        let n = cr(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            false,
        )
        .unwrap();
        assert_eq!(
            (n.format, n.target),
            (Format::Protobuf, Target::PartialObjectMetadata)
        );
        let e = negotiate_watch(
            Some("application/vnd.kubernetes.protobuf;stream=watch"),
            Serves::JsonOnly,
        )
        .unwrap_err();
        assert_eq!(e.code, 406);
        let n = negotiate_watch(
            Some("application/vnd.kubernetes.protobuf;stream=watch, application/json"),
            Serves::JsonOnly,
        )
        .unwrap();
        assert_eq!(n.format, Format::Json);
        // PartialObjectMetadataList on a watch sends the objects: not in
        // protobuf for a custom resource.
        let poml =
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        let n =
            negotiate_watch(Some(&format!("{poml}, application/json")), Serves::JsonOnly).unwrap();
        assert_eq!((n.format, n.target), (Format::Json, Target::Object));
        assert_eq!(
            negotiate_watch(Some(poml), Serves::JsonOnly)
                .unwrap_err()
                .code,
            406
        );
        // A YAML Table with a protobuf stream: the Table goes as JSON.
        let e = negotiate_watch(
            Some(
                "application/yaml;as=Table;g=meta.k8s.io;v=v1, application/vnd.kubernetes.protobuf",
            ),
            Serves::BuiltIn,
        )
        .unwrap_err();
        assert_eq!(e.code, 406);
        let n = negotiate_watch(
            Some("application/yaml;as=Table;g=meta.k8s.io;v=v1, application/vnd.kubernetes.protobuf, application/json;q=0.5"),
            Serves::BuiltIn,
        )
        .unwrap();
        assert_eq!((n.format, n.target), (Format::Json, Target::Table));
    }

    #[test]
    fn nothing_acceptable_is_406() {
        for accept in [
            "text/html",
            "application/xml",
            "image/*",
            "application/json;q=0",
            "json",
            "a/b/c",
        ] {
            let e = negotiate(Some(accept), false, Serves::BuiltIn).unwrap_err();
            assert_eq!(e.code, 406, "{accept}");
        }
    }

    #[test]
    fn q_values_order_the_ranges() {
        assert_eq!(
            neg("application/json;q=0.5, application/yaml", false),
            obj(Format::Yaml)
        );
        assert_eq!(
            neg("application/yaml;q=0.9, application/json", false),
            obj(Format::Json)
        );
        assert_eq!(
            neg("application/yaml;q=0.9, application/json;q=0.8", false),
            obj(Format::Yaml)
        );
        // Equal q: order of the header.
        assert_eq!(
            neg("application/yaml, application/json", false),
            obj(Format::Yaml)
        );
        assert_eq!(
            neg("application/json, application/yaml", false),
            obj(Format::Json)
        );
        // Equal q: specific before wildcard.
        assert_eq!(neg("*/*, application/yaml", false), obj(Format::Yaml));
        assert_eq!(
            neg("application/*, application/yaml", false),
            obj(Format::Yaml)
        );
        // Higher q wins over specificity.
        assert_eq!(
            neg("*/*;q=1, application/yaml;q=0.5", false),
            obj(Format::Json)
        );
        // q=0 excludes; an unparsable q counts as 0.
        assert_eq!(
            neg("application/yaml;q=0, application/json;q=0.1", false),
            obj(Format::Json)
        );
        assert_eq!(
            neg("application/yaml;q=x, application/json;q=0.1", false),
            obj(Format::Json)
        );
        assert_eq!(neg("application/json;q=0, */*", false), obj(Format::Json));
    }

    #[test]
    fn table() {
        for accept in [
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            "application/json;as=Table;g=meta.k8s.io;v=v1",
            "application/json; as=Table; g=meta.k8s.io; v=v1",
            "*/*;as=Table;g=meta.k8s.io;v=v1",
        ] {
            for list in [false, true] {
                let n = neg(accept, list);
                assert_eq!(n.target, Target::Table, "{accept}");
                assert_eq!(n.format, Format::Json);
                assert_eq!(n.content_type(), "application/json");
                assert_eq!(n.target_api_version(), Some("meta.k8s.io/v1"));
            }
        }
        let n = neg("application/json;as=Table;v=v1beta1;g=meta.k8s.io", true);
        assert_eq!(
            (n.target, n.meta_version),
            (Target::Table, MetaVersion::V1beta1)
        );
        assert_eq!(n.target_api_version(), Some("meta.k8s.io/v1beta1"));
        let n = neg("application/yaml;as=Table;v=v1;g=meta.k8s.io", true);
        assert_eq!((n.format, n.target), (Format::Yaml, Target::Table));
        assert_eq!(n.content_type(), "application/yaml");
    }

    #[test]
    fn unknown_representations_fall_back_or_fail() {
        for bad in [
            "application/json;as=Table",
            "application/json;as=Table;g=meta.k8s.io",
            "application/json;as=Table;g=meta.k8s.io;v=v2",
            "application/json;as=Table;g=apps;v=v1",
            "application/json;as=Pod;g=meta.k8s.io;v=v1",
            "application/json;g=meta.k8s.io;v=v1",
            "application/json;as=\"Table\";g=meta.k8s.io;v=v1",
        ] {
            assert_eq!(
                negotiate(Some(bad), true, Serves::BuiltIn)
                    .unwrap_err()
                    .code,
                406,
                "{bad}"
            );
            assert_eq!(
                neg(&format!("{bad}, application/json"), true),
                obj(Format::Json)
            );
        }
        let e = negotiate(
            Some("application/json;as=Table;g=meta.k8s.io;v=v1;q=0"),
            true,
            Serves::BuiltIn,
        )
        .unwrap_err();
        assert_eq!(e.code, 406);
    }

    #[test]
    fn partial_object_metadata() {
        let pom = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        let poml = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert_eq!(neg(pom, false).target, Target::PartialObjectMetadata);
        // On a collection the API returns a PartialObjectMetadataList.
        assert_eq!(neg(pom, true).target, Target::PartialObjectMetadataList);
        assert_eq!(neg(poml, true).target, Target::PartialObjectMetadataList);
        let e = negotiate(Some(poml), false, Serves::BuiltIn).unwrap_err();
        assert_eq!(e.code, 406);
        assert_eq!(
            e.message,
            "you requested PartialObjectMetadataList, but the requested object is not a list"
        );
        // A preference with a fallback, as the docs suggest.
        let n = neg(&format!("{pom}, application/json;q=0.9"), true);
        assert_eq!(n.target, Target::PartialObjectMetadataList);
        let n = neg(
            "application/yaml;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1",
            false,
        );
        assert_eq!(n.format, Format::Yaml);
        assert_eq!(n.target_api_version(), Some("meta.k8s.io/v1beta1"));
    }

    #[test]
    fn stream_and_pretty_parameters() {
        assert_eq!(
            neg("application/json;stream=watch", false),
            obj(Format::Json)
        );
        assert_eq!(
            negotiate(Some("application/json;stream=foo"), false, Serves::BuiltIn)
                .unwrap_err()
                .code,
            406
        );
        assert_eq!(
            negotiate(
                Some("application/yaml;stream=watch"),
                false,
                Serves::BuiltIn
            )
            .unwrap_err()
            .code,
            406
        );
        assert!(neg("application/json;pretty=1", false).pretty);
        assert!(!neg("application/json;pretty=0", false).pretty);
        assert_eq!(neg("application/json;sv=v1", false), obj(Format::Json));
        assert_eq!(
            negotiate(Some("application/json;sv=v2"), false, Serves::BuiltIn)
                .unwrap_err()
                .code,
            406
        );
        assert_eq!(
            neg("application/json;foo=bar;export=1", false),
            obj(Format::Json)
        );
    }

    #[test]
    fn watch_negotiation() {
        let n = negotiate_watch(None, Serves::BuiltIn).unwrap();
        assert_eq!((n.format, n.target), (Format::Json, Target::Object));
        assert_eq!(n.content_type(), "application/json");
        assert_eq!(
            negotiate_watch(Some("application/json;stream=watch"), Serves::BuiltIn)
                .unwrap()
                .format,
            Format::Json
        );
        assert_eq!(
            negotiate_watch(
                Some("application/vnd.kubernetes.protobuf;stream=watch, application/json"),
                Serves::BuiltIn
            )
            .unwrap()
            .format,
            Format::Protobuf
        );
        // YAML cannot stream.
        let e = negotiate_watch(Some("application/yaml"), Serves::BuiltIn).unwrap_err();
        assert_eq!(e.code, 406);
        assert_eq!(
            e.message,
            "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch, application/cbor-seq"
        );
        let e = negotiate_watch(Some("text/plain"), Serves::BuiltIn).unwrap_err();
        assert_eq!(
            e.message,
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf, application/cbor"
        );
        let n = negotiate_watch(
            Some("application/json;as=Table;g=meta.k8s.io;v=v1"),
            Serves::BuiltIn,
        )
        .unwrap();
        assert_eq!(n.target, Target::Table);
        let n = negotiate_watch(
            Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
            Serves::BuiltIn,
        )
        .unwrap();
        assert_eq!(n.target, Target::PartialObjectMetadata);
        let n = negotiate_watch(
            Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
            Serves::BuiltIn,
        )
        .unwrap();
        assert_eq!(n.target, Target::Object);
        // The representation comes from the first negotiation, the encoding
        // from the second.
        let n = negotiate_watch(
            Some("application/yaml;as=Table;g=meta.k8s.io;v=v1, application/json"),
            Serves::BuiltIn,
        )
        .unwrap();
        assert_eq!((n.format, n.target), (Format::Json, Target::Table));
        assert!(
            !negotiate_watch(Some("application/json;pretty=1"), Serves::BuiltIn)
                .unwrap()
                .pretty
        );
    }

    #[test]
    fn create_and_update_bodies() {
        assert_eq!(request_body(None, false).unwrap(), BodyFormat::Json);
        assert_eq!(request_body(Some(""), false).unwrap(), BodyFormat::Json);
        assert_eq!(
            request_body(Some("application/json"), false).unwrap(),
            BodyFormat::Json
        );
        assert_eq!(
            request_body(Some("application/json; charset=utf-8"), false).unwrap(),
            BodyFormat::Json
        );
        assert_eq!(
            request_body(Some("Application/JSON;charset=\"utf-8\";"), false).unwrap(),
            BodyFormat::Json
        );
        assert_eq!(
            request_body(Some("application/yaml"), false).unwrap(),
            BodyFormat::Yaml
        );
        assert_eq!(
            request_body(Some("application/vnd.kubernetes.protobuf"), false).unwrap(),
            BodyFormat::Protobuf
        );
        for bad in [
            "text/plain",
            "application/cbor-seq",
            "application/merge-patch+json",
            "application/json;charset",
            "application/json; a=1; a=2",
            "application/json/x",
            "application/json;charset=\"utf-8",
        ] {
            let e = request_body(Some(bad), false).unwrap_err();
            assert_eq!(e.code, 415, "{bad}");
            assert_eq!(e.reason, "UnsupportedMediaType");
            assert_eq!(
                e.message,
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf, application/cbor"
            );
        }
    }

    #[test]
    fn patch_bodies() {
        let cases = [
            ("application/json-patch+json", BodyFormat::JsonPatch),
            ("application/merge-patch+json", BodyFormat::MergePatch),
            (
                "application/merge-patch+json; charset=utf-8",
                BodyFormat::MergePatch,
            ),
            (
                "application/strategic-merge-patch+json",
                BodyFormat::StrategicMergePatch,
            ),
            ("application/apply-patch+yaml", BodyFormat::ApplyYaml),
        ];
        for (ct, want) in cases {
            assert_eq!(request_body(Some(ct), true).unwrap(), want, "{ct}");
            assert!(want.is_patch());
        }
        assert!(BodyFormat::ApplyYaml.is_apply());
        for bad in [
            None,
            Some(""),
            Some("application/json"),
            Some("application/cbor"),
        ] {
            let e = request_body(bad, true).unwrap_err();
            assert_eq!(e.code, 415, "{bad:?}");
            assert_eq!(
                e.message,
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml, application/apply-patch+cbor"
            );
        }
        let e =
            custom_resource_patch_body(Some("application/strategic-merge-patch+json")).unwrap_err();
        assert_eq!(e.code, 415);
        assert_eq!(
            e.message,
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/apply-patch+cbor"
        );
        assert_eq!(
            custom_resource_patch_body(Some("application/merge-patch+json")).unwrap(),
            BodyFormat::MergePatch
        );
    }

    #[test]
    fn gzip() {
        assert!(accepts_gzip(Some("gzip")));
        assert!(accepts_gzip(Some("deflate, gzip")));
        assert!(accepts_gzip(Some("gzip, deflate, br")));
        assert!(accepts_gzip(Some(" GZIP ;q=0.5")));
        assert!(!accepts_gzip(Some("gzip;q=0")));
        assert!(!accepts_gzip(Some("deflate")));
        assert!(!accepts_gzip(Some("x-gzip2")));
        assert!(!accepts_gzip(Some("")));
        assert!(!accepts_gzip(None));
    }

    proptest! {
        #[test]
        fn negotiate_never_panics(accept in any::<String>(), list in any::<bool>()) {
            let _ = negotiate(Some(&accept), list, Serves::BuiltIn);
            let _ = negotiate_watch(Some(&accept), Serves::BuiltIn);
        }

        #[test]
        fn negotiate_never_panics_on_accept_like_input(
            accept in "[a-z*/;=, .0-9qQ\"]{0,40}",
            list in any::<bool>(),
        ) {
            let _ = negotiate(Some(&accept), list, Serves::BuiltIn);
            let _ = negotiate_watch(Some(&accept), Serves::BuiltIn);
        }

        #[test]
        fn request_body_never_panics(ct in any::<String>(), patch in any::<bool>()) {
            let _ = request_body(Some(&ct), patch);
            let _ = custom_resource_patch_body(Some(&ct));
            let _ = accepts_gzip(Some(&ct));
        }

        #[test]
        fn request_body_never_panics_on_media_like_input(ct in "[a-z/;=, \"\\\\+-]{0,40}") {
            let _ = request_body(Some(&ct), false);
        }
    }
}
