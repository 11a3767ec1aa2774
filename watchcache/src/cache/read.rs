//! Which reads the cache serves, and serving a list from a snapshot.
//!
//! `route_list` / `route_get` are the one small pure decision of where a read
//! goes; the `Cacher` carries it out (waiting where the route says, falling
//! back to etcd where the cache cannot answer in time).

use super::state::Objects;
use crate::storage::{ListOptions, ListResult, Revision};
use apimachinery::continue_token;
use apimachinery::read::{Freshness, Predicate};
use std::ops::Bound;

/// Where a read is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Straight to etcd.
    Etcd,
    /// The latest state, once the cache has applied etcd's current revision
    /// (read by a quorum read after the request arrived).
    Consistent,
    /// The latest state, once the cache has applied this revision (0 = now).
    AtLeast(Revision),
    /// The state at exactly this revision (a snapshot).
    Exact(Revision),
}

/// Where a list goes. A continue token pins the first page's revision (or
/// asks for the latest state when it carries -1, after a 410).
pub(crate) fn route_list(opts: &ListOptions, serving: bool) -> Route {
    if !serving {
        return Route::Etcd;
    }
    if let Some(from) = &opts.continue_from {
        return match from.revision {
            r if r > 0 => Route::Exact(r),
            r if r < 0 => Route::Consistent,
            // Refused by the etcd store with the right error.
            _ => Route::Etcd,
        };
    }
    match opts.freshness {
        Freshness::MostRecent => Route::Consistent,
        Freshness::NotOlderThan(n) => Route::AtLeast(n.max(0)),
        Freshness::Exact(n) if n > 0 => Route::Exact(n),
        Freshness::Exact(_) => Route::Etcd,
    }
}

/// Where a get goes. A consistent get is served like a consistent list
/// (kube-apiserver sends it to etcd): the coalesced revision read makes
/// the proof of freshness cheaper than a read of the key would be.
pub(crate) fn route_get(freshness: Freshness, serving: bool) -> Route {
    if !serving {
        return Route::Etcd;
    }
    match freshness {
        Freshness::MostRecent => Route::Consistent,
        Freshness::NotOlderThan(n) => Route::AtLeast(n.max(0)),
        Freshness::Exact(n) if n > 0 => Route::Exact(n),
        Freshness::Exact(_) => Route::Etcd,
    }
}

/// One page of `prefix` from `objects` (the state at `revision`), starting at
/// `start` (a key relative to the prefix, from a continue token), with the
/// etcd store's paging rules: `limit` counts matching items; a continue token
/// (after the last returned key, at `revision`) when any key follows;
/// `remaining_item_count` only without a selector.
pub(crate) fn list_snapshot(
    objects: &Objects,
    revision: Revision,
    prefix: &str,
    start: Option<&str>,
    limit: Option<usize>,
    predicate: &Predicate,
) -> ListResult {
    let lower = match start {
        Some(start) => format!("{prefix}{start}"),
        None => prefix.to_string(),
    };
    let limit = limit.filter(|l| *l > 0);
    let everything = predicate.is_everything();
    let mut iter = objects
        .range::<_, str>((Bound::Included(lower.as_str()), Bound::Unbounded))
        .take_while(|(key, _)| key.starts_with(prefix));
    let mut items = Vec::new();
    let mut last_key = None;
    let mut has_more = false;
    let mut remaining = 0i64;
    while let Some((key, cached)) = iter.next() {
        if limit.is_some_and(|l| items.len() >= l) {
            has_more = true;
            if everything {
                remaining = i64::try_from(iter.count()).unwrap_or(i64::MAX - 1) + 1;
            }
            break;
        }
        if everything || cached.object.matches(predicate) {
            items.push(cached.object.clone());
        }
        last_key = Some(key);
    }
    let mut result = ListResult {
        items,
        revision,
        continue_token: None,
        remaining_item_count: None,
    };
    if let (true, Some(key)) = (has_more, last_key) {
        let mut next = key.get(prefix.len()..).unwrap_or_default().to_string();
        next.push('\0');
        result.continue_token = Some(continue_token::encode(&next, revision));
        if everything {
            result.remaining_item_count = Some(remaining);
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::state::Cached;
    use crate::storage::Object;
    use apimachinery::read::ContinueFrom;
    use apimachinery::selector::LabelSelector;
    use serde_json::json;
    use std::sync::Arc;

    fn opts(freshness: Freshness, continue_revision: Option<i64>) -> ListOptions {
        ListOptions {
            freshness,
            limit: None,
            continue_from: continue_revision.map(|revision| ContinueFrom {
                start_key: "a\u{0}".into(),
                revision,
            }),
            predicate: Predicate::everything(),
        }
    }

    #[test]
    fn routes() {
        use Freshness::*;
        assert_eq!(route_list(&opts(MostRecent, None), false), Route::Etcd);
        assert_eq!(route_list(&opts(MostRecent, None), true), Route::Consistent);
        assert_eq!(
            route_list(&opts(NotOlderThan(0), None), true),
            Route::AtLeast(0)
        );
        assert_eq!(
            route_list(&opts(NotOlderThan(7), None), true),
            Route::AtLeast(7)
        );
        assert_eq!(route_list(&opts(Exact(7), None), true), Route::Exact(7));
        assert_eq!(route_list(&opts(Exact(0), None), true), Route::Etcd);
        assert_eq!(
            route_list(&opts(MostRecent, Some(9)), true),
            Route::Exact(9)
        );
        assert_eq!(
            route_list(&opts(MostRecent, Some(-1)), true),
            Route::Consistent
        );
        assert_eq!(route_list(&opts(MostRecent, Some(0)), true), Route::Etcd);
        assert_eq!(route_get(MostRecent, true), Route::Consistent);
        assert_eq!(route_get(NotOlderThan(3), true), Route::AtLeast(3));
        assert_eq!(route_get(NotOlderThan(3), false), Route::Etcd);
    }

    fn objects(names: &[(&str, &str)]) -> Objects {
        let mut objects = Objects::new();
        for (i, (name, app)) in names.iter().enumerate() {
            let key: Arc<str> = Arc::from(format!("/r/p/{name}"));
            let value = json!({"metadata": {"name": name, "labels": {"app": app}}});
            let object = Object::at_revision(value, i as i64 + 1);
            objects.insert(key, Cached { object, size: 1 });
        }
        objects.insert(
            Arc::from("/r/q/other"),
            Cached {
                object: Object::at_revision(json!({}), 1),
                size: 1,
            },
        );
        objects
    }

    fn names(result: &ListResult) -> Vec<String> {
        result
            .items
            .iter()
            .map(|o| {
                o.value()["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn pages_like_the_etcd_store() {
        let all = objects(&[("a", "web"), ("b", "db"), ("c", "web"), ("d", "db")]);
        let everything = Predicate::everything();
        let first = list_snapshot(&all, 9, "/r/p/", None, Some(3), &everything);
        assert_eq!(names(&first), ["a", "b", "c"]);
        assert_eq!(first.remaining_item_count, Some(1));
        let token = first.continue_token.unwrap_or_default();
        let from = continue_token::decode(&token).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((from.start_key.as_str(), from.revision), ("c\u{0}", 9));
        let second = list_snapshot(
            &all,
            9,
            "/r/p/",
            Some(&from.start_key),
            Some(3),
            &everything,
        );
        assert_eq!(names(&second), ["d"]);
        assert_eq!(second.continue_token, None);
        assert_eq!(second.remaining_item_count, None);

        let exact = list_snapshot(&all, 9, "/r/p/", None, Some(4), &everything);
        assert_eq!((exact.items.len(), exact.continue_token), (4, None));

        let web = Predicate {
            label: LabelSelector::parse("app=web").unwrap_or_default(),
            ..Predicate::default()
        };
        let page = list_snapshot(&all, 9, "/r/p/", None, Some(1), &web);
        assert_eq!(names(&page), ["a"]);
        assert_eq!(page.remaining_item_count, None);
        assert!(page.continue_token.is_some());
        let page = list_snapshot(&all, 9, "/r/p/", Some("a\u{0}"), Some(1), &web);
        assert_eq!(names(&page), ["c"]);
        // A non-matching key follows: a token, and then an empty last page.
        assert!(page.continue_token.is_some());
        let page = list_snapshot(&all, 9, "/r/p/", Some("c\u{0}"), Some(1), &web);
        assert!(page.items.is_empty());
        assert_eq!(page.continue_token, None);

        let unlimited = list_snapshot(&all, 9, "/r/p/", None, None, &web);
        assert_eq!(names(&unlimited), ["a", "c"]);
        assert_eq!(unlimited.continue_token, None);
    }
}
